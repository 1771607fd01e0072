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
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

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


class NoSession(checks.BadArgument):
    """The session a message is for cannot take it: no run has its id, or that run has ended (or
    is not an agent run). Nothing was sent."""

    def __init__(self, why: str) -> None:
        super().__init__("session", why)


async def not_a_session(temporal: Client, session: str) -> str | None:
    """Why `session` cannot take a message now, or None when it is a running agent run."""
    try:
        desc = await temporal.get_workflow_handle(session).describe(rpc_timeout=RPC_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return f"no run with id '{session}'"
        raise
    if desc.workflow_type != t.WORKFLOW_NAME or desc.status != WorkflowExecutionStatus.RUNNING:
        ended = f" ({desc.status.name.lower()})" if desc.status is not None else ""
        return f"run '{session}' is not a running session{ended}"
    return None


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
    """Send `text` to `session` by a DeliverMessage run under `run_id`, unless one was started under
    it. A session that cannot take it now is NoSession, and nothing starts (a repeat of a delivery
    already made is told as such)."""
    checks.prompt(text, "text")
    if len(text) > t.MAX_MESSAGE_CHARS:
        raise checks.BadArgument("text", f"a session's message is at most {t.MAX_MESSAGE_CHARS:,} characters")
    why = await not_a_session(temporal, session)
    if why is not None:
        try:
            await temporal.get_workflow_handle(checks.run_id(run_id)).describe(rpc_timeout=RPC_TIMEOUT)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise NoSession(f"{why}: the message was not sent") from None
            raise
        return Started(run_id=run_id, started=False, session=session)
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
