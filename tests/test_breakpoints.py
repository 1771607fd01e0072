"""Breakpoints on a real dev server: pause, inspect, edit, resume, fork (issue 11)."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agent_runner.cli.debug import cmd_fork
from durable_agent_runner.client import AgentClient
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, through_gaps, transcript
from tests.test_agents import requests_for

pytestmark = pytest.mark.asyncio


async def begin(
    client: Client, task_queue: str, model: str, agent: str = "scripted", **fields: Any
) -> WorkflowHandle[Any, t.RunResult]:
    return await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(prompt=fields.pop("prompt", "go"), agent=agent, model=model, **fields),
        id=f"bp-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=t.RunResult,
    )


async def paused(handle: WorkflowHandle[Any, Any], seconds: float = 20) -> t.Inspection:
    """The run's inspection once it is paused, read through gaps (a SIGKILLed worker, a restart)."""
    async with asyncio.timeout(seconds):
        while True:
            view: t.Inspection = await through_gaps(
                lambda: handle.query(t.INSPECT_QUERY, result_type=t.Inspection),
                attempts=1000,  # the timeout bounds it
            )
            if view.paused is not None and view.phase == "paused":
                return view
            await asyncio.sleep(0.1)


async def edit(handle: WorkflowHandle[Any, Any], **fields: Any) -> t.EditReceipt:
    return await handle.execute_update(t.EDIT_UPDATE, t.Edit(by="alice", **fields), result_type=t.EditReceipt)


async def refusal(update: Any) -> str:
    """The reason an update was refused (its validator's error)."""
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await update
    return str(getattr(info.value.cause, "message", info.value.cause))


async def resume(handle: WorkflowHandle[Any, Any]) -> None:
    await handle.execute_update(t.RESUME_UPDATE, t.ResumeRequest(by="alice"), result_type=t.RunStatus)


async def test_pause_at_turn_edit_text_resume_model_sees_the_edit(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, calls(("add", {"a": 1, "b": 2})), {"content": "three"}, {"content": "unused"})
    async with worker_factory():
        handle = await begin(
            client, task_queue, model, prompt="add one and two", breakpoints=t.Breakpoints(at_turns=[2])
        )
        view = await paused(handle)
        assert view.paused is not None and view.paused.where == "before_model" and view.paused.turn == 2
        assert "breakpoint at turn 2" in view.paused.why
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert status.status == "paused" and status.paused is not None
        assert [i.message.role for i in view.items] == ["user", "assistant", "tool"]
        receipt = await edit(handle, op="text", index=2, text="the tool says: 42")
        assert "replaced the text of item 2" in receipt.summary
        await edit(handle, op="insert", index=3, role="user", text="answer in one word")
        view = await handle.query(t.INSPECT_QUERY, result_type=t.Inspection)
        assert [e.edit.op for e in view.edits] == ["text", "insert"] and view.edits[0].edit.by == "alice"
        await resume(handle)
        result = await handle.result()
        assert result.output == "three"
        # the second model request carried exactly the edited transcript
        second = requests_for(llm, model)[1]
        contents = [m.get("content") for m in second["messages"]]
        assert "the tool says: 42" in contents and contents[-1] == "answer in one word"
        await replay(handle)


