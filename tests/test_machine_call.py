"""One tool call's whole life through the pure machine (machine/call.py), with no server: approval,
rejection, edits, timeouts, a once call in doubt and its resolutions, a child run, and that no
transition changes the record it was given."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.machine import call as m
from durable_agent_runner.machine import drafts as books
from durable_agent_runner.machine.approvals import approval_record
from durable_agent_runner.machine.calls import plan_calls
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.types import (
    AgentSpec,
    ApprovalDecision,
    ApprovalRecord,
    CallResolution,
    HookResult,
    ResolveCall,
    ToolCall,
    ToolResult,
    ToolSpec,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
AGENT = AgentSpec(
    name="ops",
    tools=[
        ToolSpec(name="lookup"),
        ToolSpec(name="send_report", approval="always"),
        ToolSpec(name="pay", approval="always", once=True),
        ToolSpec(name="charge", once=True),
        ToolSpec(name="research", agent="researcher"),
    ],
)


def ctx(agent: AgentSpec = AGENT, **always: ApprovalRecord) -> m.Ctx:
    return m.Ctx(agent=agent, now=NOW, run_id="run-1", always=always)


def begin(name: str, arguments: str = '{"to": "ops@example.com"}', c: m.Ctx | None = None) -> m.Transition:
    c = c or ctx()
    planned = plan_calls(c.agent, [ToolCall(call_id="call_1_0", name=name, arguments=arguments)], c.always).calls[0]
    return m.start(planned, 1, c)


def decided(decision: ApprovalDecision, tool: str = "send_report") -> m.Decided:
    """A decision as the door records it (the update's handler)."""
    return m.Decided(record=approval_record(decision, tool, NOW))


def resolved(r: ResolveCall, doubt: int = 1, tool: str = "charge") -> m.Resolved:
    record = CallResolution(
        call_id=r.call_id, tool=tool, action=r.action, by=r.by, at=NOW, doubt=doubt, result=r.result, reason=r.reason
    )
    return m.Resolved(record=record)


def kinds(t: m.Transition) -> list[str]:
    return [n.kind for n in t.notes]


def test_a_call_that_needs_no_person_runs_at_once_and_its_result_is_the_message():
    t = begin("lookup")
    assert t.call.stage is m.Stage.RUNNING and kinds(t) == ["tool_started"]
    (run,) = t.steps
    assert isinstance(run, m.RunTool) and run.how == "activity" and run.activity_id == "tool-1-call_1_0"
    done = m.advance(t.call, m.Ran(call_id="call_1_0", content="42"), ctx())
    assert done.call.stage is m.Stage.DONE and done.call.message is not None
    assert done.call.message.content == "42" and done.steps == () and kinds(done) == ["tool_finished"]


def test_approval_is_checked_then_asked_then_the_approved_call_runs():
    t = begin("send_report")
    assert t.call.stage is m.Stage.CHECKING and isinstance(t.steps[0], m.CheckApproval)
    assert t.call.waits_for() == "checking whether send_report (call_1_0) needs approval"
    asked = m.advance(t.call, m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)), ctx())
    assert asked.call.stage is m.Stage.ASKING and kinds(asked) == ["approval_requested"]
    assert asked.steps == (m.AskPerson(call_id="call_1_0", about="approval", timeout=None),)
    assert asked.call.waits_for() == "waiting for a person to approve send_report (call_1_0)"
    decision = ApprovalDecision(call_id="call_1_0", approve=True, by="alice")
    assert m.refusal(asked.call, decision) is None
    ran = m.advance(asked.call, decided(decision), ctx())
    assert ran.call.stage is m.Stage.RUNNING and isinstance(ran.steps[0], m.RunTool)
    assert kinds(ran) == ["approval_decided"] and ran.notes[0].detail == "approved by alice"
    done = m.advance(ran.call, m.Ran(call_id="call_1_0", content="sent"), ctx())
    assert done.call.message is not None and done.call.message.approval is not None
    assert done.call.message.approval.by == "alice" and done.call.message.content == "sent"


