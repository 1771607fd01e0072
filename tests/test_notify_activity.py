"""The notification activity (activities/notify.py) and its settings, without Temporal: what each
channel sends, how it is signed, which failures are retried, what a run freezes of the settings,
and that every secret of them is masked. The email tests talk to a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner.activities.notify import NotifyActivities, slack_payload
from durable_agent_runner.config.env import SettingsError, secret_values
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.config.notify import NotifySettings
from durable_agent_runner.redact import Redactor
from durable_agent_runner.webhooks import signatures
from durable_agent_runner.workflows import types as t
from tests.helpers import closed_address
from tests.notify_receivers import SmtpSink

SECRET = "whsec-0b7e91d2c4a85f36"
SLACK = "https://hooks.slack.example/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"
SINCE = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def wait(**fields: object) -> t.NotifyInput:
    base: dict[str, object] = {
        "channel": "webhook",
        "kind": "approval",
        "run_id": "run-1",
        "call_id": "call_9",
        "tool": "send",
        "arguments": '{"label": "report <@U123> & co"}',
        "agent": "mailer",
        "turn": 2,
        "waiting_since": SINCE,
        "why": "waiting for a person to approve send (call_9)",
        "idempotency_key": "k" * 40,
    }
    return t.NotifyInput.model_validate(base | fields)


async def run(activities: NotifyActivities, n: t.NotifyInput) -> t.NotifyResult:
    """The activity as a worker runs it (its heartbeats need an activity's context)."""
    return await ActivityEnvironment().run(activities.notify, n)


def recording(
    status: int = 200, headers: dict[str, str] | None = None
) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, headers=headers or {}, text="nope" if status >= 300 else "ok")

    return seen, httpx.MockTransport(answer)


async def test_the_webhook_is_signed_over_its_raw_body_and_carries_its_key() -> None:
    seen, transport = recording()
    settings = NotifySettings(
        webhook_url="https://hooks.example/in", webhook_secret=SECRET, console_url="https://c.example"
    )
    result = await run(NotifyActivities(settings, transport), wait())
    (request,) = seen
    assert result == t.NotifyResult(channel="webhook", sent="webhook (HTTP 200)")
    assert str(request.url) == "https://hooks.example/in" and request.headers["Idempotency-Key"] == "k" * 40
    # Signed as a `generic` hook's sender signs: serve-hooks' own check accepts it, and the id is the key.
    stamp = request.headers["X-Timestamp"]
    assert request.headers["X-Delivery-Id"] == "k" * 40 and abs(int(stamp) - time.time()) < 60
    expected = (
        "sha256=" + hmac.new(SECRET.encode(), f"{stamp}.{'k' * 40}.".encode() + request.content, "sha256").hexdigest()
    )
    assert request.headers["X-Signature-256"] == expected
    assert signatures.check("generic", SECRET.encode(), request.headers, request.content, time.time(), "k" * 40) is None
    assert signatures.check("generic", SECRET.encode(), request.headers, request.content, time.time(), "x" * 40)
    body = json.loads(request.content)
    assert {k: body[k] for k in ("kind", "run_id", "call_id", "tool", "agent", "turn", "idempotency_key")} == {
        "kind": "approval", "run_id": "run-1", "call_id": "call_9", "tool": "send", "agent": "mailer", "turn": 2,
        "idempotency_key": "k" * 40,
    }  # fmt: skip
    assert body["arguments"] == '{"label": "report <@U123> & co"}' and body["waiting_since"] == SINCE.isoformat()
    assert body["console_url"] == "https://c.example/inbox#call-run-1/call_9"
    assert SECRET not in request.content.decode()


async def test_an_agent_s_own_webhook_wins_and_an_unsigned_one_says_so_by_no_header() -> None:
    seen, transport = recording()
    await run(
        NotifyActivities(NotifySettings(webhook_url="https://worker.example"), transport),
        wait(url="https://own.example/hook"),
    )
    (request,) = seen
    assert str(request.url) == "https://own.example/hook" and "X-Signature-256" not in request.headers


