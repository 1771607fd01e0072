"""Agents as the seeds know them, on a real dev server: handoffs, agents run as tools (child
runs), typed output and guardrails. Each run is replayed from its own history afterwards."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from durable_agent_runner import Agent, Registry, ToolContext, handoff, tool
from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.client.export import export_run
from durable_agent_runner.workflows import types as t
from tests.fixtures import team_agents
from tests.helpers import calls, replay, script, start, transcript
from tests.test_approvals import decide, pending, update
from tests.test_client import cli  # noqa: F401  (the fixture)

TEAM = ["tests.fixtures.team_agents"]
AGENT_NAME = t.SA_AGENT


@pytest.fixture(scope="module")
def team() -> Registry:
    return Registry.from_modules(TEAM)


def requests_for(llm: Any, model: str) -> list[dict[str, Any]]:
    return [r["body"] for r in llm.requests() if r["body"].get("model") == model]


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def status(handle: Any) -> t.RunStatus:
    return await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)


# ------------------------------------------------------------------------------- handoffs


async def test_a_handoff_chain_runs_each_agent_with_its_own_instructions_and_tools(
    client, task_queue, worker_factory, llm, team, tmp_path
):
    model = script(
        llm,
        calls(("transfer_to_billing", {})),
        calls(("lookup_invoice", {"invoice_id": "INV-1"}), ("transfer_to_refunds", {})),
        {"content": "Refunded, sorry for the trouble."},
    )
    async with worker_factory(registry=team):
        handle = await start(client, task_queue, "I was charged twice", agent="triage", model=model)
        result = await handle.result()
        s = await status(handle)
        described = await handle.describe()
        events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
        exported = await export_run(client, handle.id, CaptureStore(tmp_path))
    assert (result.agent, result.output) == ("refunds", "Refunded, sorry for the trouble.")
    handoffs = [(h["from_agent"], h["to_agent"], h["turn"]) for h in exported if h["type"] == "handoff"]
    assert handoffs == [("triage", "billing", 1), ("billing", "refunds", 2)]  # as status says them
    assert [(h.from_agent, h.to_agent, h.turn) for h in result.handoffs] == [
        ("triage", "billing", 1),
        ("billing", "refunds", 2),
    ]
    first, second, third = requests_for(llm, model)
    assert first["messages"][0] == {"role": "system", "content": team_agents.triage.instructions}
    assert offered(first) == ["research", "transfer_to_billing", "transfer_to_refunds"]
    assert second["messages"][0]["content"] == team_agents.billing.instructions
    assert offered(second) == ["lookup_invoice", "transfer_to_triage", "transfer_to_refunds"]
    assert third["messages"][0]["content"] == team_agents.refunds.instructions
    assert offered(third) == ["issue_refund"]
    assert [m["role"] for m in third["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]
    assert s.agent == "refunds" and [h.to_agent for h in s.handoffs] == ["billing", "refunds"]
    assert set(s.usage_by_agent) == {"triage", "billing", "refunds"}
    assert all(u.requests == 1 for u in s.usage_by_agent.values())
    assert described.typed_search_attributes.get(AGENT_NAME) == "refunds"
    kinds = [e.detail for e in events if e.kind == "handoff"]
    assert kinds == ["triage → billing", "billing → refunds"]
    await replay(handle)


def handing_off(llm: Any, input_filter: Any) -> tuple[Registry, str, str]:
    """desk → clerk through `input_filter`, each agent on its own script."""
    clerk_model = script(llm, {"content": "Clerk here."})
    clerk = Agent(name="clerk", model=clerk_model, instructions="You are the clerk.")
    desk_model = script(llm, calls(("find_fact", {"topic": "x"})), calls(("transfer_to_clerk", {})))
    desk = Agent(
        name="desk",
        model=desk_model,
        tools=[team_agents.find_fact],
        handoffs=[handoff(clerk, input_filter=input_filter)],
    )
    return Registry(agents=[desk]), desk_model, clerk_model


@pytest.mark.parametrize("input_filter", ["remove_tools", team_agents.customer_messages])
async def test_a_handoffs_input_filter_decides_what_the_next_agent_sees(
    client, task_queue, worker_factory, llm, input_filter
):
    registry, desk_model, clerk_model = handing_off(llm, input_filter)
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Help me", agent="desk")
        result = await handle.result()
        messages = await transcript(handle)
    assert (result.agent, result.output) == ("clerk", "Clerk here.")
    assert len(requests_for(llm, desk_model)) == 2
    (seen,) = requests_for(llm, clerk_model)
    # the tool calls and their results are gone: the clerk sees only what the customer wrote
    assert [m["role"] for m in seen["messages"]] == ["system", "user"]
    assert [m.role for m in messages] == ["user", "assistant"]  # the edited transcript, then the answer
    await replay(handle)


# -------------------------------------------------------------------------- agents as tools


@tool
async def slow_fact(topic: str, ctx: ToolContext) -> str:
    """A fact that takes a while.

    Args:
        topic: What to look up.
    """
    await asyncio.sleep(30)
    return f"{topic}: slow fact"


@tool
def secret_fact(topic: str) -> str:
    """A fact that needs a person's approval.

    Args:
        topic: What to look up.
    """
    return f"{topic}: classified"


def research_team(
    llm: Any, child_steps: list[dict[str, Any]], parent_steps: list[dict[str, Any]], **child: Any
) -> Registry:
    """A lead agent whose tool `ask` runs `scholar` as a child run, each on its own script."""
    scholar = Agent(name="scholar", model=script(llm, *child_steps), **child)
    lead = Agent(name="lead", model=script(llm, *parent_steps), tools=[scholar.as_tool(name="ask")])
    return Registry(agents=[lead])


async def child_runs(handle: Any) -> list[str]:
    history = await handle.fetch_history()
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]


async def first_child(client: Any, handle: Any, timeout: float = 20.0) -> Any:
    """The handle of the run's first child run, once it has one."""
    deadline = time.monotonic() + timeout
    while not (children := await child_runs(handle)):
        assert time.monotonic() < deadline, "no child run started"
        await asyncio.sleep(0.1)
    child = client.get_workflow_handle(children[0], result_type=t.RunResult)
    while True:  # initiated in the parent's history a moment before the child itself exists
        try:
            await child.describe()
            return child
        except RPCError:
            assert time.monotonic() < deadline, "the child run never started"
            await asyncio.sleep(0.1)


