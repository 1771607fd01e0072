"""A paused run holds still through a SIGKILLed worker and a restarted server; forks cost what they carry."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from typing import Any

import pytest
from temporalio.client import Client

from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script
from tests.test_breakpoints import begin, edit, paused, resume
from tests.test_durability import effects, start_worker_process

pytestmark = pytest.mark.asyncio


async def test_paused_through_a_killed_worker_and_a_restarted_server(
    client: Client, temporal_server: Any, llm: Any, task_queue: str, counter_file: Any, tmp_path: Any
) -> None:
    model = script(llm, calls(("record", {"label": "planned"})), {"content": "done"})
    log = tmp_path / "worker.log"
    worker = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        handle = await begin(client, task_queue, model, breakpoints=t.Breakpoints(before_tools=True))
        view = await paused(handle)
        (call,) = view.pending_calls
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        temporal_server.restart()
        worker = start_worker_process(temporal_server, llm, task_queue, log)
        view = await paused(handle, 60)  # still paused, at the same point
        assert view.paused is not None and view.paused.where == "before_tools"
        await edit(handle, op="args", call_id=call.call_id, arguments={"label": "after-restart"})
        await asyncio.sleep(2)  # it holds still: nothing runs while paused
        assert effects(counter_file) == Counter()
        await resume(handle)
        assert (await asyncio.wait_for(handle.result(), 60)).output == "done"
        assert effects(counter_file) == Counter({"after-restart": 1})
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
    await replay(handle)


async def test_fork_of_a_long_finished_run_carries_only_what_it_needs(
    client: Client, task_queue: str, worker_factory: Any
) -> None:
    async with worker_factory():
        source = await begin(client, task_queue, "loop:50:2000", agent="looper")
        assert (await source.result()).turns == 50
        point = await source.query(t.FORK_POINT_QUERY, t.ForkQuery(turn=10), result_type=t.ForkPoint)
        assert point.turn == 9 and sum(isinstance(m, t.AssistantMessage) for m in point.messages) == 9
        import argparse

        from durable_agent_runner.cli.debug import cmd_fork
        from durable_agent_runner.client import AgentClient

        args = argparse.Namespace(run_id=source.id, at_turn=10, prompt=None, id=None, json=True, task_queue=task_queue)
        assert await cmd_fork(AgentClient(client), args) == 0
        forks = [wf async for wf in client.list_workflows(f"AgentForkedFrom='{source.id}'")]
        for _ in range(50):
            if forks:
                break
            await asyncio.sleep(0.2)
            forks = [wf async for wf in client.list_workflows(f"AgentForkedFrom='{source.id}'")]
        fork = client.get_workflow_handle(forks[0].id, result_type=t.RunResult)
        result = await fork.result()
        assert result.turns == 50  # it went on from model call 10 to the end
        source_history = await source.fetch_history()
        fork_history = await fork.fetch_history()
        started = fork_history.events[0].ByteSize()
        total_source = sum(e.ByteSize() for e in source_history.events)
        # the fork's start carries the 9 turns before the fork point, not the source's history
        assert started < total_source / 4, (started, total_source)
        status = await fork.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert status.forked_from == t.ForkLink(run_id=source.id, turn=10)
        await replay(fork)
        print(f"fork at turn 10 of 50: started event {started:,} bytes; source history {total_source:,} bytes")
