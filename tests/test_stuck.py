"""A bug in workflow code holds the run where it is (Temporal retries the workflow task) instead of
failing it: `status` says the run is stuck, with the error and what to do, and a fixed worker
carries the run on."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from durable_agent_runner import Registry
from durable_agent_runner.client.stuck import stuck
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.agent import AgentRun
from tests.helpers import calls, client_py_says, replay, script, start
from tests.test_approvals import pending
from tests.test_client import ROOT, cli  # noqa: F401  (the fixture)


@workflow.defn(name=t.WORKFLOW_NAME, sandboxed=False)
class BuggyRun(AgentRun):
    """AgentRun with a bug a deploy might ship: it fails every workflow task it runs."""

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        return await super().run(input)

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        raise ValueError("bug in workflow code: _start broke")  # a ValueError failed runs before 1.0


async def test_a_bug_in_workflow_code_holds_the_run_and_a_fixed_worker_carries_it_on(
    client, task_queue, worker_factory, llm, cli
):
    async with Worker(client, task_queue=task_queue, workflows=[BuggyRun]):
        handle = await start(client, task_queue, "Weather in Tokyo and Paris?")
        deadline = time.monotonic() + 60
        while (found := await stuck(client, await handle.describe())) is None:
            assert time.monotonic() < deadline, "the failing workflow task was never retried"
            await asyncio.sleep(0.3)
        shown = await cli("status", handle.id)
        as_json = await cli("status", handle.id, "--json")
    assert found["attempts"] >= 2
    assert "bug in workflow code: _start broke" in found["error"] and "fix it and deploy" in found["what_to_do"]
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING  # held, not failed
    assert shown.code == 0 and "status:  stuck" in shown.out, str(shown)
    assert "_start broke" in shown.out and "fix it and deploy the worker" in shown.out
    assert as_json.json()["status"] == "stuck" and as_json.json()["stuck"]["attempts"] >= 2
    async with worker_factory():  # the fixed deploy
        result = await asyncio.wait_for(handle.result(), 90)
    assert "Tokyo" in result.output
    assert await stuck(client, await handle.describe()) is None


async def test_a_run_that_is_not_stuck_says_nothing(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Tokyo and Paris?")
        await handle.result()
    assert await stuck(client, await handle.describe()) is None


@workflow.defn(name=t.WORKFLOW_NAME, sandboxed=False)
class BuggyAfterWaiting(AgentRun):
    """A bug past a wait, as most are (after a model reply, a tool result, a decision)."""

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        return await super().run(input)

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        await workflow.sleep(timedelta(milliseconds=10))
        raise ValueError("bug in workflow code: after the wait")


async def test_cancel_still_ends_a_stuck_run(client, task_queue):
    async with Worker(client, task_queue=task_queue, workflows=[BuggyAfterWaiting]):
        handle = await start(client, task_queue, "Weather in Tokyo and Paris?")
        deadline = time.monotonic() + 60
        while await stuck(client, await handle.describe()) is None:
            assert time.monotonic() < deadline, "the failing workflow task was never retried"
            await asyncio.sleep(0.3)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as ended:
            await asyncio.wait_for(handle.result(), 60)
    assert isinstance(ended.value.cause, CancelledError)
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


# ------------------------------------------------------------------- waits that no worker takes


async def test_run_wait_says_within_seconds_that_no_worker_serves_the_agent(
    client, temporal_server, task_queue, worker_factory
):
    """A run of an agent no worker serves: `run --wait` says so within seconds of the run's start
    (its resolve waits on the agent's queue, which nothing polls), not after the 25 s the run gives
    it. The seconds count from the start the server recorded: client.py's own start-up (imports, a
    connection) is no part of the promise, and takes several seconds on a loaded 2-core machine."""
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    async with worker_factory():  # serves the run's queue, not the agent
        line = await client_py_says(["run", "--agent", "ghost", "--wait", "hello"], env, b"no worker serves agent")
        said = datetime.now(UTC)
        (run,) = [wf async for wf in client.list_workflows(f'TaskQueue = "{task_queue}"')]
    text = line.decode()
    assert "no worker serves agent 'ghost' for the run's start" in text
    assert f"nothing polls task queue {task_queue}@ghost" in text and "start a worker with --tools" in text
    took = (said - run.start_time).total_seconds()
    assert took < 10, f"said {took:.1f}s after the run started"


async def test_watch_says_what_no_worker_serves_as_run_wait_does(client, temporal_server, task_queue):
    """Before: `watch` of a run no worker takes printed nothing at all, for as long as it waited."""
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    handle = await start(client, task_queue, "hello", agent="ghost")
    line = await client_py_says(["watch", handle.id], env, b"no worker")
    says = f"no worker polls task queue {task_queue}: start one (python worker.py --task-queue {task_queue})"
    assert line.decode().strip() == says, line
    await handle.terminate("test over")


async def test_an_approved_call_no_worker_takes_is_said_by_approve_and_status(
    client, task_queue, worker_factory, llm, cli
):
    """Approve a call whose agent's version no running worker serves: `approve` says so with its
    receipt, `status` too; the run goes on once such a worker starts."""
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (waiting,) = await pending(handle)
    async with worker_factory(registry=Registry.from_modules(["examples.demo_agent"])):  # not `guarded`
        approved = await cli("approve", handle.id, waiting.call_id)
        shown = await cli("status", handle.id)
        as_json = await cli("status", handle.id, "--json")
    assert approved.code == 0 and f"{waiting.call_id} approved" in approved.out, str(approved)
    assert "stalled: no worker serves agent 'guarded' at version" in approved.out
    assert "for a tool call" in approved.out and approved.seconds < 15
    assert "stalled: no worker serves agent 'guarded' at version" in shown.out, shown.out
    (wait,) = as_json.json()["unserved"]
    assert wait["waiting"] == "a tool call" and wait["queue"].startswith(f"{task_queue}@guarded@")
    async with worker_factory():  # a worker that holds the agent's version: the call runs
        assert (await asyncio.wait_for(handle.result(), 30)).output == "sent"
    await replay(handle)