async def test_agents_as_tools_run_as_parallel_child_runs_whose_usage_rolls_up(client, task_queue, worker_factory, llm):
    registry = research_team(
        llm,
        [{"content": "Tides follow the moon.", "usage": {"prompt_tokens": 100, "completion_tokens": 10}}],
        [calls(("ask", {"input": "tides"}), ("ask", {"input": "moon"})), {"content": "Both answered."}],
    )
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        result = await handle.result()
        children = await child_runs(handle)
        child_results = [await client.get_workflow_handle(c, result_type=t.RunResult).result() for c in children]
        child_desc = await client.get_workflow_handle(children[0]).describe()
        messages = await transcript(handle)
    assert result.output == "Both answered."
    assert children == [f"{handle.id}.call_1_0", f"{handle.id}.call_1_1"]
    history = await handle.fetch_history()
    started = [i for i, e in enumerate(history.events)
               if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]  # fmt: skip
    assert started[1] == started[0] + 1  # both started by one workflow task: they ran side by side
    assert child_desc.parent_id == handle.id  # the Web UI's Relationships tab
    assert [r.agent for r in child_results] == ["scholar", "scholar"]
    results = [m.content for m in messages if isinstance(m, t.ToolMessage)]
    assert results == ["Tides follow the moon.", "Tides follow the moon."]
    assert result.usage_by_agent["scholar"].requests == 2 and result.usage_by_agent["scholar"].input_tokens == 200
    assert result.usage.requests == 4  # the lead's two calls and the scholar's two
    await replay(handle)


