"""Session runs on a real dev server: one durable run per conversation (issue 10)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from durable_agent_runner.cli.session import SessionError, end_session, get_exchange, send_message, wait_answer
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, transcript

pytestmark = pytest.mark.asyncio


async def open_session(
    client: Client, task_queue: str, agent: str = "chatter", **fields: Any
) -> WorkflowHandle[Any, t.RunResult]:
    return await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(prompt=fields.pop("prompt", ""), agent=agent, session=True, **fields),
        id=f"chat-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=t.RunResult,
    )


async def status(handle: WorkflowHandle[Any, Any]) -> t.RunStatus:
    return await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)


async def until(predicate: Any, seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while not await predicate():
            await asyncio.sleep(0.1)


async def test_three_messages_remembered_and_addressable(client: Client, task_queue: str, worker_factory: Any) -> None:
    async with worker_factory():
        handle = await open_session(client, task_queue, model="recall")
        answers = []
        for k, text in enumerate(["my name is Ada", "I live in Oslo", "what is my name?"], start=1):
            receipt = await send_message(client, handle.id, text, by="alice")
            assert receipt.message == k
            answers.append((await wait_answer(client, handle.id, k)).output or "")
        # The third answer comes from a model call that still reads the first message.
        assert "my name is Ada" in answers[2] and "my name is Ada" not in answers[1].split("|")[-1]
        assert answers[0].count("|") == 0 and answers[2].count("|") == 2
        st = await status(handle)
        assert st.status == "waiting" and st.session is not None
        assert (st.session.messages, st.session.answered, st.session.state) == (3, 3, "waiting")
        assert st.session.last is not None and st.session.last.output == answers[2]
        first = await get_exchange(client, handle.id, 1)
        assert first is not None and first.output == answers[0] and first.by == "alice"
        receipt_end = await end_session(client, handle.id, by="alice", reason="done")
        assert receipt_end.unanswered == 0
        result = await handle.result()
        assert result.messages == 3 and result.output == answers[2]
        assert result.ended_by == "ended by alice: done"
        with pytest.raises(SessionError, match="has ended"):
            await send_message(client, handle.id, "hello again?", by="alice")
        await replay(handle)


async def test_messages_sent_during_an_answer_are_queued_in_order(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, hold: Any
) -> None:
    tool_runs = hold("a")
    slow = script(
        llm,
        calls(("slow_record", {"label": "a", "seconds": 60})),
        {"content": "first done"},
        {"content": "second"},
        {"content": "third"},
    )
    async with worker_factory():
        handle = await open_session(client, task_queue, model=slow)
        await send_message(client, handle.id, "one", by="a")
        await until(lambda: _phase(handle, "running_tools"))
        two = await send_message(client, handle.id, "two", by="b")
        three = await send_message(client, handle.id, "three", by="c")
        assert (two.message, two.queued, three.message, three.queued) == (2, 0, 3, 1)
        tool_runs.set()
        outputs = [(await wait_answer(client, handle.id, k)).output for k in (1, 2, 3)]
        assert outputs == ["first done", "second", "third"]
        users = [m.content for m in await transcript(handle) if isinstance(m, t.UserMessage)]
        assert users == ["one", "two", "three"]
        await end_session(client, handle.id, by="a")
        assert (await handle.result()).messages == 3
        await replay(handle)


async def _phase(handle: WorkflowHandle[Any, Any], phase: str) -> bool:
    return (await status(handle)).phase == phase


async def test_a_message_steers_the_answer_in_progress(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, hold: Any
) -> None:
    tool_runs = hold("a")
    slow = script(
        llm, calls(("slow_record", {"label": "a", "seconds": 60})), {"content": "steered answer"}, {"content": "unused"}
    )
    async with worker_factory():
        handle = await open_session(client, task_queue, agent="steerer", model=slow)
        await send_message(client, handle.id, "book a table", by="a")
        await until(lambda: _phase(handle, "running_tools"))
        steer = await send_message(client, handle.id, "make it for four", by="a")
        assert steer.steer
        tool_runs.set()
        exchange = await wait_answer(client, handle.id, 2)
        assert exchange.message == 1 and exchange.steered == [2] and exchange.output == "steered answer"
        messages = await transcript(handle)
        # The steering message reached the model before its next call, after the tool's result.
        assert isinstance(messages[-2], t.UserMessage) and messages[-2].content == "make it for four"
        assert isinstance(messages[-3], t.ToolMessage)
        st = await status(handle)
        assert st.session is not None and (st.session.messages, st.session.answered) == (2, 2)
        # The tool's activity had made the next call without the message (machine/requests.py): the
        # turn dropped that reply, counted its tokens, and asked again with the message.
        events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
        assert [e.kind for e in events].count("model_dropped") == 1 and st.usage.requests == 3
        await end_session(client, handle.id, by="a")
        assert (await handle.result()).messages == 2
        await replay(handle)


async def test_idle_timeout_ends_the_session(client: Client, task_queue: str, worker_factory: Any) -> None:
    async with worker_factory():
        handle = await open_session(client, task_queue, agent="drowsy", model="echo", prompt="hi")
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.ended_by == "idle for 2 s" and result.output == "echo: hi" and result.messages == 1


async def test_refusals(client: Client, task_queue: str, worker_factory: Any) -> None:
    async with worker_factory():
        single = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="hi", model="echo"),
            id=f"one-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=t.RunResult,
        )
        await single.result()
        with pytest.raises(SessionError, match="has ended"):
            await send_message(client, single.id, "more?", by="x")
        running = await open_session(client, task_queue, model="echo")
        with pytest.raises(SessionError, match="no run"):
            await send_message(client, "no-such-run", "x", by="x")
        await end_session(client, running.id, by="x")
        await running.result()


async def converse(client: Client, handle: WorkflowHandle[Any, Any], texts: list[str]) -> list[t.Exchange]:
    out = []
    for text in texts:
        receipt = await send_message(client, handle.id, text, by="alice")
        out.append(await wait_answer(client, handle.id, receipt.message))
    return out


async def events(handle: WorkflowHandle[Any, Any]) -> list[t.RunEvent]:
    page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
    return page.events


async def test_memory_compacted_by_summary_and_the_summary_used(
    client: Client, task_queue: str, worker_factory: Any
) -> None:
    facts = ["the door code is 4711", "my cat is called Miso", "I fly to Lima on Friday", "my seat is 14C"]
    facts = [f"{fact}; please keep this in mind for later in our conversation, thank you" for fact in facts]
    async with worker_factory():
        handle = await open_session(client, task_queue, agent="forgetful", model="recall")
        answers = await converse(client, handle, [*facts, "what do you remember?"])
        kinds = [e for e in await events(handle) if e.kind == "compacted"]
        assert kinds and "summarized" in kinds[0].detail and "budget" in kinds[0].detail
        messages = await transcript(handle)
        first = messages[0]
        assert isinstance(first, t.UserMessage) and first.summary_of > 0 and "SUMMARY:" in first.content
        # The first fact now lives only in the summary, and the last answer still knows it.
        assert not any(isinstance(m, t.UserMessage) and m.content == facts[0] for m in messages)
        assert "4711" in (answers[-1].output or "")
        st = await status(handle)
        assert st.session is not None and st.session.compactions >= 1
        history = await handle.fetch_history()
        compactions = [
            e
            for e in history.events
            if e.activity_task_scheduled_event_attributes.activity_type.name == t.COMPACT_ACTIVITY
        ]
        assert len(compactions) == st.session.compactions
        await end_session(client, handle.id, by="alice")
        await handle.result()
        await replay(handle)


async def test_memory_trimmed(client: Client, task_queue: str, worker_factory: Any) -> None:
    async with worker_factory():
        handle = await open_session(client, task_queue, agent="trimmer", model="recall")
        answers = await converse(client, handle, ["alpha " * 60, "bravo " * 60, "charlie " * 60, "what now?"])
        messages = await transcript(handle)
        first = messages[0]
        assert isinstance(first, t.UserMessage) and first.summary_of > 0 and "dropped" in first.content
        assert "alpha" not in (answers[-1].output or "")
        history = await handle.fetch_history()
        names = {e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events}
        assert t.COMPACT_ACTIVITY not in names  # trimming asks no model
        await end_session(client, handle.id, by="alice")
        await handle.result()


async def test_a_failed_answer_fails_that_message_not_the_session(
    client: Client, task_queue: str, worker_factory: Any
) -> None:
    from durable_agent_runner import Registry

    async with worker_factory(registry=Registry.from_modules(["tests.fixtures.team_agents"])):
        handle = await open_session(client, task_queue, agent="gatekeeper", model="echo")
        answers = await converse(client, handle, ["hello", "this is forbidden", "hello again"])
        assert answers[0].output == "echo: hello" and answers[2].output == "echo: hello again"
        assert answers[1].output is None and answers[1].error is not None
        assert answers[1].error.startswith("InputGuardrailTripwireTriggered")
        st = await status(handle)
        assert st.status == "waiting" and st.error is None
        await end_session(client, handle.id, by="a")
        assert (await handle.result()).messages == 3
        await replay(handle)


async def test_cancel_ends_a_waiting_session(client: Client, task_queue: str, worker_factory: Any) -> None:
    from temporalio.client import WorkflowFailureError

    async with worker_factory():
        handle = await open_session(client, task_queue, model="echo", prompt="hi")
        await wait_answer(client, handle.id, 1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        st = await status(handle)
        assert st.status == "cancelled" and st.session is not None and st.session.state == "ended"
        with pytest.raises(SessionError, match="has ended"):
            await send_message(client, handle.id, "still there?", by="a")


async def test_the_opening_prompt_stays_message_1_when_a_message_comes_with_the_start(
    client: Client, task_queue: str, worker_factory: Any
) -> None:
    """The start and a message delivered in the same first workflow task (no worker was up yet):
    the update's handler runs before the run does, and must still find the prompt as message 1."""
    handle = await open_session(client, task_queue, model="echo", prompt="first")
    early = asyncio.create_task(send_message(client, handle.id, "second", by="alice"))
    await asyncio.sleep(1.0)  # the update waits at the server for the run's first workflow task
    async with worker_factory():
        receipt = await early
        await until(lambda: _answered(handle, 2))
        story = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
        await end_session(client, handle.id, by="test")
        await handle.result()
    assert receipt.message == 2
    if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
        (Path(__file__).parent / "histories" / "session_prompt_2_0.json").write_text(
            (await handle.fetch_history()).to_json()
        )
    messages = [e for e in story.events if e.kind == t.EventKind.MESSAGE]
    assert [(e.text, e.detail.split(" · ")[0]) for e in messages] == [
        ("first", "message 1 from client"),
        ("second", "message 2 from alice"),
    ]


