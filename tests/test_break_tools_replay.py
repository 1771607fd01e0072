"""A run started with breakpoints before named tools asks `break-tools-2.0.2` before its agent's
local resolve (workflows/agent.py), so it replays wherever its worker ended the first workflow
task: a watcher's status query that reaches the run while the resolve runs makes the worker end
that task with the resolve's marker alone (tests/test_budget_given_replay.py tells why a patch
asked after the resolve would then be recorded in the second task, and fail its replay)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.workflows import types as t
from tests.helpers import replay_history, script, start
from tests.test_agents import status
from tests.test_budget_given_replay import layout, watch

RUNS = 8


async def test_runs_with_an_unknown_break_tool_fail_at_start_replay_and_answer_status_while_watched(
    client, task_queue, worker_factory, llm
):
    agent = Agent(name="plain", model=script(llm, *[{"content": "never asked"}] * RUNS))
    registry = Registry(agents=[agent])
    failed: list[str] = []
    handles = []
    async with worker_factory(registry=registry):
        for _ in range(RUNS):
            handle = await start(client, task_queue, "hello", agent="plain", breakpoints=t.Breakpoints(tools=["nope"]))
            handles.append(handle)
            queries, result = await watch(handle)  # status asked from its start to its end
            with pytest.raises(WorkflowFailureError):
                await asyncio.wait_for(result, 30)
            failed += queries
    layouts = []
    async with worker_factory(registry=registry, max_cached_workflows=0):  # replays each history to answer
        for handle in handles:
            history = await handle.fetch_history()
            layouts.append(layout(history))
            try:
                now = await status(handle)
                assert now.phase == "failed" and now.turn == 0, now.last_step
                await replay_history(history)
            except Exception as err:  # every failure is reported below, with the run's layout
                failed.append(f"{layouts[-1]}: {err}")
    # the release's marker and this patch's come first, in the first task, before the resolve's
    assert all(found.startswith("|PP") and "L" in found for found in layouts), layouts
    assert not failed, (layouts, failed)
