"""A bug in workflow code holds the run where it is (Temporal retries the workflow task) instead of
failing it: `status` says the run is stuck, with the error and what to do, and a fixed worker
carries the run on."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from durable_agent_runner.client.stuck import stuck
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.agent import AgentRun
from tests.helpers import start
from tests.test_client import cli  # noqa: F401  (the fixture)


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
