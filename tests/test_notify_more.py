"""More of notifications (docs/notifications.md), beside tests/test_notify.py: a tool's own
`escalate_after` wins over its agent's; an `ask_person` question notifies, naming the question and
linking to the inbox; `watch` prints each notification on a line of its own; the checked-in
escalation history (tests/record_notify_escalate_history.py) holds its timer and its send; the
worker's webhook URLs are masked by their credential part, without masking every `https://`."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from durable_agent_runner import Agent, NotifyOptions, Registry, ask_person, tool
from durable_agent_runner.cli.watch import Printer, watch
from durable_agent_runner.client import AgentClient
from durable_agent_runner.config.connection import make_data_converter
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.console.links import inbox_link
from durable_agent_runner.machine.notify import notify_key
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, event, replay, script, start
from tests.notify_receivers import Receiver
from tests.test_approvals import decide, pending, update
from tests.test_ask_person import DAYS, question
from tests.test_notify import CONSOLE, SECRET, notify_settings, until, until_event

ESCALATE_HISTORY = Path(__file__).parent / "histories" / "notify_escalate_1_4.json"


@tool(escalate_after=2)
def wire(label: str) -> str:
    """A side effect whose calls escalate sooner than its agent's other waits.

    Args:
        label: What to wire.
    """
    return f"wired {label}"


async def test_a_tool_s_own_escalate_after_wins_over_its_agent_s(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("wire", {"label": "rent"})), {"content": "wired"})
    agent = Agent(name="hurried", tools=[wire], approvals={"wire": "always"}, notify=NotifyOptions(escalate_after=60))
    with Receiver(SECRET) as boss:
        settings = notify_settings(llm, escalate_webhook_url=boss.url)
        async with worker_factory(settings=settings, registry=Registry(agents=[agent])):
            handle = await start(client, task_queue, "wire it", agent="hurried", model=model)
            (waiting,) = await pending(handle)
            await until(lambda: bool(boss.requests), timeout=30, what="the escalation, after the tool's 2 s")
            (escalated,) = await until_event(handle, t.EventKind.NOTIFIED)
            await update(handle, decide(waiting.call_id, by="kim"))
            result = await handle.result()
            await replay(handle)
    assert result.output == "wired"
    (request,) = boss.requests
    body = request["json"]
    waited = request["at"] - datetime.fromisoformat(body["waiting_since"])
    assert timedelta(seconds=2) <= waited < timedelta(seconds=30)  # the tool's 2 s, not the agent's 60
    assert body["escalation"] is True and body["tool"] == "wire" and body["call_id"] == waiting.call_id
    assert escalated.detail == "escalated after 2s: escalation webhook (HTTP 200)"


async def test_an_ask_person_question_notifies_with_the_question_and_its_inbox_link(
    client, task_queue, worker_factory, llm
):
    model = script(llm, calls(("ask_person", DAYS)), {"content": "Booked for Friday."})
    agent = Agent(name="asker_n", instructions="Ask.", tools=[ask_person.with_options(timeout_seconds=600)])
    with Receiver(SECRET) as hook:
        async with worker_factory(
            settings=notify_settings(llm, webhook_url=hook.url), registry=Registry(agents=[agent])
        ):
            handle = await start(client, task_queue, "Book the offsite", agent="asker_n", model=model)
            asked = await question(handle)
            (notified,) = await until_event(handle, t.EventKind.NOTIFIED)
            run = AgentClient(client).get(handle.id)
            await run.answer_question(asked.call_id, choice=3, by="lee")
            result = await handle.result()
            out = io.StringIO()
            code = await watch(AgentClient(client), handle.id, out=out)  # the finished run's story, as printed
            await replay(handle)
    assert result.output == "Booked for Friday."
    (request,) = hook.requests
    body = request["json"]
    assert request["signed"] and body["kind"] == "question" and body["escalation"] is False
    assert body["call_id"] == asked.call_id and body["tool"] == "ask_person" and body["agent"] == "asker_n"
    assert body["why"] == "waiting for an answer to: Which day suits the team?"
    assert "Which day suits the team?" in body["arguments"] and "Tuesday" in body["arguments"]
    assert body["console_url"] == inbox_link(CONSOLE, handle.id, asked.call_id)
    assert request["key"] == notify_key(handle.id, f"question-1-{asked.call_id}")
    assert "asker_n asks a person a question" in body["text"]
    assert notified.call_id == asked.call_id and notified.detail == "webhook (HTTP 200)"
    assert code == 0 and "  ✉ notified: webhook (HTTP 200)\n" in out.getvalue()
    assert "· notified" not in out.getvalue()  # its own line, not the catch-all of kinds newer than watch


def story_line(kind: t.EventKind, detail: str) -> str:
    out = io.StringIO()
    ev = event(kind, seq=4, call_id="call_1", tool="send", detail=detail)
    Printer("run-1", as_json=False, out=out).event(ev)
    return out.getvalue()


@pytest.mark.pure
def test_watch_prints_each_notification_on_its_own_line():
    went = story_line(t.EventKind.NOTIFIED, "webhook (HTTP 200), email to 1 recipient")
    assert went == "  ✉ notified: webhook (HTTP 200), email to 1 recipient\n"
    escalated = story_line(t.EventKind.NOTIFIED, "escalated after 3600s: escalation webhook (HTTP 200)")
    assert escalated == "  ✉ notified: escalated after 3600s: escalation webhook (HTTP 200)\n"
    failed = story_line(t.EventKind.NOTIFY_FAILED, "slack: slack answered HTTP 404 (gave up within 5 attempts)")
    assert (
        failed == "  ✉ notify failed: slack: slack answered HTTP 404 (gave up within 5 attempts); the run still waits\n"
    )


@pytest.mark.pure
def test_the_docs_show_the_notification_lines_watch_prints():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "notifications.md").read_text()
    for kind, detail in [
        (t.EventKind.NOTIFIED, "webhook (HTTP 200), email to 1 recipient"),
        (t.EventKind.NOTIFIED, "escalated after 3600s: escalation webhook (HTTP 200)"),
        (t.EventKind.NOTIFY_FAILED, "slack: slack answered HTTP 404: no_service (gave up within 5 attempts)"),
    ]:
        assert story_line(kind, detail) in docs


@pytest.mark.pure
def test_the_checked_in_escalation_history_holds_its_timer_and_its_send():
    """tests/test_workflow.py replays every file of tests/histories; this one must stay an escalation."""
    history = WorkflowHistory.from_json("notify_escalate_1_4", ESCALATE_HISTORY.read_text())
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_TIMER_FIRED in kinds  # the escalation's timer ran out before the decision
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == t.NOTIFY_ACTIVITY
    ]
    convert = make_data_converter({}).payload_converter  # the project's converter, as every client's
    sends = [convert.from_payload(a.input.payloads[0], t.NotifyInput) for a in scheduled]
    assert [(n.channel, n.escalation, n.kind, n.tool) for n in sends] == [
        ("webhook", False, "approval", "send"),
        ("webhook", True, "approval", "send"),
    ]
    escalation = sends[1]
    assert escalation.url is None  # the worker's escalation URL: no address in history
    assert escalation.idempotency_key == notify_key(history.workflow_id, f"approval-1-{escalation.call_id}/escalation")
    assert [a.activity_id.rsplit("-", 1)[1] for a in scheduled] == ["webhook", "escalation"]
    events = list(history.events)
    decided = next(i for i, e in enumerate(events) if e.HasField("workflow_execution_update_accepted_event_attributes"))
    assert kinds.index(EventType.EVENT_TYPE_TIMER_FIRED) < decided  # escalated, then decided
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


@pytest.mark.pure
def test_the_worker_s_webhook_urls_are_masked_by_their_credential_part():
    slack = "https://hooks.slack.example/services/T0A1B2C3/B0D4E5F6/q8Zr2LkW9vXy3MnB7cTd4Hs1"
    hook = "https://hooks.example/in/wh_7Gk2Qx9Lm4Rt8Vz1"
    boss = "https://chat.example/hooks/esc?token=Pq3Ws8Ed5Rf1Tg6Y"
    env = {"NOTIFY_SLACK_WEBHOOK_URL": slack, "NOTIFY_WEBHOOK_URL": hook, "NOTIFY_ESCALATE_WEBHOOK_URL": boss}
    redactor = Redactor.for_settings(LLMSettings.from_env(env))
    masked = redactor.text(f"posting to {hook}, {boss} and {slack} failed")
    for secret in ("q8Zr2LkW9vXy3MnB7cTd4Hs1", "wh_7Gk2Qx9Lm4Rt8Vz1", "Pq3Ws8Ed5Rf1Tg6Y"):
        assert secret not in masked and secret[:8] not in masked, masked
    # a URL's scheme and host are no secret: a tool's result that names another site stays readable
    assert redactor.text("see https://docs.example/services and hooks.example") == (
        "see https://docs.example/services and hooks.example"
    )
    # nor is a path that ends in words: their pieces would be masked in every result
    worded = Redactor.for_settings(
        LLMSettings.from_env({"NOTIFY_WEBHOOK_URL": "https://ops.example/hooks/notifications"})
    )
    assert worded.text("two notifications sent") == "two notifications sent"
