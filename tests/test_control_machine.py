"""A person's pause, resume (with a budget raise) and edit, as the machine checks and takes them
(machine/control.py), without a server: what is refused before anything is recorded, with which
error type, and what taking each does to the run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durable_agent_runner.machine import control
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import Pause
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

NOW = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


def running(step: str = "turn 2: calling the model") -> RunState:
    s = RunState()
    s.agent = t.AgentSpec(name="a", token_budget=1_000)
    s.messages = [t.UserMessage(content="hi")]
    s.phase, s.last_step = t.Phase.CALLING_MODEL, step
    return s


def refused(check, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DecisionRefused) as caught:
        check(*args)
    return caught.value.kind


def test_a_pause_request_is_kept_once_and_a_resume_before_it_is_taken_withdraws_it():
    s = running()
    control.check_pause(s)
    assert control.pause(s, t.PauseRequest(by="alice", reason="look")) == control.pause_requested(s.pause_request)  # type: ignore[arg-type]
    assert refused(control.check_pause, s) == "PauseAlreadyRequested"
    s.last_step = control.pause_requested(t.PauseRequest(by="alice"))  # status says so, and nothing since
    control.check_resume(s, None, t.ResumeRequest(by="bob"))
    done = control.resume(s, None, t.ResumeRequest(by="bob"), NOW)
    assert done.events == ((t.EventKind.RESUMED, "pause request withdrawn by bob"),)
    assert done.say == "turn 2: calling the model" and s.pause_request is None  # what it said before
    assert refused(control.check_resume, s, None, t.ResumeRequest()) == "NotPaused"


def test_a_withdrawn_request_leaves_status_alone_when_the_run_has_said_something_since():
    s = running()
    control.pause(s, t.PauseRequest(by="alice"))
    s.last_step = "turn 3: running lookup"
    assert control.resume(s, None, t.ResumeRequest(by="bob"), NOW).say is None


def test_a_paused_run_resumes_once_and_an_ended_or_paused_run_takes_no_pause():
    s = running()
    s.paused = t.PauseInfo(where="before_model", turn=2, why="pause by alice", at=NOW)
    assert refused(control.check_pause, s) == "AlreadyPaused"
    assert control.resume(s, None, t.ResumeRequest(by="bob"), NOW) == control.Resumed(())
    assert s.resumed_by == "bob"
    assert refused(control.check_resume, s, None, t.ResumeRequest(by="carol")) == "NotPaused"  # already resumed
    s.phase = t.Phase.COMPLETED
    assert refused(control.check_pause, s) == "RunEnded"


def test_a_run_paused_on_its_budget_goes_on_only_raised_and_within_its_kinds():
    s = running()
    ledger = Ledger.start(s.agent_now, None, child=False)
    s.paused = t.PauseInfo(where="before_model", turn=2, why="token budget spent", at=NOW, reason="budget")
    assert refused(control.check_resume, s, ledger, t.ResumeRequest(by="bob")) == "BudgetNotRaised"
    assert refused(control.check_resume, s, ledger, t.ResumeRequest(add_usd=1.0)) == "NoBudget"  # tokens only
    assert refused(control.check_resume, s, None, t.ResumeRequest(add_tokens=5)) == "NoBudget"
    raise_ = t.ResumeRequest(by="bob", add_tokens=500)
    control.check_resume(s, ledger, raise_)
    done = control.resume(s, ledger, raise_, NOW)
    assert done.events == ((t.EventKind.BUDGET_RAISED, "+500 tokens by bob"),) and s.resumed_by == "bob"
    assert ledger is not None and ledger.budget.tokens == 1_500


def test_a_session_waiting_for_a_message_takes_a_raise_alone_once_it_asked_the_patch():
    """session-raise-2.0.4: a session whose budget is spent failed every later message, and its
    raise was refused (not paused). A session started before the patch keeps the refusal."""
    s = running()
    s.session, s.phase = SessionState(), t.Phase.WAITING_FOR_MESSAGE
    ledger = Ledger(t.Budget(tokens=100), shared=True)
    raise_ = t.ResumeRequest(by="bob", add_tokens=500)
    assert refused(control.check_resume, s, ledger, raise_) == "NotPaused"  # recorded before the patch
    control.check_resume(s, ledger, raise_, True)
    done = control.resume(s, ledger, raise_, NOW)
    assert done == control.Resumed(((t.EventKind.BUDGET_RAISED, "+500 tokens by bob"),))  # nothing resumed
    assert ledger.budget.tokens == 600 and s.resumed_by is None and s.pause_request is None
    with pytest.raises(DecisionRefused, match=r"^the run is not paused: a session waiting for a message takes a"):
        control.check_resume(s, ledger, t.ResumeRequest(by="bob"), True)  # a raise, or nothing
    s.phase = t.Phase.CALLING_MODEL  # answering: a raise waits for the answer's end, or a pause
    with pytest.raises(DecisionRefused, match=r"^the run is not paused: a session answering a message takes a raise"):
        control.check_resume(s, ledger, raise_, True)


def test_a_child_run_is_raised_only_within_its_parents_grant():
    s = running()
    ledger = Ledger(t.Budget(tokens=300, ceiling_tokens=300), shared=True)  # a share its parent granted
    s.paused = t.PauseInfo(where="before_model", turn=1, why="spent", at=NOW)
    assert refused(control.check_resume, s, ledger, t.ResumeRequest(add_tokens=10**9)) == "BeyondParentGrant"


def test_an_edit_applies_to_a_paused_run_only_and_only_as_edits_takes_it():
    s = running()
    text = t.Edit(op="text", index=0, text="hello")
    assert refused(control.check_edit, s, text) == "NotPaused"
    s.paused = t.PauseInfo(where="before_model", turn=2, why="pause by alice", at=NOW)
    control.check_edit(s, text)
    assert refused(control.check_edit, s, t.Edit(op="text", index=99, text="x")) != "NotPaused"
    assert s.messages[0].content == "hi"  # checked on a copy: nothing changed


def test_a_pause_holds_the_run_until_resumed_and_says_where_it_goes_on():
    s = running()
    s.pause_request = t.PauseRequest(by="alice")
    step = Pause(where="before_tools", turn=3, why="pause by alice")
    holding = control.paused(s, step, NOW)
    assert holding == control.Holding(
        "before the tool calls of turn 3", "paused before the tool calls of turn 3: pause by alice"
    )
    assert s.pause_request is None and s.paused is not None and s.paused.at == NOW  # the request is used up
    s.resumed_by = "bob"
    assert control.went_on(s, step) == ("by bob", t.Phase.RUNNING_TOOLS, "resumed by bob") and s.paused is None
    control.paused(s, Pause(where="before_model", turn=4, why="budget", reason="budget"), NOW)
    assert s.resumed_by is None and s.paused is not None and s.paused.reason == "budget"
    message = control.gave_up(s, control.Holding("before model call 4", "…"))
    assert message == "paused before model call 4 for 30 days without a resume (fork it to go on)" and s.paused is None


def test_a_breakpoint_functions_edits_are_taken_in_order_until_one_is_refused():
    s = running()
    s.messages.append(t.UserMessage(content="second"))
    good = t.Edit(op="text", index=1, text="2nd")
    bad = t.Edit(op="drop", index=42)
    later = t.Edit(op="text", index=0, text="never")
    taken, why = control.breakpoint_ended(s, "redact", t.HookResult(edits=[good, bad, later]), NOW)
    assert [r.edit.by for r in taken] == ["breakpoint function redact"] and len(s.edits) == 1
    assert [m.content for m in s.messages] == ["hi", "2nd"]  # the refused edit and the one after it: none
    assert why is not None and why.startswith("breakpoint function redact: its edit was refused: ")
    assert control.breakpoint_ended(s, "look", t.HookResult(pause=""), NOW) == ([], "breakpoint function look: pause")
    assert control.breakpoint_ended(s, "look", t.HookResult(), NOW) == ([], None)


def test_what_reaches_the_door_is_recorded_said_and_told_by_the_machine_alone():
    """The handlers and the pure driver take each of these through the same rule: the record, what
    status says, and the story's event are the machine's (workflows/handlers.py writes no words)."""
    s = running()
    s.approvals.request("c1", "send", {"to": "ops"}, 2, NOW)
    record = control.decision(s, t.ApprovalDecision(call_id="c1", approve=True, by="alice"), NOW)
    assert record.approved and s.approvals.decided("c1") == record
    record_words = s.last_step
    assert record_words == "turn 0: send c1 approved by alice"
    s.session = SessionState()
    s.agent = t.AgentSpec(name="a", mid_turn="steer")
    opening = control.message(s, t.SessionMessage(text="hello", by="bob"), NOW, opening=True)
    queued = control.message(s, t.SessionMessage(text="more", by="bob", message_id="m2"), NOW)
    again = control.message(s, t.SessionMessage(text="more", by="bob", message_id="m2"), NOW)
    assert not opening.steer and again.duplicate
    assert (queued.queued, queued.steer) == (1, False)  # nothing is being answered: it waits its turn
    told = [e.detail for e in s.events if e.kind is t.EventKind.MESSAGE]
    assert told == ["message 1 from bob", "message 2 from bob · 1 ahead"]  # the repeat counted once
    said = control.pause(s, t.PauseRequest(by="carol"))
    assert s.last_step == said == control.pause_requested(t.PauseRequest(by="carol"))
    control.resume(s, None, t.ResumeRequest(by="dave"), NOW)
    assert s.events[-1].kind is t.EventKind.RESUMED and s.events[-1].detail == "pause request withdrawn by dave"
    assert s.last_step == record_words  # what it said before the request, said again
    s.paused = t.PauseInfo(where="before_model", turn=2, why="pause by carol", at=NOW)
    control.take_edit(s, t.Edit(op="text", index=0, text="hi there"), NOW)
    assert s.events[-1].kind is t.EventKind.EDITED and s.messages[0].content == "hi there"


def test_a_withdrawn_request_leaves_status_naming_the_wait_for_a_person_without_it():
    """Seen on 2.0.0: a run waiting for approval, asked to pause and then resumed, still said
    "pause requested by alice" (status, the console) until the approval came."""
    s = running()
    s.turn = 3
    s.approvals.request("call_3_0", "send_report", {}, 3, NOW)
    s.last_step = "turn 3: waiting for approval of send_report (call_3_0)"
    said = control.pause(s, t.PauseRequest(by="alice", reason="look"))
    assert said.startswith("turn 3: waiting for approval of send_report (call_3_0); pause requested by alice")
    done = control.resume(s, None, t.ResumeRequest(by="bob"), NOW)
    assert done.say == s.last_step == "turn 3: waiting for approval of send_report (call_3_0)"


def test_a_pause_request_stays_said_until_it_is_taken_or_withdrawn_though_a_call_moves_on():
    """A sibling call's progress said after the request (`turn 3: running lookup(q=b)`) used to
    drop the request from status and the Web UI, though the run would still pause."""
    s = running()
    control.pause(s, t.PauseRequest(by="alice"))
    s.last_step = "turn 3: running lookup(q=b)"  # a call's progress, said since
    assert s.step_words() == f"turn 3: running lookup(q=b); {control.pause_requested(t.PauseRequest(by='alice'))}"
    assert s.status("r").last_step == s.step_words() and s.step_words() in s.details()
    control.paused(s, Pause(where="before_model", turn=4, why="paused by alice"), NOW)
    s.last_step = "paused before model call 4: paused by alice"
    assert s.step_words() == s.last_step  # taken: the pause says it
    fresh = running()
    control.pause(fresh, t.PauseRequest(by="alice"))
    assert fresh.step_words() == fresh.last_step == control.pause_requested(t.PauseRequest(by="alice"))  # said once
    control.resume(fresh, None, t.ResumeRequest(by="bob"), NOW)
    assert fresh.step_words() == "turn 2: calling the model"  # withdrawn


def test_a_call_waiting_in_one_book_is_named_with_its_verb_for_a_refusal_in_another():
    s = running()
    s.approvals.request("call_3_0", "send", {"to": "a@b.c"}, 3, NOW)
    assert control.waits_as(s, "call_3_0") == "call call_3_0 waits for approval: approve or reject it"
    assert control.waits_as(s, "call_3_0", besides=s.questions) == control.waits_as(s, "call_3_0")
    assert control.waits_as(s, "call_3_0", besides=s.approvals) == ""  # its own book's refusal says it already
    assert control.waits_as(s, "call_9_9") == ""
