"""Human approval of tool calls on a real dev server: approve, edit, reject, always, time out."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections import Counter

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agent_runner.workflows import types as t
from tests.devserver import temporal_cli
from tests.helpers import activity_attempts, calls, pending_activities, replay, script, start, transcript
from tests.test_durability import effects, start_worker_process


async def status(handle) -> t.RunStatus:
    return await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)


async def pending(handle, count: int = 1, timeout: float = 20.0) -> list[t.PendingApproval]:
    deadline = time.monotonic() + timeout
    while True:
        s = await status(handle)
        if len(s.pending_approvals) >= count:
            return s.pending_approvals
        if time.monotonic() >= deadline:
            raise AssertionError(f"no pending approval; activities: {await pending_activities(handle)}; status: {s}")
        await asyncio.sleep(0.1)


def decide(call_id: str, approve: bool = True, **fields) -> t.ApprovalDecision:
    return t.ApprovalDecision(call_id=call_id, approve=approve, **fields)


async def update(handle, decision: t.ApprovalDecision, update_id: str | None = None) -> t.DecisionReceipt:
    return await handle.execute_update(t.APPROVAL_UPDATE, decision, id=update_id, result_type=t.DecisionReceipt)


async def history_events(handle) -> list:
    return list((await handle.fetch_history()).events)


def count(events, kind) -> int:
    return sum(1 for e in events if e.event_type == kind)


async def test_approve_runs_the_tool_and_records_who(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        s = await status(handle)
        assert s.status == "awaiting_approval" and s.phase == "awaiting_approval"
        assert (waiting.tool, waiting.arguments, waiting.turn) == ("send", {"label": "report"}, 1)
        assert not counter_file.exists()  # nothing ran before the decision
        desc = await handle.describe()
        assert desc.typed_search_attributes.get(t_sa("phase")) == "awaiting_approval"
        assert desc.typed_search_attributes.get(t_sa("pending")) == 1
        receipt = await update(handle, decide(waiting.call_id, by="alice"))
        assert receipt.approved
        result = await handle.result()
        messages = await transcript(handle)
        final = await status(handle)
    assert result.output == "sent it"
    assert effects(counter_file) == Counter({"send:report": 1})
    tool_message = next(m for m in messages if isinstance(m, t.ToolMessage))
    assert tool_message.content == "sent report" and tool_message.approval.by == "alice"
    (decision,) = final.decisions
    assert decision.approved and decision.by == "alice" and decision.call_id == waiting.call_id
    await replay(handle)


def t_sa(name: str):

    return {
        "phase": t.SA_PHASE,
        "pending": t.SA_PENDING,
    }[name]


async def test_approve_with_edited_arguments(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("transfer", {"amount": 500, "to": "acct-1"})), {"content": "ok"})
    async with worker_factory():
        handle = await start(client, task_queue, "pay", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        await update(handle, decide(waiting.call_id, arguments={"amount": 90, "to": "acct-2"}, by="bob"))
        await handle.result()
        messages = await transcript(handle)
    assert effects(counter_file) == Counter({"transfer:90:acct-2": 1})
    result = next(m for m in messages if isinstance(m, t.ToolMessage))
    assert "edited by bob" in result.content and result.content.endswith("transferred 90 to acct-2")
    # the model saw the edit in its next request
    assert "edited by bob" in json.dumps(llm.requests()[-1]["body"]["messages"])


async def test_invalid_edited_arguments_are_refused_and_nothing_is_recorded(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("transfer", {"amount": 500, "to": "acct-1"})), {"content": "ok"})
    async with worker_factory():
        handle = await start(client, task_queue, "pay", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        before = await history_events(handle)
        refusals = [
            ({"amount": "lots", "to": "x"}, "amount: 'lots' is not of type 'integer'"),
            ({"to": "x"}, "'amount' is a required property"),
            ({"amount": 5, "to": "x", "memo": "hi"}, "('memo' was unexpected)"),
        ]
        for bad, why in refusals:
            with pytest.raises(WorkflowUpdateFailedError) as caught:
                await update(handle, decide(waiting.call_id, arguments=bad))
            cause = caught.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "InvalidArguments"
            assert why in cause.message
        after = await history_events(handle)
        assert len(after) == len(before)  # refused in the validator: no event at all
        assert (await status(handle)).pending_approvals  # still waiting
        await update(handle, decide(waiting.call_id))
        await handle.result()


async def test_always_approves_later_calls_of_that_tool(client, task_queue, worker_factory, llm, counter_file):
    model = script(
        llm,
        calls(("send", {"label": "one"})),
        calls(("send", {"label": "two"}), ("transfer", {"amount": 500, "to": "a"})),
        {"content": "done"},
    )
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (first,) = await pending(handle)
        await update(handle, decide(first.call_id, always=True, by="dana"))
        # turn 2: "send" is approved by the earlier --always; "transfer" still waits
        (second,) = await pending(handle)
        assert second.tool == "transfer"
        await update(handle, decide(second.call_id))
        await handle.result()
        final = await status(handle)
    assert effects(counter_file) == Counter({"send:one": 1, "send:two": 1, "transfer:500:a": 1})
    auto = next(d for d in final.decisions if d.automatic)
    assert auto.tool == "send" and auto.by == "dana" and "always" in auto.reason


async def test_a_call_without_approval_runs_while_its_sibling_waits(
    client, task_queue, worker_factory, llm, counter_file
):
    model = script(
        llm,
        calls(("send", {"label": "guarded"}), ("record", {"label": "free"}), ("transfer", {"amount": 5, "to": "b"})),
        {"content": "done"},
    )
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        assert waiting.tool == "send"

        deadline = time.monotonic() + 10
        while effects(counter_file) != Counter({"free": 1, "transfer:5:b": 1}):  # small transfer: no approval
            assert time.monotonic() < deadline, effects(counter_file)
            await asyncio.sleep(0.1)
        await update(handle, decide(waiting.call_id))
        await handle.result()
        messages = await transcript(handle)
    assert effects(counter_file) == Counter({"free": 1, "transfer:5:b": 1, "send:guarded": 1})
    # results still in the order the model asked for them
    assert [m.name for m in messages if isinstance(m, t.ToolMessage)] == ["send", "record", "transfer"]


async def test_unknown_or_decided_calls_are_refused_with_nothing_recorded(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "x"})), calls(("send", {"label": "y"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (first,) = await pending(handle)
        before = len(await history_events(handle))
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await update(handle, decide("call_does_not_exist"))
        assert caught.value.cause.type == "UnknownCall"
        assert len(await history_events(handle)) == before
        await update(handle, decide(first.call_id))
        await pending(handle)  # the second call now waits
        before = len(await history_events(handle))
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await update(handle, decide(first.call_id, approve=False, reason="changed my mind"))
        assert caught.value.cause.type == "NotPending" and "already approved" in caught.value.cause.message
        assert len(await history_events(handle)) == before
        second = (await status(handle)).pending_approvals[0]
        await update(handle, decide(second.call_id))
        await handle.result()


async def test_timeout_rejects_with_a_reason_the_model_sees(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("send", {"label": "late"})), {"content": "gave up"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded_timeout_reject", model=model)
        result = await handle.result()
        final = await status(handle)
    assert result.output == "gave up" and not counter_file.exists()
    sent = llm.requests()[-1]["body"]["messages"]
    assert "nobody answered within 1.5 s" in next(m for m in sent if m["role"] == "tool")["content"]
    assert final.decisions[0].automatic and final.decisions[0].by == "timeout"
    events = await history_events(handle)
    assert count(events, EventType.EVENT_TYPE_TIMER_FIRED) == 1  # a durable timer drove it


async def test_timeout_can_fail_the_run(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("send", {"label": "late"})), {"content": "never"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded_timeout_fail", model=model)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ApprovalTimedOut" and "send" in cause.message
    assert not counter_file.exists()


async def test_the_same_decision_delivered_twice_counts_once(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("send", {"label": "a"})), calls(("send", {"label": "b"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (first,) = await pending(handle)
        # an update retried with the same id (as client.py sends it) returns the first receipt
        one = await update(handle, decide(first.call_id), update_id=f"approve-{first.call_id}")
        two = await update(handle, decide(first.call_id), update_id=f"approve-{first.call_id}")
        assert one == two
        (second,) = await pending(handle)
        # a signal sent twice: the second is ignored, and says why in the status
        await handle.signal(t.APPROVAL_SIGNAL, decide(second.call_id, by="sig"))
        await handle.signal(t.APPROVAL_SIGNAL, decide(second.call_id, by="sig"))
        await handle.result()
        final = await status(handle)
    assert effects(counter_file) == Counter({"send:a": 1, "send:b": 1})
    assert len(final.decisions) == 2
    assert len(final.ignored_signals) == 1 and "already approved" in final.ignored_signals[0]
    events = await history_events(handle)
    assert count(events, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == 1


async def test_the_documented_signal_works_from_the_temporal_cli(
    client, temporal_server, task_queue, worker_factory, llm, counter_file
):
    model = script(llm, calls(("send", {"label": "cli"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        body = json.dumps({"call_id": waiting.call_id, "approve": True, "by": "ops-ui"})
        cmd = [temporal_cli(), "workflow", "signal", "--address", temporal_server.target]
        cmd += ["--workflow-id", handle.id, "--name", t.APPROVAL_SIGNAL, "--input", body]
        subprocess.run(cmd, check=True, capture_output=True)
        await handle.result()
        final = await status(handle)
    assert final.decisions[0].by == "ops-ui" and effects(counter_file) == Counter({"send:cli": 1})


async def test_approval_survives_a_killed_worker_and_a_signal_sent_while_none_runs(
    client, temporal_server, task_queue, llm, counter_file, tmp_path
):
    model = script(llm, calls(("send", {"label": "once"})), {"content": "finished"})
    log = tmp_path / "worker.log"
    worker = start_worker_process(temporal_server, llm, task_queue, log)
    handle = await start(client, task_queue, "go", agent="guarded", model=model)
    try:
        (waiting,) = await pending(handle)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    # no worker runs now: the decision waits in history until one starts
    await handle.signal(t.APPROVAL_SIGNAL, decide(waiting.call_id, by="night-shift"))
    worker = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
    assert result.output == "finished"
    assert effects(counter_file) == Counter({"send:once": 1})
    assert await activity_attempts(handle, t.HOOK_ACTIVITY) == [1]  # the policy check
    assert await activity_attempts(handle, t.TOOL_CALL_ACTIVITY) == [1]  # the run, once


async def test_a_reused_provider_id_never_rides_on_an_earlier_approval(
    client, task_queue, worker_factory, llm, counter_file
):
    same = {"name": "send", "arguments": {"label": "x"}, "id": "0"}  # some servers number calls per reply
    model = script(llm, {"tool_calls": [same]}, {"tool_calls": [same]}, {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "send twice", agent="guarded", model=model)
        (first,) = await pending(handle)
        await update(handle, decide(first.call_id))
        deadline = time.monotonic() + 20
        while True:
            s = await status(handle)
            if any(p.call_id != first.call_id for p in s.pending_approvals):
                break
            assert time.monotonic() < deadline, s
            await asyncio.sleep(0.1)
        (second,) = s.pending_approvals
        assert (second.turn, second.tool, second.arguments) == (2, "send", {"label": "x"})
        assert second.call_id != first.call_id and s.status == "awaiting_approval"
        assert len(counter_file.read_text().splitlines()) == 1  # only the approved call ran
        with pytest.raises(WorkflowUpdateFailedError) as caught:  # the first decision binds the first call only
            await update(handle, decide(first.call_id), update_id="approve-again")
        assert caught.value.cause.type == "NotPending"
        await update(handle, decide(second.call_id, approve=False, reason="once is enough"))
        assert (await handle.result()).output == "done"
        messages = await transcript(handle)
    effects = counter_file.read_text().splitlines()
    assert effects == [f"send:x {handle.id}:{first.call_id}"]
    calls = [c for m in messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
    assert [c.provider_id for c in calls] == ["0", "0"] and len({c.call_id for c in calls}) == 2
    rejected = [m for m in messages if isinstance(m, t.ToolMessage)][1]
    assert rejected.call_id == second.call_id and "once is enough" in rejected.content
    await replay(handle)
