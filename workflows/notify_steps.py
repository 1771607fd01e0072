"""Notifications while a run waits for a person (docs/notifications.md): a call to approve, a
call in doubt, a run paused on its budget. A breakpoint's pause is a person's own doing: no one
is told.

When a wait starts, the run starts one notification activity per channel the run froze
(`AgentSpec.notify_plan`), beside the wait and never in its way; with `escalate_after` (the
tool's, else the agent's), a durable timer, after which the escalation webhook hears of the wait
if it is still open. The wait decides alone: when it ends (a decision, its timeout, a cancel),
whatever is still pending of its notifications is called off, since a message about a wait that
is over sends a person to nothing; what was sent or failed for good by then is in the story
(`notified`, `notify_failed`). A channel that stays down never fails the run.

Each notification's idempotency key is a hash of the run's id and the wait's label (its kind,
turn, call and doubt number): the same on every attempt, retry and replay, so a receiver drops
duplicates. A run whose plan names no channel schedules nothing and asks no patch: histories
recorded before 1.4 replay unchanged.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import NOTIFY_PATCH
from durable_agent_runner.workflows.steps import Steps

# One attempt: the activity bounds each network step by NOTIFY_TIMEOUT (at most 120 s); an SMTP
# exchange takes a few of them. Retries back off from 1 s, within the run's NOTIFY_MAX_ATTEMPTS.
NOTIFY_ATTEMPT = timedelta(minutes=5)
# A notification that could not go within this (no worker took it, or its retries ran long) is a
# failure in the story: a wait may last days, its notifications do not.
NOTIFY_WITHIN = timedelta(hours=1)
# The activity heartbeats every 2 s while it sends: a worker killed mid-send is noticed within this.
NOTIFY_HEARTBEAT = timedelta(seconds=10)
NOTIFY_FIRST_RETRY = timedelta(seconds=1)
NOTIFY_MAX_RETRY = timedelta(minutes=2)
ARGUMENTS_SHOWN = 2000  # characters of a call's arguments a notification carries


@dataclass(frozen=True)
class Wait:
    """One wait for a person, as its notifications tell it."""

    kind: t.WaitKind
    label: str  # unique in the run: its kind, turn, call and doubt number
    turn: int
    why: str
    open: Callable[[], bool]  # whether the wait still goes on (an escalation checks it when its timer fires)
    call_id: str | None = None
    tool: str | None = None
    arguments: str = ""
    escalate_after: float | None = None


def notify_key(run_id: str, label: str) -> str:
    """The idempotency key of a wait's notifications: the same wherever and however often computed."""
    return hashlib.sha256(f"{run_id}\n{label}".encode()).hexdigest()[:40]


