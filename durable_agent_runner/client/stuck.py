"""Whether a run is stuck: its workflow task keeps failing, or what it waits for has no worker.

A workflow task that keeps failing is a bug in the workflow code a worker runs, not the run's input
(bad input fails the run or is told to the model), so Temporal holds the run where it is and
retries the task: a fixed worker carries it on from there. `status` says so, with the error, and
what to do. A wait on a task queue no worker polls (no worker for the run's queue, or for the
agent and version a tool call or an approval check needs) is said within seconds by `status`,
`run --wait`, `approve` and the console's Approve (`RunHandle.unserved`), and for an eval by `eval
run`, `eval watch` and `eval status` (`EvalStatus.unserved`, which `EvalHandle.status` fills), instead of a silent wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState, PendingWorkflowTaskState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle
from temporalio.service import RPCError

from durable_agent_runner.client.errors import cli, worker
from durable_agent_runner.client.follow import READ
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

# The failed task's first attempt is in history; later attempts are not. It sits near the end.
LAST_EVENTS = 100
WHAT_TO_DO = (
    "a worker's workflow code fails on this run (a bug, not the run's input): fix it and deploy the worker, "
    "and the run goes on from where it stopped; `{cancel}` ends it, "
    "`temporal workflow terminate` only if no worker can run it any more"
)


async def stuck(client: Client, desc: WorkflowExecutionDescription) -> dict[str, Any] | None:
    """The run's stuck workflow task (attempts, error, what to do), or None when it is not stuck."""
    raw = desc.raw_description
    if not raw.HasField("pending_workflow_task") or raw.pending_workflow_task.attempt < 2:
        return None
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=desc.id, run_id=desc.run_id),
        maximum_page_size=LAST_EVENTS,
    )
    page = await client.workflow_service.get_workflow_execution_history_reverse(request)
    failed = next((e for e in page.history.events if e.HasField("workflow_task_failed_event_attributes")), None)
    error = failed.workflow_task_failed_event_attributes.failure.message if failed is not None else "not recorded"
    return {
        "attempts": raw.pending_workflow_task.attempt,
        "error": error.splitlines()[0][:500] if error else "no message",
        "what_to_do": WHAT_TO_DO.format(cancel=cli(f"cancel {desc.id}")),
    }


# A task a live, idle worker polls for is taken within milliseconds: one still waiting after GRACE,
# on a queue nothing has polled since it was scheduled, waits for a worker that is not there (or
# is busy with all it can take). Pollers alone do not tell: the server lists one for minutes
# after its worker has gone, and a live worker's poll is up to a minute old.
GRACE = timedelta(seconds=3)
# The longest `RunHandle.unserved` looks (GRACE for a young wait, its reads on top): an approval's
# answer waits at most this long for the look; past it the look gives up (TimeoutError).
LOOK_BOUND = GRACE + timedelta(seconds=5)
WHAT_WAITS = {
    t.TOOL_CALL_ACTIVITY: "a tool call",
    t.HOOK_ACTIVITY: "its code (an approval check, a guardrail, a breakpoint)",
    t.RESOLVE_AGENT_ACTIVITY: "the run's start",
    t.MODEL_CALL_ACTIVITY: "a model call",
    t.COMPACT_ACTIVITY: "a compaction",
    te.EVAL_SCORE_ACTIVITY: "a case's scoring",
}
# An eval waits for its agent's resolve too: before its first case, not a run's first step.
EVAL_WAITS = WHAT_WAITS | {t.RESOLVE_AGENT_ACTIVITY: "the eval's start"}


async def unserved(client: Client, desc: WorkflowExecutionDescription) -> list[dict[str, str]]:
    """What the run waits for on a task queue no worker takes work from: its workflow task (no
    worker runs the run's queue), or an activity on an agent's queue (no worker serves that agent,
    or that version of it), each waiting GRACE or more. Each as {queue, waiting, message}; empty
    when every wait has a worker. A worker that starts later carries the run on."""
    return (await _waits(client, desc))[0]


async def unserved_soon(client: Client, handle: WorkflowHandle[Any, Any]) -> list[dict[str, str]]:
    """`unserved`, once what the run has just asked for has had GRACE to be taken (after an
    approval, the call's tool activity): at once when it has been taken, as it is by a live worker."""
    deadline = datetime.now(UTC) + GRACE + timedelta(seconds=1)
    while True:
        found, young = await _waits(client, await handle.describe(rpc_timeout=READ))
        if found or not young or datetime.now(UTC) > deadline:
            return found
        await asyncio.sleep(0.25)