def test_a_check_that_needs_no_person_runs_it_and_invalid_arguments_tell_the_model():
    t = begin("send_report")
    ran = m.advance(t.call, m.Checked(call_id="call_1_0", result=HookResult()), ctx())
    assert ran.call.stage is m.Stage.RUNNING
    bad = m.advance(t.call, m.Checked(call_id="call_1_0", result=HookResult(invalid="to: not an email")), ctx())
    assert bad.call.stage is m.Stage.DONE and bad.steps == ()
    assert bad.call.message is not None and bad.call.message.is_error and "not an email" in bad.call.message.content


def test_a_rejection_is_the_models_message_and_nothing_runs():
    asked = m.advance(
        begin("send_report").call, m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)), ctx()
    )
    no = ApprovalDecision(call_id="call_1_0", approve=False, by="bob", reason="wrong address")
    done = m.advance(asked.call, decided(no), ctx())
    assert done.steps == () and done.call.stage is m.Stage.DONE and done.call.message is not None
    assert done.call.message.is_error and "rejected by bob" in done.call.message.content
    assert "wrong address" in done.call.message.content


def test_edited_arguments_run_and_the_model_is_told_they_were_edited():
    asked = m.advance(
        begin("send_report").call, m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)), ctx()
    )
    edit = ApprovalDecision(call_id="call_1_0", approve=True, by="alice", arguments={"to": "team@example.com"})
    ran = m.advance(asked.call, decided(edit), ctx())
    (run,) = ran.steps
    assert isinstance(run, m.RunTool) and run.arguments == '{"to": "team@example.com"}'
    done = m.advance(ran.call, m.Ran(call_id="call_1_0", content="sent"), ctx())
    assert done.call.message is not None
    assert done.call.message.content.startswith("[arguments edited by alice before running: ")
    assert (
        m.refusal(asked.call, edit.model_copy(update={"approve": False})) == "edited arguments only go with an approval"
    )


def test_an_always_approval_approves_later_calls_of_that_tool_without_asking():
    earlier = ApprovalRecord(call_id="call_0_0", tool="send_report", approved=True, by="alice", at=NOW, always=True)
    t = begin("send_report", c=ctx(send_report=earlier))
    assert t.call.stage is m.Stage.RUNNING and t.call.approval is not None and t.call.approval.automatic
    assert "'always' approval given by alice" in t.call.approval.reason


def test_an_approval_timeout_rejects_or_fails_as_the_agent_says():
    reject = AGENT.model_copy(update={"approval_timeout_seconds": 60})
    asked = m.advance(
        begin("send_report", c=ctx(reject)).call,
        m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)),
        ctx(reject),
    )
    assert asked.steps == (m.AskPerson(call_id="call_1_0", about="approval", timeout=timedelta(seconds=60)),)
    done = m.advance(asked.call, m.TimedOut(call_id="call_1_0"), ctx(reject))
    assert done.call.message is not None and "the run's approval timeout" in done.call.message.content
    fail = reject.model_copy(update={"approval_timeout_outcome": "fail"})
    failed = m.advance(asked.call, m.TimedOut(call_id="call_1_0"), ctx(fail))
    assert failed.call.stage is m.Stage.ASKING and isinstance(failed.steps[0], m.FailRun)
    assert failed.steps[0].error == "ApprovalTimedOut"


def test_a_once_call_lost_goes_in_doubt_then_a_rerun_and_a_stale_decision_is_refused():
    t = begin("charge", '{"amount": 5}')
    (run,) = t.steps
    assert isinstance(run, m.RunTool) and run.how == "once" and run.attempts == 1
    lost = m.Lost(call_id="call_1_0", end="timeout", why="heartbeat timeout", ended="heartbeat timeout")
    doubt = m.advance(t.call, lost, ctx())
    assert doubt.call.stage is m.Stage.IN_DOUBT and kinds(doubt) == ["call_in_doubt"]
    assert doubt.call.doubt is not None and doubt.call.doubt.doubt == 1 and doubt.call.doubt.arguments == {"amount": 5}
    assert doubt.steps == (m.AskPerson(call_id="call_1_0", about="doubt", timeout=m.DOUBT_LIMIT),)
    rerun = m.advance(doubt.call, resolved(ResolveCall(call_id="call_1_0", action="rerun", by="al")), ctx())
    (again,) = rerun.steps
    assert isinstance(again, m.RunTool) and again.activity_id == "tool-1-call_1_0-rerun-1"
    assert again.idempotency_key == run.idempotency_key  # the same call, so the same key
    second = m.advance(rerun.call, lost, ctx())
    assert second.call.doubt is not None and second.call.doubt.doubt == 2
    stale = ResolveCall(call_id="call_1_0", action="rerun", by="al", doubt=1)
    assert "out of date" in (m.refusal(second.call, stale) or "")
    given_result = ResolveCall(call_id="call_1_0", action="result", result='{"id": 7}', by="al", doubt=2)
    assert m.refusal(second.call, given_result) is None
    done = m.advance(second.call, resolved(given_result, doubt=2), ctx())
    assert done.call.message is not None and done.call.message.content == '{"id": 7}'
    assert done.call.message.resolution is not None and done.call.message.resolution.doubt == 2


