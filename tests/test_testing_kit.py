"""durable_agent_runner.testing: scripted and function models, on both wires, driving real runs."""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client, WorkflowFailureError

from durable_agent_runner import Agent, Registry, tool
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.client import RunFailed, RunHandle, SessionHandle
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing import (
    AgentTestEnv,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    call,
    hand_off,
    output,
    pytest_plugin,
    reply,
)
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.server

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
# The plugin's fixture, on the session's dev server (a user's gets one of its own).
agent_env = pytest_plugin.agent_env


@pytest.fixture
def agent_temporal_address(temporal_server: Any) -> str:
    return str(temporal_server.target)


def doc_example() -> dict[str, Any]:
    """The pytest example of docs/testing.md, run as a module of its own."""
    text = DOC.read_text(encoding="utf-8")
    block = re.search(
        r"<!-- testing-example: start -->\n```python\n(.*?)```\n<!-- testing-example: end -->", text, re.S
    )
    assert block, "docs/testing.md lost its example"
    namespace: dict[str, Any] = {"__name__": "docs_testing_example"}
    exec(compile(block.group(1), str(DOC), "exec"), namespace)
    return namespace


async def test_the_docs_example_runs_as_written(agent_env: Any) -> None:
    example = doc_example()
    await example["test_the_assistant_looks_the_weather_up"](agent_env)
    await example["test_a_function_model"](agent_env)


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order's number.
    """
    return f"refunded order {order}"


class Verdict(BaseModel):
    passed: bool
    why: str = ""


billing = Agent(name="billing", instructions="You handle billing.", tools=[refund])
triage = Agent(name="triage", instructions="Route the customer.", handoffs=[billing])
judge = Agent(name="judge", instructions="Judge the answer.", output_type=Verdict)


async def run(
    client: Client, model: Any, agent: Agent, prompt: str, api: str = "chat", stream: bool = True
) -> t.RunResult:
    queue = f"tq-{uuid.uuid4().hex}"
    async with model.serve(agents=[agent]) as server:
        settings = LLMSettings(base_url=server.base_url, model="any-model", api=api, stream=stream)
        async with (
            new_http_client(settings) as http,
            build_worker(client, queue, Registry(agents=[agent]), settings, http),
        ):
            handle = await client.start_workflow(
                t.WORKFLOW_NAME,
                t.RunInput(prompt=prompt, agent=agent.name),
                id=f"kit-{uuid.uuid4().hex[:10]}",
                task_queue=queue,
                result_type=t.RunResult,
            )
            result = await handle.result()
        run.server = server  # type: ignore[attr-defined]
    return result


@pytest.mark.parametrize(("api", "stream"), [("chat", True), ("responses", False)])
async def test_scripted_handoff_tool_call_and_answer(client: Client, api: str, stream: bool) -> None:
    model = ScriptedModel(
        {"triage": [hand_off("billing")], "billing": [call("refund", order="42"), reply("Refunded.")]}
    )
    result = await run(client, model, triage, "refund order 42", api, stream)
    assert (result.agent, result.output) == ("billing", "Refunded.")
    server = run.server  # type: ignore[attr-defined]
    assert [r.turn for r in server.requests_for("billing")] == [0, 1]
    assert server.requests_for("billing")[1].result_of("refund") == "refunded order 42"


async def test_typed_output(client: Client) -> None:
    model = ScriptedModel({judge: [output(Verdict(passed=True, why="fine"))]})
    result = await run(client, model, judge, "judge this")
    assert (
        result.output_object == {"passed": True, "why": "fine"} or Verdict.model_validate(result.output_object).passed
    )


async def test_function_model_and_script_end(client: Client) -> None:
    async def fn(request: ModelRequest) -> Any:
        return f"{request.agent} turn {request.turn}: {request.prompt}"

    result = await run(client, FunctionModel(fn), billing, "hi")
    assert result.output == "billing turn 0: hi"
    model = ScriptedModel({"billing": [call("refund", order="1")]})
    with pytest.raises(WorkflowFailureError) as failed:
        await run(client, model, billing, "refund")
    assert "billing" in str(failed.value.cause) or "turn 1" in repr(failed.value)


async def test_the_support_team_example_scripted(agent_env: Any) -> None:
    """examples/support_team.py, scripted: a handoff, an agent used as a tool (a child run, whose
    turns start at 0), and typed output."""
    from examples import support_team as team

    decision = team.RefundDecision(order_id="1234", refund=True, amount=42.0, reason="Charged twice.")
    model = ScriptedModel(
        {
            "triage": [hand_off("refunds")],
            "refunds": [call("research_order", input="Look up order 1234"), output(decision)],
            "researcher": [call("lookup_order", order_id="1234"), reply("Order 1234 was charged twice.")],
        }
    )
    async with agent_env(agents=[team.triage], model=model) as env:
        result = await env.run(team.triage, "I was charged twice for order 1234, please refund")
    assert result.agent == "refunds" and team.RefundDecision.model_validate(result.output_object) == decision
    researcher = env.model_server.requests_for("researcher")
    assert [r.turn for r in researcher] == [0, 1] and researcher[0].prompt == "Look up order 1234"
    assert '"order_id":"1234"' in (researcher[1].result_of("lookup_order") or "").replace(" ", "")
    assert env.model_server.requests_for("refunds")[1].result_of("research_order") == "Order 1234 was charged twice."


async def test_an_unscripted_agent_and_a_bad_handoff_fail_the_run_saying_so(agent_env: Any) -> None:
    model = ScriptedModel({"triage": [hand_off("nobody")]}, agents=[triage])
    async with agent_env(agents=[triage], model=model) as env:
        with pytest.raises(RunFailed) as failed:
            await env.run(triage, "help")
        assert "agent 'triage' at its turn 0 hands off to 'nobody', but no handoff to it is offered" in str(
            failed.value
        )
        with pytest.raises(RunFailed) as failed:
            await env.run(billing, "help")
        assert "no script for agent 'billing' at its turn 0 (scripts for: 'triage')" in failed.value.message


async def test_start_returns_the_projects_own_handle(agent_env: Any) -> None:
    """Before: a raw temporalio WorkflowHandle, with none of the client's verbs and an untyped result."""
    model = ScriptedModel({judge: [output(Verdict(passed=True, why="fine"))], billing: [reply("hi")]})
    async with agent_env(agents=[judge, billing], model=model) as env:
        run = await env.start(judge, "judge this")
        assert isinstance(run, RunHandle) and not isinstance(run, SessionHandle)
        assert await run.result() == Verdict(passed=True, why="fine")  # typed by the agent's output_type
        assert (await run.status()).status == "completed"
        by_name = await env.start("billing", "hello")  # by name too
        assert isinstance(by_name, RunHandle) and await by_name.result() == "hi"
        session = await env.start(billing, "", session=True)
        assert isinstance(session, SessionHandle)
        await session.cancel()


