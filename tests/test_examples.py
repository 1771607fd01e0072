"""examples/support_team.py: the team played by fake_llm's `team` scenario, first without
Temporal (the runner's own wire code and the scenario, turn by turn), then as whole runs on the
dev server: handoffs, the researcher as a child run, typed output, the card-number guardrail."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agent_runner import GuardrailContext, GuardrailResult, Registry, ToolContext
from durable_agent_runner.activities import chat_wire, responses_wire
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.testing.fake_llm.conversation import parse_chat, parse_responses
from durable_agent_runner.testing.fake_llm.wire import chat_completion, response_object
from durable_agent_runner.testing.scenarios.default import respond
from durable_agent_runner.workflows import types as t
from examples import support_team as team
from tests.helpers import replay, start, transcript

REFUND = "I was charged twice for order 1234, please refund"
BILLING = "Which card paid for order 5678?"
CARD = "Refund order 1234 to my card 4242 4242 4242 4242 please"


@pytest.fixture(scope="module")
def team_registry() -> Registry:
    return Registry.from_modules(["examples.support_team"])


# ------------------------------------------------------------------- the scenario alone


def ask(agent: Any, messages: list[t.Message], api: str) -> t.AssistantMessage:
    """One model call as the runner makes it: its request, the scenario's reply on that wire,
    parsed back by the runner."""
    wire: Any = chat_wire if api == "chat" else responses_wire
    body = json.loads(json.dumps(wire.build_request(agent.spec(), messages, "team", False)))
    conv = parse_chat(body) if api == "chat" else parse_responses(body)
    reply = respond(conv, {})
    rendered = (
        chat_completion(reply, rid="chatcmpl-1", model="team", created=0)
        if api == "chat"
        else response_object(reply, rid="resp_1", model="team", created=0, request=body)
    )
    message: t.AssistantMessage = wire.parse_response(rendered, 1).message
    return message


async def run_tool(tool: Any, call: t.ToolCall) -> t.ToolMessage:
    ctx = ToolContext(run_id="r", call_id=call.call_id, idempotency_key="r:" + call.call_id, turn=1, attempt=1)
    result = await tool.invoke(call.arguments, ctx)
    return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error)


def only_call(message: t.AssistantMessage) -> t.ToolCall:
    assert len(message.tool_calls) == 1, message
    return message.tool_calls[0]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_scenario_plays_triage_refunds_and_the_researcher(api: str):
    asked = [t.UserMessage(content=REFUND)]
    transfer = only_call(ask(team.triage, asked, api))
    assert (transfer.name, json.loads(transfer.arguments)) == ("transfer_to_refunds", {})
    # The handoff's "remove_tools" filter: refunds sees the customer's words alone.
    research = only_call(ask(team.refunds, asked, api))
    request = json.loads(research.arguments)
    assert research.name == "research_order" and list(request) == ["input"] and "1234" in request["input"]
    # The researcher, as a child run, starts from that request alone.
    child: list[t.Message] = [t.UserMessage(content=request["input"])]
    lookup = only_call(ask(team.researcher, child, api))
    assert (lookup.name, json.loads(lookup.arguments)) == ("lookup_order", {"order_id": "1234"})
    child += [t.AssistantMessage(tool_calls=[lookup]), await run_tool(team.lookup_order, lookup)]
    found = ask(team.researcher, child, api)
    assert not found.tool_calls and found.content and "ch_1234_2" in found.content
    answered = t.ToolMessage(call_id=research.call_id, name=research.name, content=found.content)
    final = ask(team.refunds, [*asked, t.AssistantMessage(tool_calls=[research]), answered], api)
    assert not final.tool_calls
    decision = team.RefundDecision.model_validate_json(final.content or "")
    assert (decision.order_id, decision.refund, decision.amount) == ("1234", True, 89.0)
    assert decision.reason == "Order 1234 was charged 89.00 USD twice; the duplicate charge is refunded."


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_scenario_plays_billing_and_refuses_a_single_charge(api: str):
    asked: list[t.Message] = [t.UserMessage(content=BILLING)]
    transfer = only_call(ask(team.triage, asked, api))
    assert transfer.name == "transfer_to_billing"
    # No filter on this handoff: billing sees the transfer and its receipt too.
    receipt = t.ToolMessage(call_id=transfer.call_id, name=transfer.name, content='{"assistant": "billing"}')
    asked += [t.AssistantMessage(tool_calls=[transfer]), receipt]
    invoice = only_call(ask(team.billing, asked, api))
    assert (invoice.name, json.loads(invoice.arguments)) == ("get_invoice", {"order_id": "5678"})
    asked += [t.AssistantMessage(tool_calls=[invoice]), await run_tool(team.get_invoice, invoice)]
    answer = ask(team.billing, asked, api)
    assert not answer.tool_calls and "Visa ending 4242" in (answer.content or "")
    # Order 5678 was charged once: the decision is no refund, and it still fits the schema.
    research = t.ToolCall(call_id="call_1_0", name="research_order", arguments='{"input": "order 5678"}')
    record = team.lookup_order("5678").model_dump_json()
    said = t.ToolMessage(call_id="call_1_0", name="research_order", content=f"Here is what I found: {record}")
    refund_asked = [t.UserMessage(content="Refund order 5678"), t.AssistantMessage(tool_calls=[research]), said]
    decision = team.RefundDecision.model_validate_json(ask(team.refunds, refund_asked, api).content or "")
    assert (decision.order_id, decision.refund, decision.amount) == ("5678", False, 0.0)


def test_the_scenario_asks_for_an_order_number_it_was_not_given():
    asked: list[t.Message] = [t.UserMessage(content="Why is my bill so high?")]
    assert ask(team.billing, asked, "chat").content == "Which order is this about? Please send me its order number."


@pytest.mark.parametrize("api, path", [("chat", "/chat/completions"), ("responses", "/responses")])
def test_the_scenario_streams_on_both_wires(fake_llm: FakeLLMServer, api: str, path: str):
    # Over HTTP, streamed: the transfer call, then (in another request) the typed answer's JSON.
    wire: Any = chat_wire if api == "chat" else responses_wire
    body = wire.build_request(team.triage.spec(), [t.UserMessage(content=REFUND)], "team", True)
    with httpx.Client(base_url=fake_llm.base_url, timeout=10) as http:
        stream = http.post(path, json=body)
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        assert "transfer_to_refunds" in stream.text
        research = t.ToolCall(call_id="call_2_0", name="research_order", arguments='{"input": "order 1234"}')
        record = team.lookup_order("1234").model_dump_json()
        said = t.ToolMessage(call_id="call_2_0", name="research_order", content=record)
        messages = [t.UserMessage(content=REFUND), t.AssistantMessage(tool_calls=[research]), said]
        body = wire.build_request(team.refunds.spec(), messages, "team", True)
        text = http.post(path, json=body).text
    decision = team.RefundDecision.model_validate_json("".join(streamed_text(text, api)))
    assert (decision.refund, decision.amount) == (True, 89.0)


def streamed_text(sse: str, api: str) -> list[str]:
    """The text deltas of an SSE body, in order."""
    pieces: list[str] = []
    for line in sse.splitlines():
        if not line.startswith("data: {"):
            continue
        event = json.loads(line.removeprefix("data: "))
        if api == "chat":
            pieces += [c["delta"].get("content") or "" for c in event["choices"]]
        elif event["type"] == "response.output_text.delta":
            pieces.append(event["delta"])
    return pieces


def test_the_guardrail_trips_on_card_numbers_only():
    ctx = GuardrailContext(agent="triage", run_id="r", turn=1)
    tripped = GuardrailResult(tripwire_triggered=True, output_info={"card_ending": "4242"})
    assert team.no_card_numbers(ctx, CARD) == tripped
    assert team.no_card_numbers(ctx, "card: 4242-4242-4242-4242") == tripped
    for text in (REFUND, "Order 1234567890123 is late", "call 555-0100-2222-3333"):
        assert team.no_card_numbers(ctx, text) == GuardrailResult(tripwire_triggered=False), text


# ------------------------------------------------------------------------- whole runs


def team_settings(llm: FakeLLMServer, api: str = "chat", stream: bool = False) -> LLMSettings:
    return LLMSettings(base_url=llm.base_url, model="team", api=api, stream=stream)


async def event_types(client: Client, workflow_id: str) -> list[EventType.ValueType]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [e.event_type for e in history.events]


@pytest.mark.parametrize("api, stream", [("chat", True), ("responses", False)])
async def test_a_refund_is_handed_off_researched_by_a_child_run_and_typed(
    client: Client,
    task_queue: str,
    worker_factory: Any,
    team_registry: Registry,
    llm: FakeLLMServer,
    api: str,
    stream: bool,
):
    async with worker_factory(registry=team_registry, settings=team_settings(llm, api, stream)):
        handle = await start(client, task_queue, REFUND, agent="triage")
        result = await handle.result()
        messages = await transcript(handle)
    assert result.agent == "refunds"
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [("triage", "refunds")]
    decision = team.RefundDecision.model_validate(result.output_object)
    assert (decision.order_id, decision.refund, decision.amount) == ("1234", True, 89.0)
    # The researcher ran as a child run with a history of its own, named after the call.
    research = [
        c for m in messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls if c.name == "research_order"
    ]
    assert len(research) == 1
    child = client.get_workflow_handle(f"{handle.id}.{research[0].call_id}", result_type=t.RunResult)
    found = await child.result()
    assert found.agent == "researcher" and "ch_1234_2" in found.output
    assert EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED in await event_types(client, handle.id)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in await event_types(client, child.id)  # lookup_order
    await replay(handle)
    await replay(child)


async def test_a_billing_question_goes_to_billing_which_answers_in_text(
    client: Client, task_queue: str, worker_factory: Any, team_registry: Registry, llm: FakeLLMServer
):
    async with worker_factory(registry=team_registry, settings=team_settings(llm)):
        handle = await start(client, task_queue, BILLING, agent="triage")
        result = await handle.result()
    assert result.agent == "billing" and result.output_object is None
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [("triage", "billing")]
    assert "INV-5678" in result.output and "Visa ending 4242" in result.output


async def test_a_card_number_trips_the_guardrail_before_any_tool_runs(
    client: Client, task_queue: str, worker_factory: Any, team_registry: Registry, llm: FakeLLMServer
):
    async with worker_factory(registry=team_registry, settings=team_settings(llm)):
        handle = await start(client, task_queue, CARD, agent="triage")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InputGuardrailTripwireTriggered", repr(cause)
    assert "no_card_numbers" in cause.message and "4242 4242" not in cause.message
    history = await handle.fetch_history()
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert t.TOOL_CALL_ACTIVITY not in activities and t.HOOK_ACTIVITY in activities, activities
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in [e.event_type for e in history.events]
    assert status.handoffs == [] and status.error_type == "InputGuardrailTripwireTriggered"