def test_a_call_in_doubt_that_nobody_resolves_fails_the_run_and_a_retried_tool_tells_the_model():
    lost = m.Lost(call_id="call_1_0", end="timeout", why="heartbeat timeout", ended="heartbeat timeout")
    doubt = m.advance(begin("charge").call, lost, ctx())
    failed = m.advance(doubt.call, m.TimedOut(call_id="call_1_0"), ctx())
    assert isinstance(failed.steps[0], m.FailRun) and failed.steps[0].error == "CallInDoubt"
    told = m.advance(begin("lookup").call, lost, ctx())  # not once: retried by Temporal, then told
    assert told.call.message is not None and told.call.message.is_error and "failed after" in told.call.message.content


def test_a_decision_on_a_call_that_waits_for_none_is_refused():
    t = begin("lookup")
    assert "not waiting for approval" in (m.refusal(t.call, ApprovalDecision(call_id="call_1_0", approve=True)) or "")
    assert "not in doubt" in (m.refusal(t.call, ResolveCall(call_id="call_1_0", action="rerun")) or "")
    with pytest.raises(m.Unexpected):
        m.advance(t.call, m.Checked(call_id="call_1_0", result=HookResult()), ctx())


def test_an_agent_as_a_tool_is_a_child_run_and_a_result_brought_with_the_reply_is_used():
    t = begin("research", '{"input": "find it"}')
    assert t.steps == (m.StartChild(call_id="call_1_0", target="researcher", arguments='{"input": "find it"}'),)
    planned = plan_calls(AGENT, [ToolCall(call_id="call_1_0", name="lookup", arguments="{}")], {}).calls[0]
    planned = planned.model_copy(
        update={"ran": ToolResult(call_id="call_1_0", tool="lookup", output="cheap"), "ran_arguments": "{}"}
    )
    done = m.start(planned, 1, ctx())
    assert done.steps == () and done.call.message is not None and done.call.message.content == "cheap"