@pytest.mark.parametrize(
    ("status", "retried", "delay"),
    [(500, True, None), (503, True, None), (429, True, 7), (408, True, None), (400, False, None), (404, False, None)],
)
async def test_which_answers_are_retried(status: int, retried: bool, delay: int | None) -> None:
    _, transport = recording(status, {"Retry-After": "7"} if delay else None)
    with pytest.raises(ApplicationError) as failed:
        await run(NotifyActivities(NotifySettings(webhook_url="https://h.example"), transport), wait())
    assert failed.value.non_retryable is not retried and failed.value.type == f"NotifyHTTP{status}"
    assert f"HTTP {status}" in failed.value.message
    assert failed.value.next_retry_delay == (timedelta(seconds=delay) if delay else None)


async def test_a_receiver_that_cannot_be_reached_is_retried() -> None:
    with closed_address() as address:
        with pytest.raises(ApplicationError) as failed:
            await run(NotifyActivities(NotifySettings(webhook_url=f"http://{address}/hook", timeout=2)), wait())
    assert failed.value.type == "NotifyConnectionError" and not failed.value.non_retryable


async def test_a_channel_the_worker_lacks_fails_at_once() -> None:
    for n, name in [
        (wait(), "NOTIFY_WEBHOOK_URL"),
        (wait(escalation=True), "NOTIFY_ESCALATE_WEBHOOK_URL"),
        (wait(channel="slack"), "NOTIFY_SLACK_WEBHOOK_URL"),
        (wait(channel="email"), "SMTP_HOST"),
    ]:
        with pytest.raises(ApplicationError, match=name) as failed:
            await run(NotifyActivities(NotifySettings()), n)
        assert failed.value.non_retryable and failed.value.type == "NotifyNotConfigured"


async def test_slack_shows_the_tool_its_arguments_and_a_link_without_letting_them_mention_anyone() -> None:
    seen, transport = recording()
    settings = NotifySettings(slack_webhook_url=SLACK, console_url="https://c.example")  # type: ignore[arg-type]
    result = await run(NotifyActivities(settings, transport), wait(channel="slack"))
    (request,) = seen
    assert result.sent == "slack (HTTP 200)" and str(request.url) == SLACK
    body = json.loads(request.content)
    text = json.dumps(body["blocks"])
    assert "mailer waits for approval of send" in body["text"]
    assert "&lt;@U123&gt; &amp; co" in text and "<@U123>" not in text
    (actions,) = [b for b in body["blocks"] if b["type"] == "actions"]
    assert actions["elements"][0]["url"] == "https://c.example/inbox#call-run-1/call_9"
    assert "approve" in actions["elements"][0]["text"]["text"].lower()
    budget = slack_payload(wait(kind="budget", call_id=None, tool=None, arguments=""), "https://c.example/runs/run-1")
    assert "paused on its budget" in budget["text"]


@pytest.mark.server  # a real SMTP server, in a thread
async def test_one_email_with_a_message_id_from_its_key() -> None:
    with SmtpSink() as smtp:
        settings = NotifySettings(
            smtp_host="127.0.0.1", smtp_port=smtp.port, email_to=["ops@example.com"], email_from="bot@corp.example"
        )
        result = await run(NotifyActivities(settings), wait(channel="email", email_to=["lead@example.com"]))
    assert result.sent == "email to 1 recipient"
    (mail,) = smtp.messages
    assert mail["Message-ID"] == f"<{'k' * 40}@corp.example>" and mail["X-Idempotency-Key"] == "k" * 40
    assert mail["To"] == "lead@example.com"  # the agent's own recipients instead of the worker's
    assert smtp.envelopes == [("bot@corp.example", ["lead@example.com"])]
    assert "report <@U123> & co" in mail.get_content() and "/inbox#call-run-1/call_9" in mail.get_content()


