"""Who hears of a wait for a person, decided here (docs/notifications.md): whether a wait
notifies at all, the one notification per channel the run froze (`AgentSpec.notify_plan`), the
escalation its timer sends if the wait is still open, each one's idempotency key, and what the
story says of a round. Pure; the workflow (workflows/notify_steps.py) runs the activities and
the timer, and calls off what is pending when the wait ends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows import types as t

ARGUMENTS_SHOWN = 2000  # characters of a call's arguments a notification carries


@dataclass(frozen=True)
class About:
    """One wait for a person, as its notifications tell it."""

    kind: t.WaitKind
    label: str  # unique in the run: its kind, turn, call and doubt number
    turn: int
    why: str
    call_id: str | None = None
    tool: str | None = None
    arguments: str = ""
    escalate_after: float | None = None  # the tool's, else the agent's


def notify_key(run_id: str, label: str) -> str:
    """The idempotency key of a wait's notifications: the same wherever and however often computed."""
    return hashlib.sha256(f"{run_id}\n{label}".encode()).hexdigest()[:40]


def escalates(agent: t.AgentSpec, wait: About) -> float | None:
    """Seconds after which the escalation webhook hears of the wait, if the run froze one."""
    plan = agent.notify_plan
    return wait.escalate_after if plan is not None and plan.escalate else None


def notifies(agent: t.AgentSpec, wait: About) -> bool:
    """Whether the wait notifies anyone: a channel, or an escalation (a run that names none asks
    no patch, so histories recorded before 1.4 replay unchanged)."""
    plan = agent.notify_plan
    return plan is not None and (bool(plan.channels) or escalates(agent, wait) is not None)


def base(agent: t.AgentSpec, wait: About, run_id: str, now: datetime) -> t.NotifyInput:
    """What every notification of the wait says."""
    return t.NotifyInput(
        channel="webhook",
        kind=wait.kind,
        run_id=run_id,
        call_id=wait.call_id,
        tool=wait.tool,
        arguments=excerpt(wait.arguments, ARGUMENTS_SHOWN),
        agent=agent.name,
        turn=wait.turn,
        waiting_since=now,
        why=wait.why,
        idempotency_key=notify_key(run_id, wait.label),
    )


def sends(agent: t.AgentSpec, first: t.NotifyInput) -> list[t.NotifyInput]:
    """One notification per channel the run froze, to the agent's own address where it has one."""
    own, plan = agent.notify or t.NotifyOptions(), agent.notify_plan
    channels = plan.channels if plan is not None else []
    return [
        first.model_copy(
            update={
                "channel": channel,
                "url": own.webhook_url if channel == "webhook" else None,
                "email_to": own.email_to if channel == "email" else [],
            }
        )
        for channel in channels
    ]


def escalation(agent: t.AgentSpec, first: t.NotifyInput, wait: About) -> t.NotifyInput:
    """The escalation webhook's notification, under a key of its own."""
    own = agent.notify or t.NotifyOptions()
    key = notify_key(first.run_id, wait.label + "/escalation")
    return first.model_copy(update={"escalation": True, "url": own.escalate_webhook_url, "idempotency_key": key})


def tell(s: RunState, about: About, results: list[t.NotifyResult | str], prefix: str, now: datetime) -> None:
    """A round of notifications about a wait ended: its story told (`told`), by the wait's call."""
    for kind, detail in told(results, prefix):
        s.event(now, kind, call_id=about.call_id, tool=about.tool, detail=detail)


def told(results: list[t.NotifyResult | str], prefix: str) -> list[tuple[t.EventKind, str]]:
    """The story of a round: one `notified` for those that went, a `notify_failed` for each that did not."""
    sent = [r.sent for r in results if isinstance(r, t.NotifyResult)]
    events = [(t.EventKind.NOTIFIED, prefix + ", ".join(sent))] if sent else []
    return events + [(t.EventKind.NOTIFY_FAILED, prefix + failed) for failed in results if isinstance(failed, str)]