async def test_a_child_that_needs_approval_waits_for_its_own_decision(client, task_queue, worker_factory, llm):
    registry = research_team(
        llm,
        [calls(("secret_fact", {"topic": "tides"})), {"content": "Classified, but here it is."}],
        [calls(("ask", {"input": "tides"})), {"content": "done"}],
        tools=[secret_fact],
        approvals={"secret_fact": "always"},
    )
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        child = await first_child(client, handle)
        (waiting,) = await pending(child)
        assert (waiting.tool, waiting.arguments) == ("secret_fact", {"topic": "tides"})
        assert (await status(handle)).status == "running"  # the parent waits on its child
        await update(child, decide(waiting.call_id, by="alice"))
        result = await handle.result()
    assert result.output == "done"
    assert (await child.result()).output == "Classified, but here it is."
    await replay(handle)
    await replay(child)


async def test_cancelling_the_parent_cancels_its_child(client, task_queue, worker_factory, llm):
    registry = research_team(
        llm,
        [calls(("slow_fact", {"topic": "tides"})), {"content": "never"}],
        [calls(("ask", {"input": "tides"})), {"content": "never"}],
        tools=[slow_fact],
    )
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        child = await first_child(client, handle)
        deadline = time.monotonic() + 20
        while (await status(child)).phase != "running_tools":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(child.result(), 30)
        assert (await status(child)).phase == "cancelled"
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED


# ---------------------------------------------------------------------------- typed output


class Ticket(BaseModel):
    title: str
    priority: int


ticketer = Agent(name="ticketer", instructions="File a ticket.", output_type=Ticket, output_retries=1)


@pytest.fixture(scope="module")
def typed() -> Registry:
    return Registry(agents=[ticketer])


async def test_typed_output_goes_out_as_the_response_format_and_comes_back_an_object(
    client, task_queue, worker_factory, llm, typed
):
    model = script(llm, {"json": {"title": "Printer on fire", "priority": 1}})
    async with worker_factory(registry=typed):
        handle = await start(client, task_queue, "The printer is on fire", agent="ticketer", model=model)
        result = await handle.result()
    assert result.output_object == {"title": "Printer on fire", "priority": 1}
    (body,) = requests_for(llm, model)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Ticket"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["title", "priority"]
    await replay(handle)


async def test_an_invalid_output_goes_back_to_the_model_then_is_fixed(client, task_queue, worker_factory, llm, typed):
    # fake_llm ignores the response format, as some servers do: the same path handles both
    model = script(llm, {"content": "Sure! Priority one."}, {"json": {"title": "Fire", "priority": 1}})
    async with worker_factory(registry=typed):
        handle = await start(client, task_queue, "The printer is on fire", agent="ticketer", model=model)
        result = await handle.result()
    assert result.output_object == {"title": "Fire", "priority": 1} and result.turns == 2
    feedback = requests_for(llm, model)[1]["messages"][-1]
    assert feedback["role"] == "user" and "not a valid Ticket" in feedback["content"]
    await replay(handle)


async def test_invalid_output_to_the_bound_fails_with_model_behavior_error(
    client, task_queue, worker_factory, llm, typed
):
    model = script(llm, {"content": "no"}, {"json": {"title": "Fire"}}, {"content": "never asked"})
    async with worker_factory(registry=typed):
        handle = await start(client, task_queue, "The printer is on fire", agent="ticketer", model=model)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        s = await status(handle)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ModelBehaviorError"
    assert "after 2 tries" in cause.message and "priority" in cause.message
    assert (s.error_type, s.status) == ("ModelBehaviorError", "failed")
    assert len(requests_for(llm, model)) == 2


# ------------------------------------------------------------------------------ guardrails