class NotifySteps(Steps):
    """`_notifying(agent, wait)`: around a wait for a person, its notifications."""

    @contextlib.asynccontextmanager
    async def _notifying(self, agent: t.AgentSpec, wait: Wait) -> AsyncIterator[None]:
        task = self._notify_start(agent, wait)
        try:
            yield
        finally:
            if task is not None and not task.done():
                task.cancel()  # the wait is over: pending sends and the escalation timer are called off

    def _notify_start(self, agent: t.AgentSpec, wait: Wait) -> asyncio.Task[None] | None:
        plan = agent.notify_plan
        if plan is None:
            return None
        escalate = wait.escalate_after if plan.escalate else None
        if not plan.channels and escalate is None:
            return None
        if not workflow.patched(NOTIFY_PATCH):
            return None
        return asyncio.create_task(self._notify(agent, plan, wait, escalate))

    async def _notify(self, agent: t.AgentSpec, plan: t.NotifyPlan, wait: Wait, escalate: float | None) -> None:
        run_id = workflow.info().workflow_id
        base = t.NotifyInput(
            channel="webhook",
            kind=wait.kind,
            run_id=run_id,
            call_id=wait.call_id,
            tool=wait.tool,
            arguments=excerpt(wait.arguments, ARGUMENTS_SHOWN),
            agent=agent.name,
            turn=wait.turn,
            waiting_since=workflow.now(),
            why=wait.why,
            idempotency_key=notify_key(run_id, wait.label),
        )
        own = agent.notify or t.NotifyOptions()
        jobs = []
        if plan.channels:
            sends = [
                base.model_copy(
                    update={
                        "channel": channel,
                        "url": own.webhook_url if channel == "webhook" else None,
                        "email_to": own.email_to if channel == "email" else [],
                    }
                )
                for channel in plan.channels
            ]
            jobs.append(self._notify_round(wait, sends, plan.attempts, ""))
        if escalate is not None:
            jobs.append(self._escalate(wait, base, own, plan.attempts, escalate))
        await asyncio.gather(*jobs)

    async def _escalate(
        self, wait: Wait, base: t.NotifyInput, own: t.NotifyOptions, attempts: int, after: float
    ) -> None:
        """A durable timer: if the wait is still open when it fires, the escalation webhook hears of it."""
        what = f"{wait.tool} {wait.call_id}" if wait.call_id else "the budget pause"
        await workflow.sleep(timedelta(seconds=after), summary=f"escalate {what} after {after:g}s")
        if not wait.open():
            return
        escalation = base.model_copy(
            update={
                "escalation": True,
                "url": own.escalate_webhook_url,
                "idempotency_key": notify_key(base.run_id, wait.label + "/escalation"),
            }
        )
        await self._notify_round(wait, [escalation], attempts, f"escalated after {after:g}s: ")

    async def _notify_round(self, wait: Wait, sends: list[t.NotifyInput], attempts: int, prefix: str) -> None:
        """The sends at once; then a `notified` event for those that went, a `notify_failed` for each that did not."""
        results = await asyncio.gather(*(self._send(wait, n, attempts) for n in sends))
        sent = [r.sent for r in results if isinstance(r, t.NotifyResult)]
        if sent:
            detail = prefix + ", ".join(sent)
            self._event(t.EventKind.NOTIFIED, call_id=wait.call_id, tool=wait.tool, detail=detail)
        for failed in (r for r in results if isinstance(r, str)):
            self._event(t.EventKind.NOTIFY_FAILED, call_id=wait.call_id, tool=wait.tool, detail=prefix + failed)

    async def _send(self, wait: Wait, n: t.NotifyInput, attempts: int) -> t.NotifyResult | str:
        """One channel's notification, retried within `attempts`; what went, or why it did not."""
        name = f"escalation {n.channel}" if n.escalation else n.channel
        about = f"{wait.tool} ({wait.call_id})" if wait.call_id else "budget pause"
        try:
            result: t.NotifyResult = await workflow.execute_activity(
                t.NOTIFY_ACTIVITY,
                n,
                result_type=t.NotifyResult,
                activity_id=f"notify-{wait.label}-{'escalation' if n.escalation else n.channel}",
                start_to_close_timeout=NOTIFY_ATTEMPT,
                schedule_to_close_timeout=NOTIFY_WITHIN,
                heartbeat_timeout=NOTIFY_HEARTBEAT,
                retry_policy=RetryPolicy(
                    initial_interval=NOTIFY_FIRST_RETRY, maximum_interval=NOTIFY_MAX_RETRY, maximum_attempts=attempts
                ),
                summary=f"turn {wait.turn} · notify {name}: {wait.kind} of {about}",
            )
            return result
        except ActivityError as err:
            cause = err.cause
            why = cause.message if isinstance(cause, FailureError) else err.message
            if isinstance(cause, FailureError) and isinstance(cause.cause, FailureError):
                why = f"{why}: {cause.cause.message}"  # a timeout's last error
            return f"{name}: {why} (gave up within {attempts} attempt{'' if attempts == 1 else 's'})"