@pytest.mark.server
async def test_an_email_that_cannot_go_is_retried_and_a_bad_address_is_not() -> None:
    with closed_address() as address:
        host, port = address.split(":")
        settings = NotifySettings(smtp_host=host, smtp_port=int(port), email_to=["ops@example.com"], timeout=2)
        with pytest.raises(ApplicationError) as failed:
            await run(NotifyActivities(settings), wait(channel="email"))
        assert failed.value.type == "NotifySmtpConnection" and not failed.value.non_retryable
        with pytest.raises(ApplicationError) as bad:
            await run(NotifyActivities(settings), wait(channel="email", email_to=["x@y.z\r\nBcc: all@corp"]))
        assert bad.value.type == "NotifyBadAddress" and bad.value.non_retryable


def test_a_run_freezes_the_names_of_the_channels_that_exist_and_nothing_else() -> None:
    assert NotifySettings().plan(None) is None
    assert NotifySettings(smtp_host="mail").plan(None) is None  # no one to write to
    worker = NotifySettings(
        webhook_url="https://h.example", webhook_secret=SECRET, slack_webhook_url=SLACK,  # type: ignore[arg-type]
        smtp_host="mail", email_to=["a@b.c"], max_attempts=3, escalate_webhook_url="https://boss.example",
    )  # fmt: skip
    plan = worker.plan(None)
    assert plan == t.NotifyPlan(channels=["webhook", "slack", "email"], escalate=True, attempts=3)
    assert SECRET not in plan.model_dump_json() and "slack" not in plan.model_dump_json().replace('"slack"', "")
    own = t.NotifyOptions(webhook_url="https://own.example", escalate_after=60)
    assert NotifySettings().plan(own) == t.NotifyPlan(channels=["webhook"], escalate=False, attempts=5)
    mail = NotifySettings(smtp_host="mail").plan(t.NotifyOptions(email_to=["me@x.y"]))
    assert mail is not None and mail.channels == ["email"]


def test_the_settings_read_the_variables_and_mask_every_secret() -> None:
    env = {
        "NOTIFY_WEBHOOK_URL": "https://hooks.example/in",
        "NOTIFY_WEBHOOK_SECRET": SECRET,
        "NOTIFY_SLACK_WEBHOOK_URL": SLACK,
        "SMTP_HOST": "mail.example",
        "SMTP_PORT": "2525",
        "SMTP_PASSWORD": "smtp-pass-93ac1e",
        "NOTIFY_EMAIL_TO": "a@example.com, b@example.com",
        "NOTIFY_EMAIL_FROM": "bot@example.com",
        "NOTIFY_MAX_ATTEMPTS": "3",
    }
    settings = LLMSettings.from_env(env)
    n = settings.notify
    assert (n.webhook_url, n.smtp_port, n.email_to, n.max_attempts) == (
        "https://hooks.example/in", 2525, ["a@example.com", "b@example.com"], 3,
    )  # fmt: skip
    masked = Redactor.for_settings(settings).text(f"{SECRET} {SLACK} smtp-pass-93ac1e")
    assert SECRET not in masked and "XXXXXXXXXXXX" not in masked and "smtp-pass" not in masked
    assert SECRET not in repr(settings) and "smtp-pass" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("NOTIFY_EMAIL_TO", "a@b.c\r\nBcc: x@y.z", "email addresses (local@domain) separated by commas"),
        ("NOTIFY_EMAIL_FROM", "nobody", "an email address"),
        ("SMTP_PORT", "70000", "[1, 65535]"),
        ("NOTIFY_MAX_ATTEMPTS", "0", "[1, 20]"),
        ("NOTIFY_WEBHOOK_URL", "ftp://x", "http:// or https://"),
        ("NOTIFY_ESCALATE_WEBHOOK_URL", "https://alerts.example/in put", "and no blanks"),
        ("NOTIFY_WEBHOOK_SECRET", "abc", "8-4096 characters"),  # serve-hooks wants 8 of a hook's secret
        ("SMTP_HOST", "mail example", "a host's name or address"),
        ("SMTP_HOST", "smtp://mail.example", "a host's name or address"),
    ],
)
def test_a_bad_value_is_refused_at_start_with_one_line(name: str, value: str, said: str) -> None:
    with pytest.raises(SettingsError) as refused:
        LLMSettings.from_env({name: value})
    assert str(refused.value).startswith(f"{name} must be") and said in str(refused.value)


