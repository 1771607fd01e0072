"""2.0 as a new workflow version (workflows/versions.py, docs/patches.md): a run that started on
1.x code and still runs is found by `list --started-on-1x` (the Python client's
`list(started_on_1x=True)`, `evals.list(started_on_1x=True)`), and a run started on 2.0 is not, so
a deployment knows when the 1.x paths may go."""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio import workflow
from temporalio.worker import Worker

from durable_agent_runner.client import AgentClient
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import IN_DOUBT_PATCH, NOTIFY_PATCH
from durable_agent_runner.workflows.types import evals as te
from tests.test_client import cli  # noqa: F401  (the fixture)


@workflow.defn(name=t.WORKFLOW_NAME, sandboxed=False)
class RunOf1x:
    """What the visibility store holds of a run 1.x code started and that waits for a person: its
    type, and the 1.x patches it took (Temporal lists each marker's id in TemporalChangeVersion),
    without 2.0's."""

    @workflow.run
    async def run(self, asks: list[str]) -> None:
        for patch in asks:
            workflow.patched(patch)
        await workflow.wait_condition(lambda: False)


@workflow.defn(name=te.EVAL_WORKFLOW, sandboxed=False)
class EvalOf1x:
    """An eval 1.x code started, which asked no patch yet."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def listed(read, want: set[str], gone: set[str]) -> list[str]:
    """What `read` lists once the store shows every id of `want` and none of `gone` (visibility lags)."""
    deadline = time.monotonic() + 30
    while True:
        ids = await read()
        if (want <= set(ids) and not gone & set(ids)) or time.monotonic() > deadline:
            return ids
        await asyncio.sleep(0.3)


async def test_list_started_on_1x_finds_the_runs_1x_started_and_no_run_2_0_started(
    client, task_queue, worker_factory, llm, cli
):
    old_queue = f"{task_queue}-1x"
    agents = AgentClient(client, task_queue=task_queue)
    async with Worker(client, task_queue=old_queue, workflows=[RunOf1x, EvalOf1x]), worker_factory():
        tag = uuid.uuid4().hex[:8]
        took = await client.start_workflow(
            t.WORKFLOW_NAME, [IN_DOUBT_PATCH, NOTIFY_PATCH], id=f"took-{tag}", task_queue=old_queue
        )
        asked_none = await client.start_workflow(t.WORKFLOW_NAME, [], id=f"none-{tag}", task_queue=old_queue)
        old_eval = await client.start_workflow(te.EVAL_WORKFLOW, id=f"eval-{tag}", task_queue=old_queue)
        session = await agents.start_session("demo")  # a 2.0 run that keeps running
        await session.send("Weather in Tokyo?")
        await session.answer(1, wait=60)
        runs = await listed(lambda: _ids(agents.list(100, started_on_1x=True)), {took.id, asked_none.id}, {session.id})
        everything = [r.run_id for r in await agents.list(100)]
        evals = await listed(lambda: _eval_ids(agents.evals.list(100, started_on_1x=True)), {old_eval.id}, set())
        shown = await cli("list", "--started-on-1x", "--limit", "100")
        shown_evals = await cli("eval", "list", "--started-on-1x", "--limit", "100")
        for handle in (took, asked_none, old_eval):
            await handle.terminate("test over")
        await session.end("test over")
    assert {took.id, asked_none.id} <= set(runs), runs
    assert session.id not in runs and session.id in everything, (runs, everything)
    assert old_eval.id in evals, evals
    assert shown.code == 0 and took.id in shown.out and session.id not in shown.out, str(shown)
    assert shown_evals.code == 0 and old_eval.id in shown_evals.out, str(shown_evals)


async def _ids(rows) -> list[str]:
    return [r.run_id for r in await rows]


async def _eval_ids(rows) -> list[str]:
    return [r.eval_id for r in await rows]
