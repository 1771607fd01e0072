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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

from durable_agent_runner.machine import notify
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
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


@dataclass(frozen=True)
class Wait(notify.About):
    """A wait for a person as the workflow holds it: with whether it still goes on (an escalation
    checks it when its timer fires)."""

    open: Callable[[], bool] = lambda: True


class Notifier:
    """`notifying(agent, wait)`: around a wait for a person, its notifications (machine/notify.py)."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    @contextlib.asynccontextmanager
    async def notifying(self, agent: t.AgentSpec, wait: Wait) -> AsyncIterator[None]:
        task = self._notify_start(agent, wait)
        try:
            yield
        finally:
            if task is not None and not task.done():
                task.cancel()  # the wait is over: pending sends and the escalation timer are called off

    def _notify_start(self, agent: t.AgentSpec, wait: Wait) -> asyncio.Task[None] | None:
        if not notify.notifies(agent, wait) or not versions.patched(NOTIFY_PATCH):
            return None
        return asyncio.create_task(self._notify(agent, wait))

    async def _notify(self, agent: t.AgentSpec, wait: Wait) -> None:
        first = notify.base(agent, wait, workflow.info().workflow_id, workflow.now())
        attempts = agent.notify_plan.attempts if agent.notify_plan is not None else 1
        jobs = []
        channels = notify.sends(agent, first)
        if channels:
            jobs.append(self._notify_round(wait, channels, attempts, ""))
        escalate = notify.escalates(agent, wait)
        if escalate is not None:
            jobs.append(self._escalate(wait, notify.escalation(agent, first, wait), attempts, escalate))
        await asyncio.gather(*jobs)

    async def _escalate(self, wait: Wait, escalation: t.NotifyInput, attempts: int, after: float) -> None:
        """A durable timer: if the wait is still open when it fires, the escalation webhook hears of it."""
        what = f"{wait.tool} {wait.call_id}" if wait.call_id else "the budget pause"
        await workflow.sleep(timedelta(seconds=after), summary=f"escalate {what} after {after:g}s")
        if wait.open():
            await self._notify_round(wait, [escalation], attempts, f"escalated after {after:g}s: ")

    async def _notify_round(self, wait: Wait, sends: list[t.NotifyInput], attempts: int, prefix: str) -> None:
        """The sends at once; then what the story says of them (machine/notify.tell)."""
        results = await asyncio.gather(*(self._send(wait, n, attempts) for n in sends))
        self.steps.take(lambda s, _: notify.tell(s, wait, list(results), prefix, workflow.now()))

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
