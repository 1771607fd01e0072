"""Data from outside that no parse may choke on, through whole runs on a real dev server: tool
arguments nested 5,000 deep or holding a 5,000-digit integer, a tool result with a lone
surrogate, a person's edited arguments past the bounds. Each run ends normally, the model (or
the person) is told why, and no workflow task ever fails on the way (machine/bounds.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from durable_agent_runner import Agent, Registry, tool
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows import types as t
from tests.conftest import TEST_MODULES
from tests.helpers import calls, script, start, transcript

BOUND = 60.0  # seconds a run may take here; each takes a few


async def finished(handle: WorkflowHandle[Any, t.RunResult]) -> t.RunResult:
    """The run's result, and proof that no workflow task failed on its way there (a task that
    fails on every attempt is how bad data wedged a run: it sat in its phase, retrying)."""
    result = await asyncio.wait_for(handle.result(), BOUND)
    history = await handle.fetch_history()
    failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    assert not failed, f"a workflow task failed: {failed[0].workflow_task_failed_event_attributes.failure.message}"
    return result


def told(llm: FakeLLMServer) -> list[str]:
    """The tool results the model was sent, on either API, in its last request."""
    body = llm.requests()[-1]["body"]
    items = body.get("messages") or body.get("input") or []
    return [m.get("content") or m.get("output") for m in items if m.get("role") == "tool" or "output" in m]


@pytest.mark.parametrize(
    ("api", "stream"), [("chat", False), ("chat", True), ("responses", False), ("responses", True)]
)
@pytest.mark.parametrize(
    ("case", "why"), [("deep", "nested deeper than 64 levels"), ("digits", "a number longer than 100 characters")]
)
async def test_arguments_past_the_bounds_are_told_to_the_model_and_the_run_ends(
    client: Any, task_queue: str, worker_factory: Any, llm: FakeLLMServer, api: str, stream: bool, case: str, why: str
) -> None:
    """The hostile model sends every tool call's arguments 5,000 deep (or with a 5,000-digit
    integer): the run used to fail its workflow task on every attempt and sit in calling_model."""
    settings = LLMSettings(base_url=llm.base_url, model="demo", api=api, stream=stream)  # type: ignore[arg-type]
    async with worker_factory(settings=settings):
        handle = await start(client, task_queue, "What's the weather in Tokyo?", agent="demo", model=f"hostile:{case}")
        result = await finished(handle)
        messages = await transcript(handle)
    assert result.output
    errors = [m for m in messages if isinstance(m, t.ToolMessage) and m.is_error]
    assert errors and all(f"refused: {why}" in m.content for m in errors)
    assert any(f"refused: {why}" in (text or "") for text in told(llm))


async def test_a_huge_integer_in_arguments_a_person_must_approve_is_told_to_the_model(
    client: Any, task_queue: str, worker_factory: Any, llm: FakeLLMServer
) -> None:
    """`transfer` asks the approval hook; its arguments with a 5,000-digit amount used to fail
    the hook (json's own int limit, a bare ValueError), and with it the run."""
    arguments = '{"amount": ' + "9" * 5000 + ', "to": "b"}'
    model = script(llm, {"tool_calls": [{"name": "transfer", "arguments": arguments}]}, {"content": "gave up"})
    async with worker_factory():
        handle = await start(client, task_queue, "pay", agent="guarded", model=model)
        result = await finished(handle)
        messages = await transcript(handle)
    assert result.output == "gave up"
    (message,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert message.is_error and "refused: a number longer than 100 characters" in message.content


@tool
def lonely(word: str) -> str:
    """Echoes the word with a lone surrogate, as a tool reading bytes carelessly does."""
    return f"{word} \ud800 done"


async def test_a_tool_result_with_a_lone_surrogate_reaches_the_next_model_call(
    client: Any, task_queue: str, worker_factory: Any, llm: FakeLLMServer
) -> None:
    """The next model request used to fail (no HTTP body can carry a lone surrogate)."""
    registry = Registry.from_modules(TEST_MODULES)
    registry.add_agent(Agent(name="lonely", tools=[lonely]))
    model = script(llm, calls(("lonely", {"word": "hi"})), {"content": "read it"})
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "go", agent="lonely", model=model)
        result = await finished(handle)
        messages = await transcript(handle)
    assert result.output == "read it"
    (message,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert (message.content, message.is_error) == ("hi \ufffd done", False)
    assert told(llm) == ["hi \ufffd done"]


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


async def test_edited_arguments_past_the_bounds_are_refused_with_a_clear_message(
    client: Any, task_queue: str, worker_factory: Any, llm: FakeLLMServer
) -> None:
    """A decision's edited arguments meet the bounds a model's do: the update is refused (the
    run waits on, nothing recorded), the signal is ignored saying why, and a sound decision ends it."""
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent"})
    deep = {"label": nested(100)}  # past 64, short of the JSON decoder's own limit: the bound answers
    with pytest.raises(ValueError, match="arguments refused: nested deeper than 64 levels"):
        t.ApprovalDecision(call_id="c", approve=True, arguments=deep)  # a client that validates
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        for _ in range(200):
            status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
            if status.pending_approvals:
                break
            await asyncio.sleep(0.1)
        (waiting,) = status.pending_approvals
        bad = t.ApprovalDecision.model_construct(call_id=waiting.call_id, approve=True, arguments=deep, by="x")
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update(t.APPROVAL_UPDATE, bad, result_type=t.DecisionReceipt)
        chain, err = [], caught.value.cause
        while err is not None:
            chain.append(str(err))
            err = err.__cause__
        assert any("arguments refused: nested deeper than 64 levels" in text for text in chain), chain
        digits = t.ApprovalDecision.model_construct(
            call_id=waiting.call_id, approve=True, arguments={"label": 10**500}, always=False, by="x"
        )
        await handle.signal(t.APPROVAL_SIGNAL, digits)
        for _ in range(200):
            status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
            if status.ignored_signals:
                break
            await asyncio.sleep(0.1)
        assert "arguments refused: a number longer than 100 digits" in status.ignored_signals[0]
        assert [p.call_id for p in status.pending_approvals] == [waiting.call_id]  # nothing was recorded
        sound = t.ApprovalDecision(call_id=waiting.call_id, approve=True, arguments={"label": "y"})
        await handle.execute_update(t.APPROVAL_UPDATE, sound, result_type=t.DecisionReceipt)
        result = await finished(handle)
    assert result.output == "sent"
