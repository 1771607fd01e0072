"""Long runs: continue-as-new keeps each history small and the run id valid; budgets end runs."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agent_runner.workflows import types as t
from tests.helpers import context_queries, replay, start, transcript
from tests.test_approvals import decide, pending, update
from tests.test_durability import effects

MIB = 1024 * 1024


async def executions(client, run_id: str) -> list[str]:
    """Every execution (run) in the chain behind one workflow id, oldest first."""
    runs = [wf async for wf in client.list_workflows(f'WorkflowId="{run_id}"')]
    return [wf.run_id for wf in sorted(runs, key=lambda wf: wf.start_time)]


async def test_a_thousand_turn_run_continues_as_new_with_small_histories(client, task_queue, worker_factory, llm):
    began = time.monotonic()
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="marathon", model="loop:1000:10")
        result = await handle.result()
        messages = await transcript(client.get_workflow_handle(handle.id))
        status = await client.get_workflow_handle(handle.id).query(t.STATUS_QUERY, result_type=t.RunStatus)
    took = time.monotonic() - began
    assert result.output == "done after 1000 turns" and result.turns == 1000
    assert len(messages) == 1 + 999 * 2 + 1  # the prompt, 999 turns with a tool result, the answer
    assert status.turn == 1000 and status.usage.requests == 1000
    # visibility is eventually consistent: wait for all ten executions to be listed
    deadline = time.monotonic() + 10
    while len(runs := await executions(client, handle.id)) < 10 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # not a busy loop of list calls on a shared server
    assert len(runs) == 10
    sizes = []
    for run_id in runs:
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        sizes.append(sum(e.ByteSize() for e in history.events))
    print(
        f"\n1,000 turns in {took:.1f}s over {len(runs)} executions; history sizes (KiB): "
        f"{[round(s / 1024) for s in sizes]}, largest {max(sizes) / MIB:.2f} MiB"
    )
    assert max(sizes) < 4 * MIB


async def test_status_approve_and_result_follow_the_run_across_continue_as_new(
    client, task_queue, worker_factory, llm, counter_file
):
    sid = uuid.uuid4().hex[:8]
    llm.add_script(sid, [
        {"tool_calls": [{"name": "send", "arguments": {"label": "one"}}]},
        {"tool_calls": [{"name": "send", "arguments": {"label": "two"}}]},
        {"tool_calls": [{"name": "send", "arguments": {"label": "three"}}]},
        {"content": "relayed"},
    ])  # fmt: skip
    async with worker_factory():
        first = await start(client, task_queue, "go", agent="guarded_relay", model=f"script:{sid}")
        handle = client.get_workflow_handle(first.id, result_type=t.RunResult)  # follows the chain
        (waiting,) = await pending(handle)
        await update(handle, decide(waiting.call_id, by="erin"))
        # after the next continue-as-new the run waits again, under the same id
        (second,) = await pending(handle)
        assert second.call_id != waiting.call_id
        await update(handle, decide(second.call_id, always=True, by="erin"))
        result = await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(since=0), result_type=t.EventsPage)
        await replay(handle)
    assert result.output == "relayed" and result.turns == 4
    assert effects(counter_file) == Counter({"send:one": 1, "send:two": 1, "send:three": 1})
    # the decisions travel with the run; the third call rode on the second's "always"
    assert [d.by for d in status.decisions] == ["erin", "erin", "erin"] and status.decisions[2].automatic
    assert len(await executions(client, first.id)) >= 4
    # the event log keeps counting across executions and points at the one before
    assert page.first > 0 and page.previous_run_id is not None and page.events[-1].kind == "final"


async def test_a_token_budget_ends_the_run_cleanly(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="budgeted", model="loop:50:400")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "TokenBudgetExceeded"
    assert "of 3000 tokens" in cause.message
    assert status.phase == "failed" and status.usage.total_tokens >= 3000 and status.turn < 50


async def test_usage_is_reported_per_agent_in_the_result(client, task_queue, worker_factory, llm):
    async with worker_factory():
        result = await (await start(client, task_queue, "Weather in Tokyo?")).result()
    assert set(result.usage_by_agent) == {"demo"}
    assert result.usage_by_agent["demo"] == result.usage and result.usage.requests == 3


async def test_a_new_execution_reads_its_transcript_from_the_workers_cache(
    client, task_queue, worker_factory, llm, monkeypatch
):
    """After continue-as-new the transcript goes on: the worker that ran the last turn still holds
    it (by workflow id), so no model call of the run, the first of each execution included, queries
    the workflow for its context."""
    queried = context_queries(monkeypatch)
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="relay", model="loop:6:10")
        result = await handle.result()
        assert len(await executions(client, handle.id)) == 3  # continued as new every 2 turns
    assert result.turns == 6 and queried == []