async def _answered(handle: WorkflowHandle[Any, Any], n: int) -> bool:
    live = await status(handle)
    return live.session is not None and live.session.answered >= n


async def test_an_answer_stopped_at_its_turn_limit_leaves_the_next_messages_a_whole_transcript(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    """The first answer asks for a tool on its last allowed turn and fails (MaxTurnsExceeded); the
    next message is answered. Until 1.4.7 the failed answer's call stayed in the transcript with no
    result, and the model's API refused every later request of the session (OpenAI's 400)."""
    model = script(llm, calls(("add", {"a": 2, "b": 3})), {"content": "hello again"})
    async with worker_factory():
        handle = await open_session(client, task_queue, model=model, max_turns=1)
        first, second = await converse(client, handle, ["add 2 and 3", "hello?"])
        assert first.output is None and first.error is not None and first.error.startswith("MaxTurnsExceeded")
        assert second.output == "hello again" and second.error is None
        messages = await transcript(handle)
        await end_session(client, handle.id, by="a")
        await handle.result()
    told = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert (
        len(told) == 1 and told[0].is_error and "the answer to message 1 failed (MaxTurnsExceeded)" in told[0].content
    )
    sent = llm.requests(last=1)[0]["body"]["messages"]  # the second answer's request: the call answered
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "tool", "user"]
    await replay(handle)