async def test_an_input_tripwire_ends_the_run_before_any_tool_runs(
    client, task_queue, worker_factory, llm, team, counter_file
):
    model = script(llm, calls(("find_fact", {"topic": "x"})), {"content": "never"})
    gate = Agent(name="gate", tools=[team_agents.find_fact], input_guardrails=team_agents.gatekeeper.input_guardrails)
    async with worker_factory(registry=Registry(agents=[gate])):
        handle = await start(client, task_queue, "Tell me the FORBIDDEN thing", agent="gate", model=model)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        s = await status(handle)
        history = await handle.fetch_history()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InputGuardrailTripwireTriggered"
    assert "no_forbidden_input" in cause.message and '"checked_chars": 27' in cause.message
    assert s.error_type == "InputGuardrailTripwireTriggered"
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]  # fmt: skip
    assert t.TOOL_CALL_ACTIVITY not in scheduled
    await replay(handle)


async def test_guardrails_that_pass_let_the_run_answer(client, task_queue, worker_factory, llm, team):
    model = script(llm, {"content": "All fine."})
    async with worker_factory(registry=team):
        handle = await start(client, task_queue, "hello", agent="relaxed", model=model)
        assert (await handle.result()).output == "All fine."
        events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
    verdicts = [e.detail for e in events if e.kind == "guardrail"]
    assert verdicts == ["input guardrail input_ok: passed", "output guardrail output_ok: passed"]
    await replay(handle)


async def test_a_guardrail_may_ask_a_model_itself(client, task_queue, worker_factory, llm, team):
    model = script(llm, {"content": "Hi."})
    async with worker_factory(registry=team):
        fine = await start(client, task_queue, "hello there", agent="gatekeeper", model=model)
        assert (await fine.result()).output == "Hi."
    echoed = [r for r in llm.requests() if r["body"].get("model") == "echo"]
    assert echoed and "hello there" in str(echoed[-1]["body"])


async def test_an_output_tripwire_fails_the_run_with_the_guardrails_name(client, task_queue, worker_factory, llm, team):
    model = script(llm, {"content": "Here is the forbidden answer."})
    async with worker_factory(registry=team):
        handle = await start(client, task_queue, "tell me", agent="censor", model=model)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "OutputGuardrailTripwireTriggered"
    assert "output guardrail 'no_forbidden_output' tripped" in cause.message
    await replay(handle)


def test_handoff_builds_a_frozen_transfer():
    spec = Agent(name="a", handoffs=[handoff(team_agents.billing, input_filter="remove_tools")]).spec()
    assert [(h.agent, h.tool_name, h.input_filter) for h in spec.handoffs] == [
        ("billing", "transfer_to_billing", "remove_tools")
    ]


async def test_the_cli_shows_typed_output_and_a_tripwire_as_a_user_sees_them(
    cli, client, task_queue, worker_factory, llm
):
    model = script(llm, {"json": {"title": "Printer on fire", "priority": 1}})
    registry = Registry(agents=[ticketer, team_agents.censor])
    async with worker_factory(registry=registry):
        ticket = await start(client, task_queue, "The printer is on fire", agent="ticketer", model=model)
        await ticket.result()
        as_json, as_text = await cli("result", ticket.id, "--json"), await cli("result", ticket.id)
        censored = await start(
            client, task_queue, "tell me", agent="censor", model=script(llm, {"content": "forbidden"})
        )
        with pytest.raises(WorkflowFailureError):
            await censored.result()
        status_json = await cli("status", censored.id, "--json")
        status_text = await cli("status", censored.id)
    assert as_json.code == 0 and as_json.json()["output"] == {"title": "Printer on fire", "priority": 1}
    assert as_text.code == 0 and json.loads(as_text.out) == {"title": "Printer on fire", "priority": 1}
    error = status_json.json()["error"]
    assert error["type"] == "OutputGuardrailTripwireTriggered" and "no_forbidden_output" in error["message"]
    assert "error:   OutputGuardrailTripwireTriggered: output guardrail 'no_forbidden_output'" in status_text.out
