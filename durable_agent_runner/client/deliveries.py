"""Starting work exactly once per outside delivery (a webhook's POST, however often it is sent):
the run's id is derived from the delivery's id, and the server refuses a second start under it,
running or ended (REJECT_DUPLICATE), so a repeat is told the run that exists, `started: false`.
The guarantee lasts as long as the namespace keeps the first run (its retention period).

A message for a session goes the same way, as a DeliverMessage run (workflows/deliver.py) that
gives it to the session once, so the sender never waits for a worker."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from durable_agent_runner.client import checks
from durable_agent_runner.workflows import types as t

RPC_TIMEOUT = timedelta(seconds=10)
SUMMARY_CHARS = 120


class Started(BaseModel):
    """What a delivery started: its run's id, and whether this call started it (False: a repeat
    of a delivery already started, whose run is `run_id`)."""

    run_id: str
    started: bool
    session: str | None = None  # the session the message went to, for a session's hook


def delivery_run_id(source: str, delivery: str) -> str:
    """`hook-NAME-<16 hex digits of the delivery id's SHA-256>`: stable, short, no outside text."""
    return f"{source}-{hashlib.sha256(delivery.encode()).hexdigest()[:16]}"


async def start_once(temporal: Client, task_queue: str, run_id: str, agent: str, input: str, *, source: str) -> Started:
    """Start a run of `agent` answering `input` under `run_id`, unless one was started under it."""
    checks.agent(agent)
    checks.prompt(input)
    try:
        await temporal.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt=input, agent=agent),
            id=checks.run_id(run_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(t.SA_AGENT, agent), SearchAttributePair(t.SA_PHASE, t.Phase.STARTING)]
            ),
            static_summary=f"{agent}: {input[:SUMMARY_CHARS]} ({source})",
            rpc_timeout=RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return Started(run_id=run_id, started=False)
    return Started(run_id=run_id, started=True)


async def send_once(temporal: Client, task_queue: str, run_id: str, session: str, text: str, *, by: str) -> Started:
    """Send `text` to `session` by a DeliverMessage run under `run_id`, unless one was started under it."""
    checks.prompt(text, "text")
    if len(text) > t.MAX_MESSAGE_CHARS:
        raise checks.BadArgument("text", f"a session's message is at most {t.MAX_MESSAGE_CHARS:,} characters")
    try:
        await temporal.start_workflow(
            t.DELIVER_WORKFLOW,
            t.Delivery(session=session, text=text, by=by),
            id=checks.run_id(run_id),
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            static_summary=f"{by}: a message to session {session}"[:200],
            rpc_timeout=RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return Started(run_id=run_id, started=False, session=session)
    return Started(run_id=run_id, started=True, session=session)
