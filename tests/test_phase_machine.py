"""What status says a run does, when its search attributes are written (machine/progress.py) and who
hears of a wait for a person (machine/notify.py), without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from durable_agent_runner.machine import notify, progress, rules
from durable_agent_runner.machine.progress import COUNTERS_EVERY_SECONDS, Status
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def call(call_id: str, name: str, **args: object) -> t.ToolCall:
    return t.ToolCall(call_id=call_id, name=name, arguments=json.dumps(args))


def tools_running(turn: int = 2) -> RunState:
    s = RunState()
    s.agent = t.AgentSpec(name="a")
    s.turn, s.phase = turn, t.Phase.RUNNING_TOOLS
    return s


def test_status_names_each_call_by_what_it_does_and_not_one_that_waits():
    s, status = tools_running(), Status()
    assert status.doing(s, "c1", "checking", call("c1", "send", label="a")) == (
        "turn 2: checking whether send(label=a) needs approval"
    )
    said = status.doing(s, "c2", "running", call("c2", "lookup", q="b"))
    assert said == "turn 2: checking whether send(label=a) needs approval; running lookup(q=b)"
    assert status.doing(s, "c1", None, None) == "turn 2: running lookup(q=b)"
    s.phase = t.Phase.AWAITING_APPROVAL  # a wait for a person has its own words
    assert status.doing(s, "c3", "outside", call("c3", "sign")) is None


def test_a_wait_for_a_person_sets_the_phase_and_its_end_goes_back_to_running_tools():
    s, status = tools_running(), Status()
    s.approvals.request("c1", "send", {}, 2, NOW)
    assert status.waiting(s) == (t.Phase.AWAITING_APPROVAL, "turn 2: waiting for approval of send (c1)")
    s.phase = t.Phase.AWAITING_APPROVAL
    s.approvals.abandon()
    assert status.waiting(s) == (t.Phase.RUNNING_TOOLS, "turn 2: running approved tools")
    s.phase = t.Phase.RUNNING_TOOLS
    assert status.waiting(s) is None  # nothing waits, nothing changes


def test_sibling_waits_are_all_named_an_approval_a_doubt_and_an_outside_completion_at_once():
    """Calls of a turn wait at once: the words name each (until 1.4.8 a call in doubt or an
    outside completion beside one to approve went unsaid), and the phase is the person's wait's."""
    s, status = tools_running(), Status()
    s.approvals.request("c1", "send", {}, 2, NOW)
    s.doubts.mark(
        t.InDoubtCall(call_id="c2", tool="pay", arguments={}, turn=2, scheduled_at=NOW, ended_at=NOW, ended="timeout")
    )
    assert status.waiting(s) == (
        t.Phase.AWAITING_APPROVAL,
        "turn 2: waiting for approval of send (c1); in doubt, waiting for a person to resolve pay (c2)",
    )
    s.approvals.abandon()
    assert status.waiting(s) == (t.Phase.IN_DOUBT, "turn 2: in doubt, waiting for a person to resolve pay (c2)")
    s.outside.wait(t.PendingOutside(call_id="c3", tool="sign", turn=2, since=NOW, deadline=NOW), t.OutsideSpec())
    assert status.waiting(s) == (
        t.Phase.IN_DOUBT,
        "turn 2: in doubt, waiting for a person to resolve pay (c2); waiting for outside completion of sign (c3)",
    )


def test_search_attributes_are_written_on_a_filtered_change_and_the_counters_once_a_turn():
    s, status = tools_running(turn=1), Status()
    first = status.writes(s, t.Phase.STARTING)
    assert first is not None  # never written: the first turn's counters
    names = [u.key.name for u in first]
    assert names[:3] == ["AgentPhase", "AgentTurn", "AgentTotalTokens"]
    assert status.writes(s, t.Phase.CALLING_MODEL) is None  # the same turn, no filtered change
    s.phase = t.Phase.AWAITING_APPROVAL
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is not None  # a person filters on it
    s.turn, s.phase = 2, t.Phase.CALLING_MODEL
    status.clocked(t.ModelReply(message=t.AssistantMessage(content="x"), received_at=NOW))
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is None  # a new turn, but within the reply clock's bound
    later = NOW + timedelta(seconds=COUNTERS_EVERY_SECONDS)
    status.clocked(t.ModelReply(message=t.AssistantMessage(content="y"), received_at=later))
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is not None and status.searched_turn == 2
    status.due.append(t.SA_AGENT.value_set("billing"))  # the agent in charge changed: written next
    written = status.writes(s, t.Phase.RUNNING_TOOLS)
    assert written is not None and written[0].key.name == "AgentName" and status.due == []


# ------------------------------------------------------------------------------ notifications


def notifying(channels: list[str], escalate: bool, **own: object) -> t.AgentSpec:
    plan = t.NotifyPlan(channels=channels, escalate=escalate, attempts=3)  # type: ignore[arg-type]
    return t.AgentSpec(name="ops", notify_plan=plan, notify=t.NotifyOptions(**own) if own else None)


ABOUT = notify.About("approval", "approval-2-c1", 2, "send needs approval", "c1", "send", '{"to": "all"}', 60.0)


def test_a_wait_notifies_each_frozen_channel_once_under_one_key_and_escalates_under_its_own():
    agent = notifying(["webhook", "email"], True, webhook_url="https://hooks.example/x", email_to=["a@b.c"])
    assert notify.notifies(agent, ABOUT) and notify.escalates(agent, ABOUT) == 60.0
    first = notify.base(agent, ABOUT, "run-1", NOW)
    sends = notify.sends(agent, first)
    assert [(n.channel, n.url, n.email_to) for n in sends] == [
        ("webhook", "https://hooks.example/x", []),
        ("email", None, ["a@b.c"]),
    ]
    assert {n.idempotency_key for n in sends} == {notify.notify_key("run-1", "approval-2-c1")}
    up = notify.escalation(agent, first, ABOUT)
    assert up.escalation and up.idempotency_key == notify.notify_key("run-1", "approval-2-c1/escalation")
    assert first.arguments == '{"to": "all"}' and first.waiting_since == NOW


def test_a_run_that_names_no_channel_notifies_no_one_and_escalates_only_with_a_webhook():
    assert not notify.notifies(t.AgentSpec(name="quiet"), ABOUT)
    assert not notify.notifies(notifying([], False), ABOUT)
    only_up = notifying([], True)
    assert notify.notifies(only_up, ABOUT) and notify.sends(only_up, notify.base(only_up, ABOUT, "r", NOW)) == []
    assert not notify.notifies(only_up, notify.About("budget", "budget-1", 1, "spent"))  # no escalate_after


def test_the_story_of_a_round_says_what_went_in_one_line_and_each_failure_in_its_own():
    results: list[t.NotifyResult | str] = [
        t.NotifyResult(channel="webhook", sent="webhook (HTTP 200)"),
        "email: connection refused (gave up within 3 attempts)",
    ]
    assert notify.told(results, "escalated after 60s: ") == [
        (t.EventKind.NOTIFIED, "escalated after 60s: webhook (HTTP 200)"),
        (t.EventKind.NOTIFY_FAILED, "escalated after 60s: email: connection refused (gave up within 3 attempts)"),
    ]
    assert notify.told([], "") == []
    s = tools_running()
    notify.tell(s, ABOUT, results, "", NOW)  # as the workflow takes it: told by the wait's call
    assert [(e.kind, e.call_id, e.tool) for e in s.events] == [
        (t.EventKind.NOTIFIED, ABOUT.call_id, ABOUT.tool),
        (t.EventKind.NOTIFY_FAILED, ABOUT.call_id, ABOUT.tool),
    ]


def test_a_run_ends_failed_or_cancelled_as_the_machine_says_and_a_sessions_answer_fails_alone():
    s = tools_running()
    s.approvals.request("c1", "send", {}, 2, NOW)
    assert progress.failed(s, "boom", "ToolFailed", NOW) == t.Phase.RUNNING_TOOLS  # the phase before
    assert (s.phase, s.last_step, s.error_type) == (t.Phase.FAILED, "boom", "ToolFailed")
    assert s.events[-1].kind is t.EventKind.FAILED and s.events[-1].text == "boom"
    assert not s.approvals.pending  # nothing waits any more
    chat = tools_running()
    chat.session = SessionState()
    chat.session.accept(t.SessionMessage(text="hi", by="bob"), NOW, steer=False)
    chat.session.open(2, NOW, "exec-1")
    assert progress.failed(chat, "boom", "ToolFailed", NOW) is None  # that answer fails; the session goes on
    assert chat.phase is t.Phase.RUNNING_TOOLS and chat.error == "boom" and not chat.events
    quiet = tools_running()
    quiet.last_step = "turn 2: running lookup(q=a)"
    assert progress.cancelled(quiet, NOW) == t.Phase.RUNNING_TOOLS
    assert quiet.phase is t.Phase.CANCELLED and quiet.events[-1].text == "cancelled: turn 2: running lookup(q=a)"


def test_each_guardrail_verdict_is_told_in_order_and_the_first_that_trips_stops_the_run():
    s = tools_running()
    verdicts = [("polite", t.HookResult()), ("no_pii", t.HookResult(tripwire=True, info={"found": "ssn"}))]
    stop = rules.guardrails_ran(s, "output", verdicts, NOW)
    assert stop is not None and stop.error == "OutputGuardrailTripwireTriggered" and "no_pii" in stop.message
    told = [e.detail for e in s.events if e.kind is t.EventKind.GUARDRAIL]
    assert told == ["output guardrail polite: passed", "output guardrail no_pii: tripped"]
    assert rules.guardrails_ran(s, "input", [("polite", t.HookResult())], NOW) is None