# Every way a call can go, by what happens next; none changes the record it was given.
HAPPENINGS = st.sampled_from(
    [
        m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)),
        m.Checked(call_id="call_1_0", result=HookResult()),
        decided(ApprovalDecision(call_id="call_1_0", approve=True, by="a")),
        decided(ApprovalDecision(call_id="call_1_0", approve=False, by="b", reason="no")),
        m.Ran(call_id="call_1_0", content="ok"),
        m.Lost(call_id="call_1_0", end="timeout", why="hb", ended="heartbeat timeout"),
        m.Lost(call_id="call_1_0", end="error", why="boom", ended="boom"),
        resolved(ResolveCall(call_id="call_1_0", action="rerun", by="c")),
        resolved(ResolveCall(call_id="call_1_0", action="fail", reason="gone", by="c")),
        m.TimedOut(call_id="call_1_0"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(tool=st.sampled_from(["lookup", "send_report", "pay", "charge"]), events=st.lists(HAPPENINGS, max_size=12))
def test_no_transition_changes_its_input_and_every_call_ends_with_one_message(tool, events):
    t = begin(tool)
    for happened in events:
        before = t.call.model_dump()
        try:
            t = m.advance(t.call, happened, ctx())
        except m.Unexpected:
            assert t.call.model_dump() == before
            continue
        if any(isinstance(s, m.FailRun) for s in t.steps):
            break
    if t.call.stage is m.Stage.DONE:
        assert t.call.message is not None and t.call.message.call_id == "call_1_0"
        with pytest.raises(m.Unexpected):
            m.advance(t.call, m.Ran(call_id="call_1_0", content="twice"), ctx())
    else:
        assert t.call.message is None


def test_a_live_forks_once_call_goes_to_a_person_before_it_runs_again():
    c = m.Ctx(agent=AGENT, now=NOW, run_id="fork-1", forked_from="run-1")
    planned = plan_calls(AGENT, [ToolCall(call_id="call_1_0", name="charge", arguments="{}")], {}).calls[0]
    t = m.start(planned.model_copy(update={"again": True}), 1, c)
    assert t.call.stage is m.Stage.IN_DOUBT and t.call.doubt is not None and t.call.doubt.fork_of == "run-1"
    assert kinds(t) == ["tool_started", "call_in_doubt"] and "it ran in run-1" in t.notes[1].detail
    rerun = m.advance(t.call, resolved(ResolveCall(call_id="call_1_0", action="rerun", by="al")), c)
    (run,) = rerun.steps
    assert isinstance(run, m.RunTool) and run.activity_id == "tool-1-call_1_0"  # its first run in this fork
    lost = m.Lost(call_id="call_1_0", end="timeout", why="hb", ended="heartbeat timeout")
    again = m.advance(
        m.advance(rerun.call, lost, c).call, resolved(ResolveCall(call_id="call_1_0", action="rerun"), doubt=2), c
    )
    assert again.steps[0].activity_id == "tool-1-call_1_0-rerun-2"  # type: ignore[union-attr]
    not_again = m.start(planned, 1, c)  # a call the fork did not carry over runs as ever
    assert not_again.call.stage is m.Stage.RUNNING


def test_runs_recorded_before_a_patch_take_the_old_path_where_the_1x_code_asked_it():
    """`Ctx.patched` answers as `workflow.patched` does on replay of a history without the marker."""
    from durable_agent_runner.workflows.patches import FORK_ONCE_PATCH, IN_DOUBT_PATCH

    asked: list[str] = []

    def before(patch_id: str) -> bool:
        asked.append(patch_id)
        return False

    old = m.Ctx(agent=AGENT, now=NOW, run_id="run-1", patched=before)
    (run,) = begin("charge", c=old).steps
    assert isinstance(run, m.RunTool) and run.how == "activity" and asked == [IN_DOUBT_PATCH]
    planned = plan_calls(AGENT, [ToolCall(call_id="call_1_0", name="charge", arguments="{}")], {}).calls[0]
    asked.clear()
    fork = m.Ctx(
        agent=AGENT,
        now=NOW,
        run_id="fork-1",
        forked_from="run-1",
        patched=lambda p: asked.append(p) or p != FORK_ONCE_PATCH,
    )
    t = m.start(planned.model_copy(update={"again": True}), 1, fork)
    assert t.call.stage is m.Stage.RUNNING and asked == [IN_DOUBT_PATCH, FORK_ONCE_PATCH]  # a fork of before: runs it


def test_the_books_follow_each_call_and_say_when_a_wait_for_a_person_starts_or_ends():
    """machine/drafts.took, as the workflow calls it after every transition: the approval asked
    for is pending (the phase changes), decided it is settled (the phase changes back), and a
    call that needs no person changes nothing a person waits on."""
    s = RunState()
    s.agent = AGENT
    t = begin("send_report")
    assert books.took(s, AGENT, t, None, NOW) is False and not s.approvals.pending  # checking: no person yet
    asked = m.advance(t.call, m.Checked(call_id="call_1_0", result=HookResult(needs_approval=True)), ctx())
    assert books.took(s, AGENT, asked, t.call.stage, NOW) is True
    assert list(s.approvals.pending) == ["call_1_0"] and s.approvals.pending["call_1_0"].since == NOW
    decision = ApprovalDecision(call_id="call_1_0", approve=True, by="alice")
    s.approvals.apply(decision, NOW)  # the door records it (the update's handler)
    ran = m.advance(asked.call, decided(decision), ctx())
    assert books.took(s, AGENT, ran, asked.call.stage, NOW) is True and not s.approvals.pending
    quick = begin("lookup")
    assert books.took(s, AGENT, quick, None, NOW) is False
