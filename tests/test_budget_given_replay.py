"""A run handed a budget in its RunInput whose agent resolves locally (a caller's cap:
`run_agent(budget=...)`, `RunInput(budget=...)`) replays wherever its worker ended the first
workflow task, and answers status during and after the run (workflows/agent.py `_budget`).

A watcher's status query that reaches the run while its local resolve runs makes the worker
end the first workflow task with the resolve's marker alone: the code that follows the resolve
then runs in the next task, while a replay runs it in the first. Before given-budget-first-1.3
the budget's patch was asked there, and about a third of these runs then failed their status
query after completion with "Non-deprecated patch marker encountered for change tree-budget-1.1"."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowQueryFailedError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.workflows import types as t
from tests.helpers import replay_history, script, start
from tests.test_agents import status

RUNS = 12


def layout(history: Any) -> str:
    """The run's first commands, as `|LP|A`: L the local resolve's marker, P the tree-budget
    patch's, A the first model call, `|` the end of a workflow task."""
    out = []
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            out.append("|")
        elif e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            out.append("P" if e.marker_recorded_event_attributes.marker_name == "core_patch" else "L")
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            return "".join([*out, "A"])
    return "".join(out)


async def watch(handle: Any) -> tuple[list[str], asyncio.Future[Any]]:
    """Asks status as a watcher does, from the run's start to its end: the queries that failed, and
    the run's result (awaited by the caller, which says what it must be)."""
    failed: list[str] = []
    result = asyncio.ensure_future(handle.result())
    deadline = time.monotonic() + 30
    while not result.done() and time.monotonic() < deadline:
        try:
            await status(handle)
        except WorkflowQueryFailedError as err:
            failed.append(str(err))
            await asyncio.sleep(0.05)
    return failed, result


async def test_runs_handed_a_budget_replay_and_answer_status_while_watched(client, task_queue, worker_factory, llm):
    agent = Agent(name="capped", model=script(llm, *[{"content": "hi"}] * RUNS))
    registry = Registry(agents=[agent])
    failed: list[str] = []
    handles = []
    async with worker_factory(registry=registry):
        for _ in range(RUNS):
            handle = await start(client, task_queue, "hello", agent="capped", budget=t.Budget(tokens=10_000))
            handles.append(handle)
            queries, result = await watch(handle)
            assert (await asyncio.wait_for(result, 30)).output == "hi"
            failed += queries
    # after the run, a worker that caches nothing replays each history to answer
    layouts = []
    async with worker_factory(registry=registry, max_cached_workflows=0):
        for handle in handles:
            history = await handle.fetch_history()
            layouts.append(layout(history))
            try:
                now = await status(handle)
                assert now.phase == "completed" and now.budget is not None and now.budget.tokens is not None
                assert now.budget.tokens.limit == 10_000
                await replay_history(history)
            except Exception as err:  # every failure is reported below, with the run's layout
                failed.append(f"{layouts[-1]}: {err}")
    assert not failed, (layouts, failed)
    # each run asked its budget's patch (given-budget-first-1.3) before it resolved its agent
    assert all("P" in each and each.index("P") < each.index("L") for each in layouts), layouts