def test_a_script_for_an_agent_it_does_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match="does not know the agent\\(s\\) 'billing'"):
        ScriptedModel({"billing": [reply("hi")]}).check()
    # and a script that is not one says so (a list of scripts was an AttributeError on `.items`)
    with pytest.raises(TypeError, match=r"^ScriptedModel takes a dict of scripts by agent, not list$"):
        ScriptedModel([reply("hi")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^a script is keyed by an Agent or its name, not ''$"):
        ScriptedModel({"": [reply("hi")]})


@pytest.mark.parametrize(
    ("step", "says"),
    [
        (lambda: reply(5), r"^reply takes the answer's text, not int"),
        (lambda: call(""), r"^call takes the tool's name first, not ''$"),
        (lambda: call("book", ["Paris"]), r"^call 'book': its arguments are a mapping, not list$"),
        (lambda: call("book", when=object()), r"^call 'book': its arguments are not JSON: Object of type object"),
        (lambda: call("book", price=float("nan")), r"^call 'book': its arguments are not JSON: Out of range float"),
        (lambda: output(object()), r"^output takes a value pydantic dumps as JSON: PydanticSerializationError"),
    ],
)
def test_a_step_a_script_cannot_send_is_refused_where_it_is_written(step: Any, says: str) -> None:
    """Before: each was taken, and went wrong only when the model was asked, inside a run (or sent
    the runner `NaN` in a call's arguments, which is not JSON)."""
    with pytest.raises(TypeError, match=says):
        step()


async def test_a_function_model_that_knows_no_agent_is_refused_when_served() -> None:
    """Before: served, every request's agent was '' and each run completed with the function's
    fallback answer (the 'no script' text), a wrong answer nobody was told about."""
    model = FunctionModel(lambda request: reply(f"for {request.agent or 'nobody'}"))
    with pytest.raises(
        ValueError, match=re.escape("knows no agent, so request.agent would be '' on every call: pass the agents")
    ):
        async with model.serve():
            pass
    async with model.serve(agents=[billing]) as server:  # given its agents, it serves
        assert server.base_url.startswith("http://127.0.0.1:")
    assert FunctionModel(lambda request: reply("x"), agents=[billing]).check() is None


async def test_an_unreachable_server_fails_within_the_bound() -> None:
    env = AgentTestEnv([billing], ScriptedModel({billing: [reply("hi")]}), address="127.0.0.1:1", startup_seconds=2)
    with pytest.raises(
        RuntimeError, match=re.escape("AgentTestEnv: cannot reach Temporal at 127.0.0.1:1: nothing listens there")
    ):
        async with env:
            pass


async def test_without_an_address_it_starts_and_stops_a_dev_server_of_its_own() -> None:
    """The one slow test here (a dev server starts): what a user's test gets with no server of its
    own; the dev server is gone when the `async with` ends."""
    model = ScriptedModel({billing: [call("refund", order="7"), reply("Refunded order 7.")]})
    async with AgentTestEnv([billing], model, startup_seconds=120) as env:
        target = env.client.service_client.config.target_host
        result = await env.run(billing, "refund order 7")
        assert (result.agent, result.output) == ("billing", "Refunded order 7.")
        assert env.model_server.requests_for("billing")[1].result_of("refund") == "refunded order 7"
        assert [r.turn for r in env.model_server.requests_for("billing")] == [0, 1]
    host, port = target.rsplit(":", 1)
    with pytest.raises(OSError):  # stopped: nothing listens there any more
        socket.create_connection((host, int(port)), timeout=2).close()
