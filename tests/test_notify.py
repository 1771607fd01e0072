"""Notifications that reach people (docs/notifications.md), on the dev server with real receivers:
a waiting approval sends one signed webhook and one email, with the same key across a worker
killed mid-send; escalation after its durable timer; a receiver that always fails is a story
event and never the run's failure; a run with no channel schedules nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import datetime, timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner import Agent, NotifyOptions, Registry
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.config.notify import NotifySettings
from durable_agent_runner.console.links import inbox_link, run_link
from durable_agent_runner.machine.notify import notify_key
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import NOTIFY_PATCH, RELEASE_2_PATCH
from tests.budget_runs import pausing_agent
from tests.fixtures.agents import send
from tests.fixtures.once_agents import hasty_pay
from tests.helpers import calls, replay, script, start
from tests.notify_receivers import Receiver, SmtpSink
from tests.test_approvals import decide, pending, update
from tests.test_durability import start_worker_process

HISTORIES = Path(__file__).parent / "histories"
SECRET = "whsec-4f1c9e7a2b8d3605"
CONSOLE = "http://console.example:8237"


def guarded(**options) -> Registry:
    return Registry(agents=[Agent(name="notified", tools=[send], approvals={"send": "always"}, **options)])


def notify_settings(llm, **fields) -> LLMSettings:
    notify = NotifySettings(webhook_secret=SECRET, console_url=CONSOLE, **fields)
    return LLMSettings(base_url=llm.base_url, model="demo", notify=notify)


async def story(handle) -> list[t.RunEvent]:
    page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
    return page.events


# A query that reaches a run whose worker was just killed can end unanswered while the server
# moves its tasks to the next worker; the reader asks again within its bound, as client.py's do.
PASSING = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)


async def until_event(handle, kind: t.EventKind, count: int = 1, timeout: float = 30.0) -> list[t.RunEvent]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = [e for e in await story(handle) if e.kind == kind]
        except RPCError as err:
            if err.status not in PASSING or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
            continue
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"no {kind} event: {[(e.kind, e.detail) for e in await story(handle)]}"
        await asyncio.sleep(0.1)


async def until(check, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def notify_activities(history) -> list[str]:
    """The activity ids of the notification activities the run scheduled."""
    return [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == t.NOTIFY_ACTIVITY
    ]


async def test_a_waiting_approval_sends_one_signed_webhook_and_one_email(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "quarterly report"})), {"content": "sent it"})
    with Receiver(SECRET) as hook, SmtpSink() as smtp:
        settings = notify_settings(
            llm, webhook_url=hook.url, smtp_host="127.0.0.1", smtp_port=smtp.port, email_to=["ops@example.com"]
        )
        async with worker_factory(settings=settings, registry=guarded()):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            (notified,) = await until_event(handle, t.EventKind.NOTIFIED)
            await update(handle, decide(waiting.call_id, by="alice"))
            result = await handle.result()
            history = await handle.fetch_history()
            await replay(handle)
    assert result.output == "sent it"
    assert "webhook (HTTP 200)" in notified.detail and "email to 1 recipient" in notified.detail
    assert notified.call_id == waiting.call_id and notified.tool == "send"
    key = notify_key(handle.id, f"approval-1-{waiting.call_id}")
    # the webhook: one request, signed over its raw body, its key in the header and the body
    (request,) = hook.requests
    assert request["signed"] and request["key"] == key and hook.acted == [key]
    body = request["json"]
    assert body["kind"] == "approval" and body["run_id"] == handle.id and body["call_id"] == waiting.call_id
    assert body["tool"] == "send" and "quarterly report" in body["arguments"] and body["agent"] == "notified"
    assert body["turn"] == 1 and body["idempotency_key"] == key and body["escalation"] is False
    assert body["console_url"] == inbox_link(CONSOLE, handle.id, waiting.call_id)
    assert f"#call-{handle.id}/{waiting.call_id}" in body["console_url"]  # the inbox row's id (console/views.py)
    # the email: one, its Message-ID derived from the same key, the link in its text
    (mail,) = smtp.messages
    assert mail["Message-ID"] == f"<{key}@localhost>" and mail["To"] == "ops@example.com"
    assert "notified waits for approval of send" in mail["Subject"]
    text = mail.get_content()
    assert inbox_link(CONSOLE, handle.id, waiting.call_id) in text and "quarterly report" in text
    assert smtp.envelopes == [("durable-agent-runner@localhost", ["ops@example.com"])]
    # once per channel, on 2.0's path (the release's marker, no 1.x marker); the secret never reaches history
    assert sorted(notify_activities(history)) == [
        f"notify-approval-1-{waiting.call_id}-email",
        f"notify-approval-1-{waiting.call_id}-webhook",
    ]
    assert NOTIFY_PATCH.encode() not in b"".join(e.SerializeToString() for e in history.events)
    assert RELEASE_2_PATCH.encode() in b"".join(e.SerializeToString() for e in history.events)
    assert SECRET not in history.to_json()
    if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
        (HISTORIES / "notify_2_0.json").write_text(history.to_json())


async def test_a_worker_killed_mid_send_leaves_one_delivery_per_key_and_the_wait_escalates(
    client, task_queue, worker_factory, llm
):
    """Issue 35's test in one run: a waiting approval sends one notification to a webhook receiver
    and one email to the SMTP server, with the same key across a worker kill, and escalates after
    its timer. The receiver holds the first webhook while its worker stops (that worker never hears
    the answer); the next worker sends it again with the same key, and the receiver acts once."""
    model = script(llm, calls(("send", {"label": "invoice"})), {"content": "sent"})
    with Receiver(SECRET, stall_first=6.0) as hook, Receiver(SECRET) as boss, SmtpSink() as smtp:
        settings = notify_settings(
            llm,
            webhook_url=hook.url,
            escalate_webhook_url=boss.url,
            smtp_host="127.0.0.1",
            smtp_port=smtp.port,
            email_to=["ops@example.com"],
        )
        registry = guarded(notify=NotifyOptions(escalate_after=3))
        async with worker_factory(settings=settings, registry=registry, graceful_shutdown_timeout=timedelta(seconds=1)):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            await until(lambda: len(hook.requests) >= 1, what="the first webhook")
            await until(lambda: len(smtp.messages) >= 1, what="the email")
        # that worker is gone, its webhook unanswered; another takes the retry (and the timer)
        async with worker_factory(settings=settings, registry=registry):
            notified = await until_event(handle, t.EventKind.NOTIFIED, count=2, timeout=60)
            await update(handle, decide(waiting.call_id, by="bob"))
            result = await handle.result()
            await replay(handle)
    assert result.output == "sent"
    key = notify_key(handle.id, f"approval-1-{waiting.call_id}")
    assert len(hook.requests) >= 2, "the webhook was sent again after the worker stopped"
    assert {r["key"] for r in hook.requests} == {key} and all(r["signed"] for r in hook.requests)
    assert hook.acted == [key]  # once, from the receiver's point of view
    assert {m["Message-ID"] for m in smtp.messages} == {f"<{key}@localhost>"}
    assert sorted(e.detail for e in notified) == [
        "escalated after 3s: escalation webhook (HTTP 200)",
        "webhook (HTTP 200), email to 1 recipient",
    ]
    (escalation,) = boss.requests
    assert escalation["signed"] and escalation["json"]["escalation"] is True
    assert boss.acted == [notify_key(handle.id, f"approval-1-{waiting.call_id}/escalation")]


async def test_a_wait_nobody_decides_escalates_after_its_timer(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "payroll"})), {"content": "sent"})
    with Receiver(SECRET) as hook, Receiver(SECRET) as boss:
        settings = notify_settings(llm, webhook_url=hook.url, escalate_webhook_url=boss.url)
        async with worker_factory(settings=settings, registry=guarded(notify=NotifyOptions(escalate_after=2))):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            await until(lambda: bool(boss.requests), timeout=30, what="the escalation")
            (escalated,) = [e for e in await until_event(handle, t.EventKind.NOTIFIED, 2) if "escalated" in e.detail]
            await update(handle, decide(waiting.call_id, by="carol"))
            result = await handle.result()
            await replay(handle)
    assert result.output == "sent"
    (request,) = boss.requests
    body = request["json"]
    waited = request["at"] - datetime.fromisoformat(body["waiting_since"])
    assert waited >= timedelta(seconds=2)  # its timer, from the wait's start (one clock: this machine's)
    assert request["signed"] and body["escalation"] is True and body["kind"] == "approval"
    assert body["call_id"] == waiting.call_id and body["text"].startswith("Escalated: notified waits for approval")
    assert request["key"] == notify_key(handle.id, f"approval-1-{waiting.call_id}/escalation")
    assert len(hook.requests) == 1 and hook.requests[0]["json"]["escalation"] is False
    assert escalated.detail == "escalated after 2s: escalation webhook (HTTP 200)"


async def test_a_wait_decided_in_time_does_not_escalate(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "memo"})), {"content": "sent"})
    with Receiver(SECRET) as boss:
        settings = notify_settings(llm, escalate_webhook_url=boss.url)
        async with worker_factory(settings=settings, registry=guarded(notify=NotifyOptions(escalate_after=3))):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            await update(handle, decide(waiting.call_id, by="dan"))
            result = await handle.result()
            await asyncio.sleep(4)  # past the timer, had it been left running
            history = await handle.fetch_history()
            await replay(handle)
    assert result.output == "sent" and boss.requests == []
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_TIMER_CANCELED in kinds  # the escalation's timer, called off by the decision
    assert notify_activities(history) == []


async def test_a_receiver_that_always_fails_is_in_the_story_and_the_run_goes_on(
    client, task_queue, worker_factory, llm
):
    model = script(llm, calls(("send", {"label": "weekly"})), {"content": "sent anyway"})
    with Receiver(SECRET, status=500) as hook:
        settings = notify_settings(llm, webhook_url=hook.url, max_attempts=2)
        async with worker_factory(settings=settings, registry=guarded()):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            (failed,) = await until_event(handle, t.EventKind.NOTIFY_FAILED)
            s = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
            assert s.status == "awaiting_approval"  # still waiting for its person
            await update(handle, decide(waiting.call_id, by="erin"))
            result = await handle.result()
            events = await story(handle)
            await replay(handle)
    assert result.output == "sent anyway"
    assert failed.detail.startswith("webhook: webhook answered HTTP 500") and "2 attempts" in failed.detail
    assert failed.call_id == waiting.call_id
    assert len(hook.requests) == 2 and hook.acted == []  # its retry bound, then never again
    assert not [e for e in events if e.kind == t.EventKind.NOTIFIED]


async def test_a_run_with_no_channel_schedules_nothing(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "quiet"})), {"content": "sent"})
    async with worker_factory(registry=guarded(notify=NotifyOptions(escalate_after=1))):  # no channel anywhere
        handle = await start(client, task_queue, "send it", agent="notified", model=model)
        (waiting,) = await pending(handle)
        await asyncio.sleep(1.5)
        await update(handle, decide(waiting.call_id, by="fay"))
        await handle.result()
        history = await handle.fetch_history()
        events = await story(handle)
    assert notify_activities(history) == []
    assert NOTIFY_PATCH.encode() not in b"".join(e.SerializeToString() for e in history.events)
    assert not any(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in history.events)
    assert not [e for e in events if e.kind in (t.EventKind.NOTIFIED, t.EventKind.NOTIFY_FAILED)]


async def test_a_budget_pause_notifies_with_a_link_to_the_run(client, task_queue, worker_factory, llm):
    with Receiver(SECRET) as hook:
        settings = notify_settings(llm, webhook_url=hook.url)
        async with worker_factory(settings=settings, registry=pausing_agent(llm)):
            handle = await start(client, task_queue, "Explain tides", agent="careful")
            (notified,) = await until_event(handle, t.EventKind.NOTIFIED)
            await handle.execute_update(
                t.RESUME_UPDATE, t.ResumeRequest(by="ann", add_tokens=1_000), result_type=t.RunStatus
            )
            result = await handle.result()
            await replay(handle)
    assert result.output == "Tides follow the moon."
    (request,) = hook.requests
    body = request["json"]
    assert body["kind"] == "budget" and body["call_id"] is None and "token budget spent" in body["why"]
    assert body["console_url"] == run_link(CONSOLE, handle.id)
    assert notified.detail == "webhook (HTTP 200)"


async def test_a_call_in_doubt_notifies_once_for_that_doubt(client, task_queue, worker_factory, llm):
    label = f"gus-{time.monotonic_ns()}"  # hasty_pay outlives its bound once per label: the call is in doubt
    model = script(llm, calls(("hasty_pay", {"label": label})), {"content": "settled"})
    with Receiver(SECRET) as hook:
        settings = notify_settings(llm, webhook_url=hook.url)
        async with worker_factory(
            settings=settings, registry=Registry(agents=[Agent(name="payer_n", tools=[hasty_pay])])
        ):
            handle = await start(client, task_queue, "pay gus", agent="payer_n", model=model)
            (notified,) = await until_event(handle, t.EventKind.NOTIFIED)
            resolve = t.ResolveCall(call_id=notified.call_id, action="fail", reason="paid by hand", by="hana")
            await handle.execute_update(t.RESOLVE_UPDATE, resolve, result_type=t.ResolveReceipt)
            result = await handle.result()
            await replay(handle)
    assert result.output == "settled"
    (request,) = hook.requests
    body = request["json"]
    assert body["kind"] == "doubt" and body["tool"] == "hasty_pay" and "ended without a result" in body["why"]
    assert request["key"] == notify_key(handle.id, f"doubt-1-{notified.call_id}-1")
    assert "is in doubt and waits for a person" in body["text"]


async def test_the_approval_timeout_still_decides_while_a_notification_is_in_flight(
    client, task_queue, worker_factory, llm
):
    """The wait decides alone: its timeout rejects the call as before, with the webhook still held by
    its receiver, and the notification in flight is called off with the wait."""
    model = script(llm, calls(("send", {"label": "late"})), {"content": "it was rejected"})
    with Receiver(SECRET, stall_first=8.0) as hook:
        settings = notify_settings(llm, webhook_url=hook.url)
        registry = guarded(approval_timeout_seconds=1.5, approval_timeout_reason="nobody answered")
        async with worker_factory(settings=settings, registry=registry):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            result = await asyncio.wait_for(handle.result(), 30)
            events = await story(handle)
            history = await handle.fetch_history()
            await replay(handle)
    assert result.output == "it was rejected"
    (decided,) = [e for e in events if e.kind == t.EventKind.APPROVAL_DECIDED]
    assert "nobody answered" in decided.detail
    assert len(hook.requests) <= 1  # never again once the wait was over (its retry called off)
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
    assert not [e for e in events if e.kind in (t.EventKind.NOTIFIED, t.EventKind.NOTIFY_FAILED)]


async def test_a_sigkilled_worker_process_read_from_its_environment_resends_with_the_same_key(
    client, temporal_server, task_queue, llm, tmp_path, monkeypatch
):
    """`python worker.py` with NOTIFY_* in its environment, SIGKILLed while the receiver holds the
    webhook: the heartbeat stops, the next worker sends it again with the same key and signature."""
    model = script(llm, calls(("send", {"label": "ledger"})), {"content": "sent"})
    log = tmp_path / "worker.log"
    with Receiver(SECRET, stall_first=20.0) as hook:
        for name, value in {
            "NOTIFY_WEBHOOK_URL": hook.url,
            "NOTIFY_WEBHOOK_SECRET": SECRET,
            "NOTIFY_CONSOLE_URL": CONSOLE,
        }.items():
            monkeypatch.setenv(name, value)
        first = start_worker_process(temporal_server, llm, task_queue, log)
        try:
            handle = await start(client, task_queue, "send it", agent="guarded", model=model)
            await until(lambda: len(hook.requests) >= 1, what="the first webhook")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(30)
        second = start_worker_process(temporal_server, llm, task_queue, log)
        try:
            (notified,) = await until_event(handle, t.EventKind.NOTIFIED, timeout=60)
            (waiting,) = await pending(handle)
            await update(handle, decide(waiting.call_id, by="ivy"))
            result = await asyncio.wait_for(handle.result(), 30)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    assert result.output == "sent" and notified.detail == "webhook (HTTP 200)"
    key = notify_key(handle.id, f"approval-1-{waiting.call_id}")
    assert len(hook.requests) == 2 and {r["key"] for r in hook.requests} == {key}
    assert all(r["signed"] for r in hook.requests) and hook.acted == [key]
    assert hook.requests[0]["json"]["console_url"] == inbox_link(CONSOLE, handle.id, waiting.call_id)
    assert SECRET not in log.read_text()


async def test_an_agent_s_own_webhook_is_told_where_the_worker_has_none(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "own"})), {"content": "sent"})
    with Receiver(SECRET) as own:
        settings = notify_settings(llm)  # the worker signs, but names no webhook of its own
        async with worker_factory(settings=settings, registry=guarded(notify=NotifyOptions(webhook_url=own.url))):
            handle = await start(client, task_queue, "send it", agent="notified", model=model)
            (waiting,) = await pending(handle)
            await until_event(handle, t.EventKind.NOTIFIED)
            await update(handle, decide(waiting.call_id, by="jo"))
            await handle.result()
    (request,) = own.requests
    assert request["signed"] and request["json"]["call_id"] == waiting.call_id