async def unserved_words(client: Client, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """`unserved`'s messages now, for an error that says why a wait ran out (`StillRunning`):
    [] when the look fails or takes past LOOK_BOUND, for it only informs."""
    try:
        async with asyncio.timeout(LOOK_BOUND.total_seconds()):
            return [w["message"] for w in await unserved(client, await handle.describe(rpc_timeout=READ))]
    except (RPCError, TimeoutError):
        return []


async def warn_unserved(
    client: Client, handle: WorkflowHandle[Any, Any], say: Callable[[str], None], every: float = 1.0
) -> None:
    """While a caller waits for the run (`run --wait`, `result`): says each `unserved` wait once, as
    soon as it is past GRACE. Runs until cancelled; a failed look is tried again."""
    said: set[str] = set()
    while True:
        await asyncio.sleep(every)
        try:
            found = await unserved(client, await handle.describe(rpc_timeout=READ))
        except RPCError:
            continue
        for wait in found:
            key = f"{wait['queue']} {wait['waiting']}"
            if key not in said:
                said.add(key)
                say(wait["message"])


async def agent_unserved(client: Client, queue: str, agent: str) -> str:
    """What runs of `agent` started on `queue` (a schedule's, a hook's) would wait for now: "" when
    a worker serving it has polled lately (the server lists a poller for minutes after its last
    poll), or when the look fails: it only informs."""
    where = t.agent_task_queue(queue, agent)
    try:
        if await _pollers(client, where, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            return ""
    except RPCError:
        return ""
    return (
        f"no worker serves agent '{agent}' now: nothing has polled task queue {where} lately; its runs wait "
        f"for one (start a worker with --tools for that agent)"
    )


async def _pollers(client: Client, queue: str, kind: TaskQueueType.ValueType) -> list[Any]:
    """The pollers the server lists for `queue` (each with its last access), within READ."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind
    )
    return list((await client.workflow_service.describe_task_queue(request, timeout=READ)).pollers)


async def _waits(client: Client, desc: WorkflowExecutionDescription) -> tuple[list[dict[str, str]], int]:
    """The waits no worker takes (past GRACE), and how many waits are younger than GRACE."""
    raw, now = desc.raw_description, datetime.now(UTC)
    found: list[dict[str, str]] = []
    young = 0

    async def polled_since(queue: str, kind: TaskQueueType.ValueType, since: datetime) -> bool:
        return any(p.last_access_time.ToDatetime(UTC) >= since for p in await _pollers(client, queue, kind))

    queue = desc.task_queue
    words = EVAL_WAITS if desc.workflow_type == te.EVAL_WORKFLOW else WHAT_WAITS
    task = raw.pending_workflow_task if raw.HasField("pending_workflow_task") else None
    if task is not None and task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        since = task.scheduled_time.ToDatetime(UTC)
        if now - since < GRACE:
            young += 1
        elif not await polled_since(queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, since):
            message = f"no worker polls task queue {queue}: start one ({worker(f'--task-queue {queue}')})"
            found.append({"queue": queue, "waiting": "the run's next step", "message": message})
    for p in raw.pending_activities:
        if p.state != PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
            continue
        since = p.scheduled_time.ToDatetime(UTC)
        if p.HasField("next_attempt_schedule_time"):  # a retry: it waits from its next attempt on
            since = max(since, p.next_attempt_schedule_time.ToDatetime(UTC))
            if since > now:
                continue  # backing off: no worker is asked for it yet
        where = p.activity_options.task_queue.name or queue
        if now - since < GRACE:
            young += 1
        elif not await polled_since(where, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, since):
            what = words.get(p.activity_type.name, p.activity_type.name)
            message = _no_worker(where, what, now - since, "eval" if words is EVAL_WAITS else "run")
            found.append({"queue": where, "waiting": what, "message": message})
    return found, young


def _no_worker(queue: str, what: str, waited: timedelta, whose: str) -> str:
    """`no worker serves agent 'careful' at version 3f2a… for a tool call: …`, from the queue's
    name (workflows.types.agent_task_queue)."""
    _, *agent = queue.split("@")
    for_ = f"for {what} (waiting {waited.total_seconds():.0f}s)"
    if not agent:
        return f"no worker polls task queue {queue} {for_}: start one ({worker(f'--task-queue {queue}')})"
    version = f" at version {agent[1][:12]}" if len(agent) > 1 else ""
    return (
        f"no worker serves agent '{agent[0]}'{version} {for_}: nothing polls task queue {queue} "
        f"(start a worker with --tools for that agent{', that version' if version else ''}); "
        f"the {whose} goes on once one does"
    )