def test_a_bad_secret_url_is_never_quoted_back() -> None:
    with pytest.raises(SettingsError) as refused:
        LLMSettings.from_env({"NOTIFY_SLACK_WEBHOOK_URL": "hooks.slack.example/services/T0/B0/secretpart"})
    assert "secretpart" not in str(refused.value) and "not shown" in str(refused.value)
    # The worker masks the environment's secrets in the line it prints: the URL's, not the words
    # `https://` of the line itself (it once printed "an http:// or *** URL").
    env = {"NOTIFY_SLACK_WEBHOOK_URL": "https://hooks.slack.example/services/T0/B0/secret part"}
    with pytest.raises(SettingsError) as refused:
        LLMSettings.from_env(env)
    line = Redactor(*secret_values(env)).text(str(refused.value))
    assert "an http:// or https:// URL with a host, and no blanks" in line and "secret" not in line, line


def test_an_email_setting_with_no_smtp_host_is_refused_at_start() -> None:
    """Before: the worker started, and no email was ever sent, with no word of why."""
    for name, value in (("NOTIFY_EMAIL_TO", "ops@example.com"), ("SMTP_USERNAME", "bot")):
        with pytest.raises(SettingsError, match=f"^{name} is set but SMTP_HOST is not: set SMTP_HOST"):
            LLMSettings.from_env({name: value})
    assert LLMSettings.from_env({"SMTP_HOST": "mail.example", "NOTIFY_EMAIL_TO": "ops@example.com"}).notify.email_to


async def test_a_receiver_s_answer_is_read_only_in_part_and_said_on_one_line() -> None:
    sent: list[int] = []

    async def huge() -> AsyncIterator[bytes]:
        for _ in range(1000):  # 8 MB, were it all read
            sent.append(1)
            yield b"line one\r\nline two " * 400

    transport = httpx.MockTransport(lambda request: httpx.Response(502, content=huge()))
    with pytest.raises(ApplicationError) as failed:
        await run(NotifyActivities(NotifySettings(webhook_url="https://h.example"), transport), wait())
    assert len(sent) < 5 and "\n" not in failed.value.message and len(failed.value.message) < 500
    assert failed.value.message.startswith("webhook answered HTTP 502: line one line two")


def test_the_link_lands_on_the_call_s_row_in_the_console_s_inbox() -> None:
    from durable_agent_runner.console.data import Waiting
    from durable_agent_runner.console.links import call_anchor, inbox_link
    from durable_agent_runner.console.views import call_row

    pending = t.PendingApproval(call_id="call_9", tool="send", arguments={"label": "x"}, since=SINCE, turn=2)
    row = call_row(Waiting("run-1", "mailer", pending), with_run=True)
    assert f'id="{call_anchor("run-1", "call_9")}"' in row
    assert inbox_link("https://c.example/", "run-1", "call_9").endswith("/inbox#" + call_anchor("run-1", "call_9"))


@pytest.mark.pure
def test_the_worker_says_its_channels_and_an_agent_email_with_no_smtp_host() -> None:
    """Before: an agent's `email_to` on a worker with no SMTP_HOST sent nothing, and nothing said so."""
    own = {"payments": t.NotifyOptions(email_to=["oncall@example.com"]), "plain": None}
    bare = NotifySettings().said(own)
    assert bare == [
        "notifications: none (NOTIFY_*, SMTP_*; agents may add their own)",
        "agent 'payments' has email_to, but SMTP_HOST is not set: its runs send no email",
    ]
    full = NotifySettings(webhook_url="https://hooks.example/in", smtp_host="mail.example", email_to=["a@example.com"])
    assert full.said(own) == ["notifications: webhook, email (NOTIFY_*, SMTP_*; agents may add their own)"]