async def test_pause_before_a_tool_change_its_arguments_it_runs_once_with_them(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Any
) -> None:
    model = script(llm, calls(("record", {"label": "old"})), {"content": "done"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, breakpoints=t.Breakpoints(tools=["record"]))
        view = await paused(handle)
        assert view.paused is not None and view.paused.where == "before_tools"
        (call,) = view.pending_calls
        assert call.tool == "record" and call.arguments == {"label": "old"}
        reason = await refusal(edit(handle, op="args", call_id=call.call_id, arguments={"label": 5}))
        assert "arguments for record are invalid" in reason and "label" in reason
        await edit(handle, op="args", call_id=call.call_id, arguments={"label": "new"})
        await resume(handle)
        assert (await handle.result()).output == "done"
        lines = counter_file.read_text().split("\n")
        assert [line.split()[0] for line in lines if line] == ["new"]
        messages = await transcript(handle)
        assert isinstance(messages[1], t.AssistantMessage) and json.loads(messages[1].tool_calls[0].arguments) == {
            "label": "new"
        }
        await replay(handle)


async def test_a_breakpoint_before_a_tool_the_agent_lacks_fails_the_run_before_any_model_call(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Any
) -> None:
    """Before 2.0.2 a mistyped name never paused: `record` ran with nobody looking."""
    model = script(llm, calls(("record", {"label": "unseen"})), {"content": "done"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, breakpoints=t.Breakpoints(tools=["recrod"]))
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BreakpointInvalid"
    assert cause.message.startswith("a breakpoint before 'recrod': no agent of this run has a tool of that name (")
    assert "record" in cause.message and status.phase == "failed" and status.turn == 0
    assert requests_for(llm, model) == [] and not counter_file.exists()  # no model call, no side effect
    await replay(handle)


async def test_a_breakpoint_before_a_cheap_tool_keeps_it_from_running_with_the_reply(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Any
) -> None:
    """A cheap call comes back with the model's reply, unless the run pauses before it: then a
    person sees it before it runs, and it runs once, as edited."""
    model = script(llm, calls(("note", {"label": "old"})), {"content": "done"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, agent="noter", breakpoints=t.Breakpoints(tools=["note"]))
        (call,) = (await paused(handle)).pending_calls
        assert not counter_file.exists()  # nothing ran with the reply
        await edit(handle, op="args", call_id=call.call_id, arguments={"label": "new"})
        await resume(handle)
        assert (await handle.result()).output == "done"
    assert [line.split()[0] for line in counter_file.read_text().splitlines()] == ["new"]
    await replay(handle)


async def test_a_cheap_call_run_with_the_reply_is_not_used_once_a_person_changed_it(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Any
) -> None:
    """A pause asked for while the model thinks comes too late for a cheap call the reply
    brought back already run (its result is there): the person still sees the call before
    the run takes it, and a call they change runs again, as changed, and only that result counts."""
    llm.set_latency(1500)
    model = script(llm, calls(("note", {"label": "old"})), {"content": "done"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, agent="noter")
        async with asyncio.timeout(20):
            while (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).phase != "calling_model":
                await asyncio.sleep(0.05)
        await handle.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="bob"), result_type=t.RunStatus)
        view = await paused(handle)
        assert view.paused is not None and view.paused.where == "before_tools"
        (call,) = view.pending_calls
        assert [line.split()[0] for line in counter_file.read_text().splitlines()] == ["old"]
        await edit(handle, op="args", call_id=call.call_id, arguments={"label": "new"})
        llm.set_latency(0)
        await resume(handle)
        assert (await handle.result()).output == "done"
        messages = await transcript(handle)
    assert [line.split()[0] for line in counter_file.read_text().splitlines()] == ["old", "new"]
    assert [m.content for m in messages if isinstance(m, t.ToolMessage)] == ["noted new"]
    await replay(handle)


async def test_invalid_edits_are_refused_and_nothing_is_recorded(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, calls(("add", {"a": 1, "b": 2})), {"content": "three"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, breakpoints=t.Breakpoints(at_turns=[2]))
        await paused(handle)
        before = len((await handle.fetch_history()).events)
        bad = [
            {"op": "text", "index": 9, "text": "x"},
            {"op": "drop", "index": 2},  # a tool result alone
            {"op": "insert", "index": 2, "role": "user", "text": "between a call and its result"},
            {"op": "agent", "agent": "nobody"},
            {"op": "args", "call_id": "call_nope", "arguments": {}},
            {"op": "text", "index": 0, "text": "  "},
        ]
        reasons = [await refusal(edit(handle, **fields)) for fields in bad]
        assert "no item 9" in reasons[0] and "drop its call's message (item 1)" in reasons[1]
        assert "nothing may come between a call and its results" in reasons[2]
        assert "no agent 'nobody'" in reasons[3] and "no pending call call_nope" in reasons[4]
        assert len((await handle.fetch_history()).events) == before
        view = await handle.query(t.INSPECT_QUERY, result_type=t.Inspection)
        assert view.edits == []
        await resume(handle)
        await handle.result()


async def test_pause_while_running_and_fork(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, hold: Any
) -> None:
    tool_runs = hold("a")
    model = script(
        llm,
        calls(("slow_record", {"label": "a", "seconds": 60})),
        calls(("add", {"a": 1, "b": 1})),
        {"content": "finished"},
    )
    async with worker_factory():
        handle = await begin(client, task_queue, model)
        async with asyncio.timeout(20):
            while (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).phase != "running_tools":
                await asyncio.sleep(0.1)
        await handle.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="bob", reason="look"), result_type=t.RunStatus)
        tool_runs.set()
        view = await paused(handle)
        assert view.paused is not None and view.paused.turn == 2 and "paused by bob: look" in view.paused.why
        point = await handle.query(t.FORK_POINT_QUERY, t.ForkQuery(turn=2), result_type=t.ForkPoint)
        assert point.turn == 1 and [m.role for m in point.messages] == ["user", "assistant", "tool"]
        # a fork of the paused run goes on by itself from model call 2, the source stays paused
        args = argparse.Namespace(
            run_id=handle.id, at_turn=2, prompt=None, id=f"{handle.id}-f", json=True, task_queue=task_queue
        )
        assert await cmd_fork(AgentClient(client), args) == 0
        forked = await client.get_workflow_handle(f"{handle.id}-f", result_type=t.RunResult).result()
        assert forked.output == "finished" and forked.turns == 3
        assert (await handle.query(t.INSPECT_QUERY, result_type=t.Inspection)).paused is not None
        await resume(handle)
        assert (await handle.result()).output == "finished"
        point = await handle.query(t.FORK_POINT_QUERY, t.ForkQuery(turn=3), result_type=t.ForkPoint)
        assert point.turn == 2 and len(point.messages) == 5


async def test_a_breakpoint_function_edits_and_pauses(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, calls(("add", {"a": 1, "b": 1})), calls(("record", {"label": "PAUSE-ME"})), {"content": "ok"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, agent="coached")
        view = await paused(handle)
        # before call 2 it inserted a message; before call 3 the tool's result made it pause
        assert view.paused is not None and view.paused.turn == 3
        assert "breakpoint function coach: the tool said PAUSE-ME" in view.paused.why
        assert [e.summary for e in view.edits] == [
            "breakpoint function coach inserted a user message at item 3: coach: answer in five words"
        ]
        assert requests_for(llm, model)[1]["messages"][-1]["content"] == "coach: answer in five words"
        history = await handle.fetch_history()
        summaries = [e.user_metadata.summary.data for e in history.events if e.HasField("user_metadata")]
        assert any(b"breakpoint: coach" in s for s in summaries)
        await resume(handle)
        assert (await handle.result()).output == "ok"
        await replay(handle)


async def test_a_breakpoint_functions_invalid_edit_pauses_with_the_reason(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, calls(("explode", {"message": "BAD-EDIT"})), {"content": "ok"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, agent="coached")
        view = await paused(handle)
        assert view.paused is not None and "its edit was refused: no item 99" in view.paused.why
        assert view.edits == []
        await resume(handle)
        assert (await handle.result()).output == "ok"


async def test_a_withdrawn_pause_request_is_no_longer_shown(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, hold: Any
) -> None:
    """Resume before the run reached its safe point withdraws the request: status then says what
    the run does again, not that it will pause."""
    tool_runs = hold("a")
    model = script(llm, calls(("slow_record", {"label": "a", "seconds": 60})), {"content": "finished"})
    async with worker_factory():
        handle = await begin(client, task_queue, model)
        async with asyncio.timeout(20):
            while (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).phase != "running_tools":
                await asyncio.sleep(0.1)
        running = (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).last_step
        asked = await handle.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="bob"), result_type=t.RunStatus)
        assert "pause requested by bob" in asked.last_step
        after = await handle.execute_update(t.RESUME_UPDATE, t.ResumeRequest(by="bob"), result_type=t.RunStatus)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert "pause" not in after.last_step and "pause" not in status.last_step, status.last_step
        assert status.last_step == running and "slow_record" in running and status.phase == "running_tools"
        tool_runs.set()
        assert (await handle.result()).output == "finished"
        events = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
    kinds = [e.kind for e in events.events]
    assert "paused" not in kinds and "resumed" in kinds  # withdrawn, never paused
    await replay(handle)


async def test_a_withdrawn_pause_request_leaves_status_naming_the_approval_it_waits_for(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    """Seen on 2.0.0: a run waiting for approval, asked to pause, then resumed, still said "pause
    requested by alice" in status and the console until the approval came."""
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    async with worker_factory():
        handle = await begin(client, task_queue, model, agent="guarded")
        async with asyncio.timeout(20):
            while not (status := await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).pending_approvals:
                await asyncio.sleep(0.1)
        waiting = status.last_step
        asked = await handle.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="alice"), result_type=t.RunStatus)
        assert asked.last_step.startswith(waiting) and "pause requested by alice" in asked.last_step
        after = await handle.execute_update(t.RESUME_UPDATE, t.ResumeRequest(by="bob"), result_type=t.RunStatus)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert after.last_step == status.last_step == waiting and "waiting for approval of send" in waiting
        assert status.phase == "awaiting_approval"
        call_id = status.pending_approvals[0].call_id
        decision = t.ApprovalDecision(call_id=call_id, approve=True, by="carol")
        await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
        assert (await handle.result()).output == "sent it"
    await replay(handle)
