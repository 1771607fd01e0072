"""The notification activity (`agent.notify`): tells a person, on one channel, that a run waits
for them (a call to approve, a call in doubt, a run paused on its budget).

    webhook  a JSON POST with an `Idempotency-Key` header (a receiver drops what it has seen),
             signed with NOTIFY_WEBHOOK_SECRET as serve-hooks' `generic` hooks are
             (webhooks/signatures.py): `X-Signature-256: sha256=<hex>` over
             `{X-Timestamp}.{X-Delivery-Id}.{body}`, the delivery id being the idempotency key
    slack    a message to an incoming webhook (NOTIFY_SLACK_WEBHOOK_URL): the tool, its arguments,
             and a link to the call in the console's inbox
    email    one email over SMTP (SMTP_HOST, NOTIFY_EMAIL_TO), its Message-ID derived from the
             idempotency key

Every message links to the console (NOTIFY_CONSOLE_URL) and carries no credential that decides
on its own: the console asks for its token off localhost, as for any page. Each attempt is
bounded (NOTIFY_TIMEOUT); Temporal retries within the run's own bound (NOTIFY_MAX_ATTEMPTS, frozen
in the run), and the workflow records a channel that stays down in the run's story, never failing
the run for it. Which failures are retried is decided in one place, `_from_status`.
"""

from __future__ import annotations

import asyncio
import json
import smtplib
import ssl
from datetime import timedelta
from email.message import EmailMessage
from email.utils import format_datetime, formatdate

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent_runner.activities.errors import retry_after
from durable_agent_runner.activities.model import heartbeating
from durable_agent_runner.config.addresses import email_address
from durable_agent_runner.config.notify import NotifySettings
from durable_agent_runner.console.links import inbox_link, run_link
from durable_agent_runner.machine.texts import cut
from durable_agent_runner.webhooks.signatures import generic_headers
from durable_agent_runner.workflows.types import NOTIFY_ACTIVITY, NotifyInput, NotifyResult

USER_AGENT = "durable-agent-runner-notify"
RETRYABLE_STATUS = {408, 409, 425, 429}  # and every 5xx: the receiver may answer later
NOT_CONFIGURED = "NotifyNotConfigured"
SHOWN = 300  # characters of a receiver's answer kept in an error
READ = 4096  # bytes of a receiver's answer read at most: the rest is never downloaded
ARGS_SHOWN = 1500  # characters of the arguments shown in a Slack message (its blocks take 3,000)


def console_link(settings: NotifySettings, n: NotifyInput) -> str:
    """Where a person decides: the call in the console's inbox, or the paused run's page."""
    if n.call_id is None:
        return run_link(settings.console_url, n.run_id)
    return inbox_link(settings.console_url, n.run_id, n.call_id)


def headline(n: NotifyInput) -> str:
    """One line saying what waits, for a subject, a Slack message and the webhook's `text`."""
    what = {
        "approval": f"{n.agent} waits for approval of {n.tool}",
        "doubt": f"{n.agent}: {n.tool} is in doubt and waits for a person to resolve it",
        "budget": f"{n.agent} is paused on its budget",
        "question": f"{n.agent} asks a person a question",
    }[n.kind]
    return f"Escalated: {what}" if n.escalation else what


def body_lines(n: NotifyInput, link: str) -> list[str]:
    lines = [headline(n), "", f"run: {n.run_id} (turn {n.turn})", f"waiting since: {format_datetime(n.waiting_since)}"]
    if n.call_id is not None:
        lines.append(f"call: {n.tool} ({n.call_id})")
    if n.why:
        lines.append(n.why)
    if n.arguments:
        lines += ["", "arguments:", n.arguments]
    return [*lines, "", f"Decide in the console: {link}"]


def webhook_payload(n: NotifyInput, link: str) -> dict[str, object]:
    """The generic webhook's JSON. `text` makes it readable by a receiver that shows text alone
    (a Slack or Mattermost webhook given as the worker's NOTIFY_ESCALATE_WEBHOOK_URL: such a URL is
    a credential, and an agent's own `escalate_webhook_url` is written into its runs' history)."""
    return {
        "kind": n.kind,
        "escalation": n.escalation,
        "run_id": n.run_id,
        "call_id": n.call_id,
        "tool": n.tool,
        "arguments": n.arguments,
        "agent": n.agent,
        "turn": n.turn,
        "waiting_since": n.waiting_since.isoformat(),
        "why": n.why,
        "console_url": link,
        "idempotency_key": n.idempotency_key,
        "text": f"{headline(n)}: {link}",
    }


