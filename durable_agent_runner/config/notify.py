"""Worker-side notification settings: where a person hears that a run waits for them
(docs/notifications.md), read from the environment through the one settings model
(durable_agent_runner/config/env.py), which parses and bounds every value.

The webhook's signing secret, the SMTP password and the webhook URLs (Slack's is its own credential,
and another's may be) live only here, in the worker process: they are never part of an activity
input or result, and the worker's redactor masks them (`keys()`). What a run freezes of these settings when
it starts is the names of the channels (`plan()`), never their addresses or secrets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr

from durable_agent_runner.config.addresses import email_list
from durable_agent_runner.config.env import SettingsError, WorkerSettings
from durable_agent_runner.workflows.types import Channel, NotifyOptions, NotifyPlan

DEFAULT_CONSOLE_URL = "http://127.0.0.1:8237"  # `client.py console`'s default address


class NotifySettings(BaseModel):
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None  # signs each webhook's body: X-Signature-256
    slack_webhook_url: SecretStr | None = None
    escalate_webhook_url: str | None = None
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_starttls: bool = False
    email_to: list[str] = Field(default_factory=list)
    email_from: str = "durable-agent-runner@localhost"
    console_url: str = DEFAULT_CONSOLE_URL  # the links in messages open its inbox
    max_attempts: int = Field(default=5, ge=1, le=20)  # each notification's retry bound
    timeout: float = Field(default=10.0, gt=0, le=120)  # seconds for one attempt to reach a channel

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NotifySettings:
        return cls.of(WorkerSettings.load(env))

    @classmethod
    def of(cls, s: WorkerSettings) -> NotifySettings:
        for name, value in (("NOTIFY_EMAIL_TO", s.notify_email_to), ("SMTP_USERNAME", s.smtp_username)):
            if value and not s.smtp_host:  # else no email would be sent, and no one would be told
                raise SettingsError(f"{name} is set but SMTP_HOST is not: set SMTP_HOST (and SMTP_PORT) to send email")
        return cls(
            webhook_url=s.notify_webhook_url,
            webhook_secret=s.notify_webhook_secret,
            slack_webhook_url=s.notify_slack_webhook_url,
            escalate_webhook_url=s.notify_escalate_webhook_url,
            smtp_host=s.smtp_host,
            smtp_port=s.smtp_port,
            smtp_username=s.smtp_username,
            smtp_password=s.smtp_password,
            smtp_starttls=s.smtp_starttls,
            email_to=email_list(s.notify_email_to or ""),  # checked by the settings model
            email_from=s.notify_email_from,
            console_url=s.notify_console_url,
            max_attempts=s.notify_max_attempts,
            timeout=s.notify_timeout,
        )

    def keys(self) -> list[str]:
        """The secrets these settings hold, for the redactor: a URL's by its credential part."""
        found = [k.get_secret_value() for k in (self.webhook_secret, self.smtp_password) if k is not None]
        slack = self.slack_webhook_url.get_secret_value() if self.slack_webhook_url is not None else None
        return found + [part for url in (slack, self.webhook_url, self.escalate_webhook_url) for part in url_keys(url)]

    def said(self, agents: Mapping[str, NotifyOptions | None]) -> list[str]:
        """What the worker's log says at start: the channels it sends to, and (each a line of its
        own) an agent's email that cannot go out, having no SMTP_HOST to go through."""
        mine = [
            name
            for name, on in (
                ("webhook", self.webhook_url),
                ("slack", self.slack_webhook_url),
                ("email", self.smtp_host and self.email_to),
                ("escalation", self.escalate_webhook_url),
            )
            if on
        ]
        lines = [f"notifications: {', '.join(mine) or 'none'} (NOTIFY_*, SMTP_*; agents may add their own)"]
        for agent, own in sorted(agents.items()):
            if own is not None and own.email_to and not self.smtp_host:
                lines.append(f"agent {agent!r} has email_to, but SMTP_HOST is not set: its runs send no email")
        return lines

    def plan(self, own: NotifyOptions | None) -> NotifyPlan | None:
        """What a run of an agent with these channels of its own (`own`) freezes: the channels
        that exist, on this worker or the agent; None when there is none (nothing is scheduled)."""
        own = own or NotifyOptions()
        channels: list[Channel] = []
        if self.webhook_url or own.webhook_url:
            channels.append("webhook")
        if self.slack_webhook_url is not None:
            channels.append("slack")
        if self.smtp_host and (self.email_to or own.email_to):
            channels.append("email")
        escalate = bool(own.escalate_webhook_url or self.escalate_webhook_url)  # when a wait has escalate_after
        if not channels and not escalate:
            return None
        return NotifyPlan(channels=channels, escalate=escalate, attempts=self.max_attempts)


# A path segment of lowercase words: no token (the masking of its 8-character pieces would eat
# those words, "notifica…", from every result and log line).
WORDS = re.compile(r"[a-z._-]*")


def url_keys(url: str | None) -> list[str]:
    """What may be a webhook URL's credential: a password in it, its last path segment and its
    query (Slack's, Discord's and Mattermost's tokens end the path; others ride in the query). Not
    its scheme and host: the redactor masks any 8 characters of a key, and every `https://` of
    every activity's result would go."""
    if not url:
        return []
    parts = urlsplit(url)
    last = parts.path.rstrip("/").rsplit("/", 1)[-1]
    token = "" if WORDS.fullmatch(last) else last  # `/hooks/notifications` ends in a word, not a token
    return [k for k in (parts.password, token, parts.query) if k]
