"""Notifications that reach people when a run waits for one: an agent's own channels, the plan a
run freezes at its start, and the notification activity's input and result.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from durable_agent_runner.workflows.types.transcript import Contract

# How a person is reached: a signed JSON webhook, a Slack incoming webhook, an email over SMTP.
Channel = Literal["webhook", "slack", "email"]
CHANNELS: tuple[Channel, ...] = ("webhook", "slack", "email")
# What the run waits for: a call to approve, a call in doubt, a run paused on its budget, an answer.
WaitKind = Literal["approval", "doubt", "budget", "question"]
MAX_RECIPIENTS = 20  # an agent's own email recipients (as NOTIFY_EMAIL_TO's)
MAX_ESCALATE_SECONDS = 30 * 24 * 3600.0  # a wait for a call in doubt lasts at most 30 days anyway


class NotifyOptions(Contract):
    """An agent's own channels (`Agent(notify=NotifyOptions(...))`), beside or instead of the
    worker's (NOTIFY_*): frozen into the run with the agent, so no credential belongs here
    (signing keys, the SMTP password and Slack's URL stay in the worker's settings)."""

    webhook_url: str | None = Field(default=None, max_length=2048)  # instead of NOTIFY_WEBHOOK_URL
    email_to: list[str] = Field(default_factory=list, max_length=MAX_RECIPIENTS)  # instead of NOTIFY_EMAIL_TO
    # Seconds a wait may last before the escalation channel hears of it (None: never escalate).
    escalate_after: float | None = Field(default=None, gt=0, le=MAX_ESCALATE_SECONDS)
    escalate_webhook_url: str | None = Field(default=None, max_length=2048)  # instead of NOTIFY_ESCALATE_WEBHOOK_URL


class NotifyPlan(Contract):
    """Who hears of a run's waits, as the resolving worker saw it when the run started: the names
    of the channels only (URLs, keys and passwords stay on workers). Empty: the run notifies no one
    and schedules nothing."""

    channels: list[Channel] = Field(default_factory=list)
    escalate: bool = False  # an escalation webhook exists (the worker's or the agent's own)
    attempts: int = Field(default=5, ge=1, le=20)  # NOTIFY_MAX_ATTEMPTS: each notification's retry bound


class NotifyInput(Contract):
    """One notification on one channel: what a person is told of one wait. `idempotency_key` is
    the same on every attempt, every retry and every replay of it, so a receiver drops duplicates."""

    channel: Channel
    kind: WaitKind
    escalation: bool = False  # the wait outlived the agent's escalate_after
    run_id: str
    call_id: str | None = None  # None: a budget pause
    tool: str | None = None
    arguments: str = ""  # an excerpt of the call's arguments as JSON
    agent: str
    turn: int
    waiting_since: datetime
    why: str = ""  # in words: what the run waits for
    idempotency_key: str
    url: str | None = None  # the agent's own webhook (or escalation webhook); None: the worker's
    email_to: list[str] = Field(default_factory=list)  # the agent's own recipients; []: the worker's


class NotifyResult(Contract):
    channel: Channel
    sent: str  # in words, for the run's story: "webhook (HTTP 200)", "email to 2 recipients"