def _slack_text(text: str) -> str:
    """Slack's mrkdwn escapes: outside data must not make links or mentions."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(n: NotifyInput, link: str) -> dict[str, object]:
    head = _slack_text(headline(n))
    facts = f"run `{_slack_text(n.run_id)}` · turn {n.turn} · waiting since {n.waiting_since:%Y-%m-%d %H:%M:%S} UTC"
    blocks: list[dict[str, object]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{head}*\n{facts}"}},
    ]
    if n.arguments:
        shown = cut(n.arguments, ARGS_SHOWN).replace("```", "'''")
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{_slack_text(shown)}```"}})
    label = "Open the run in the console" if n.call_id is None else "Approve or reject in the console"
    if n.kind in ("doubt", "question"):
        label = "Resolve in the console" if n.kind == "doubt" else "Answer in the console"
    button = {"type": "button", "text": {"type": "plain_text", "text": label}, "url": link}
    blocks.append({"type": "actions", "elements": [button]})
    return {"text": f"{head}: {link}", "blocks": blocks}  # `text`: the notification's line, mrkdwn too


def _from_status(response: httpx.Response, answer: str, channel: str) -> ApplicationError | None:
    """None for a 2xx; else the failure, retryable when the receiver may answer later. `answer`:
    the start of what the receiver said, on one line in the error."""
    status = response.status_code
    if 200 <= status < 300:
        return None
    said = cut(" ".join(answer.split()), SHOWN) or response.reason_phrase
    text = f"{channel} answered HTTP {status}: {said}"
    if status in RETRYABLE_STATUS or status >= 500:
        delay = retry_after(response.headers)
        wait = timedelta(seconds=delay) if delay is not None else None
        return ApplicationError(text, type=f"NotifyHTTP{status}", next_retry_delay=wait)
    return ApplicationError(text, type=f"NotifyHTTP{status}", non_retryable=True)


class NotifyActivities:
    """`transport`: for tests (httpx.MockTransport); None, the network."""

    def __init__(self, settings: NotifySettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._transport = transport

    @activity.defn(name=NOTIFY_ACTIVITY)
    async def notify(self, n: NotifyInput) -> NotifyResult:
        """Heartbeats while it sends: a worker killed mid-send is noticed within the heartbeat
        timeout, and a wait that ended calls the send off."""
        async with heartbeating():
            return await self._notify(n)

    async def _notify(self, n: NotifyInput) -> NotifyResult:
        link = console_link(self.settings, n)
        if n.channel == "email":
            return await self._email(n, link)
        if n.channel == "slack":
            secret = self.settings.slack_webhook_url
            if secret is None:
                raise _unset("NOTIFY_SLACK_WEBHOOK_URL")
            body = json.dumps(slack_payload(n, link), ensure_ascii=False).encode()
            status = await self._post("slack", secret.get_secret_value(), body, {})
            return NotifyResult(channel="slack", sent=f"slack (HTTP {status})")
        return await self._webhook(n, link)

    async def _webhook(self, n: NotifyInput, link: str) -> NotifyResult:
        s = self.settings
        url = n.url or (s.escalate_webhook_url if n.escalation else s.webhook_url)
        if not url:
            raise _unset("NOTIFY_ESCALATE_WEBHOOK_URL" if n.escalation else "NOTIFY_WEBHOOK_URL")
        body = json.dumps(webhook_payload(n, link), ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"Idempotency-Key": n.idempotency_key}
        if s.webhook_secret is not None:
            # Signed as a `generic` hook's sender signs: a receiver checks it, and its freshness, as serve-hooks does.
            headers |= generic_headers(s.webhook_secret.get_secret_value().encode(), body, n.idempotency_key)
        status = await self._post("webhook", url, body, headers)
        name = "escalation webhook" if n.escalation else "webhook"
        return NotifyResult(channel="webhook", sent=f"{name} (HTTP {status})")

    async def _post(self, channel: str, url: str, body: bytes, headers: dict[str, str]) -> int:
        """One POST within NOTIFY_TIMEOUT; no retries here (Temporal's, each one in history)."""
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
        timeout = httpx.Timeout(self.settings.timeout)
        async with httpx.AsyncClient(timeout=timeout, transport=self._transport, follow_redirects=False) as http:
            try:
                async with http.stream("POST", url, content=body, headers=headers) as response:
                    answer = b""
                    async for chunk in response.aiter_bytes():
                        answer += chunk
                        if len(answer) >= READ:
                            break
            except httpx.TransportError as err:  # the message may quote the URL: the redactor masks Slack's
                kind = "NotifyTimeout" if isinstance(err, httpx.TimeoutException) else "NotifyConnectionError"
                raise ApplicationError(f"cannot reach the {channel}: {err or type(err).__name__}", type=kind) from None
        failure = _from_status(response, answer[:READ].decode("utf-8", "replace"), channel)
        if failure is not None:
            raise failure
        return response.status_code

    async def _email(self, n: NotifyInput, link: str) -> NotifyResult:
        s = self.settings
        if not s.smtp_host:
            raise _unset("SMTP_HOST")
        try:
            to = [email_address(a) for a in n.email_to] or s.email_to
        except ValueError as err:
            raise ApplicationError(
                f"the agent's email_to: each must be {err}", type="NotifyBadAddress", non_retryable=True
            ) from None
        if not to:
            raise _unset("NOTIFY_EMAIL_TO")
        message = EmailMessage()
        message["Subject"] = " ".join(headline(n).split())[:200]  # one line: no header can be smuggled in
        message["From"] = s.email_from
        message["To"] = ", ".join(to)
        message["Date"] = formatdate(localtime=False)
        domain = s.email_from.rpartition("@")[2] or "localhost"
        message["Message-ID"] = f"<{n.idempotency_key}@{domain}>"  # the same on every retry: clients thread or drop
        message["X-Idempotency-Key"] = n.idempotency_key
        message.set_content("\n".join(body_lines(n, link)) + "\n")
        await asyncio.to_thread(self._send, message)
        return NotifyResult(channel="email", sent=f"email to {len(to)} recipient{'' if len(to) == 1 else 's'}")

    def _send(self, message: EmailMessage) -> None:
        """Over SMTP, in a thread, each step bounded by NOTIFY_TIMEOUT. A 5xx answer is final; a
        4xx or a connection that fails is retried."""
        s = self.settings
        assert s.smtp_host is not None
        try:
            with smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=s.timeout) as smtp:
                if s.smtp_starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if s.smtp_username and s.smtp_password is not None:
                    smtp.login(s.smtp_username, s.smtp_password.get_secret_value())
                smtp.send_message(message)
        except smtplib.SMTPAuthenticationError as err:
            raise ApplicationError(
                f"SMTP login refused: {err.smtp_code}", type="NotifySmtpAuth", non_retryable=True
            ) from None
        except smtplib.SMTPRecipientsRefused as err:
            codes = sorted({code for code, _ in err.recipients.values()})
            final = all(code >= 500 for code in codes)
            raise ApplicationError(
                f"SMTP refused every recipient: {codes}", type="NotifySmtpRefused", non_retryable=final
            ) from None
        except smtplib.SMTPResponseException as err:
            text = f"SMTP answered {err.smtp_code}: {cut(_text(err.smtp_error), SHOWN)}"
            raise ApplicationError(text, type="NotifySmtp", non_retryable=err.smtp_code >= 500) from None
        except (OSError, smtplib.SMTPException) as err:  # refused, reset, timed out, closed mid-way
            raise ApplicationError(
                f"cannot reach SMTP server {s.smtp_host}:{s.smtp_port}: {err}", type="NotifySmtpConnection"
            ) from None


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _unset(name: str) -> ApplicationError:
    """The run froze a channel this worker cannot reach: retrying here would not help."""
    return ApplicationError(
        f"{name} is not set on the worker that took this notification", type=NOT_CONFIGURED, non_retryable=True
    )
