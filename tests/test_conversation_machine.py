"""A session's whole conversation through the machine, without Temporal: the conversation
machine (machine/conversation.py) says what comes between answers, the turn machine answers
each message from scripted replies, and the test plays the workflow (time, messages, an end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.machine import conversation as c
from durable_agent_runner.machine import fallback
from durable_agent_runner.machine.outcomes import Facts, ModelFailed, Ready, Replied
from durable_agent_runner.machine.rules import Done
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import CallModel, Turn
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
AGENT = t.AgentSpec(name="helpdesk", idle_timeout_seconds=600, continue_as_new_after=3)


def session_run(agent: t.AgentSpec = AGENT) -> RunState:
    s = RunState()
    s.agent = agent
    s.session = SessionState()
    return s


def send(s: RunState, text: str, at: datetime = T0, by: str = "alice") -> t.MessageReceipt:
    assert s.session is not None
    message = t.SessionMessage(text=text, by=by)
    s.session.check(message, ended=False)
    return s.session.accept(message, at, steer=False)


def answer(s: RunState, step: c.Answer, now: datetime) -> t.Exchange:
    """An answer's turns (machine/run.py steps them): to the answer, the model echoing the message."""
    turn = Turn(s, step.guard)
    asked = turn.next(Ready(), Facts(now=now))
    assert isinstance(asked, CallModel)
    text = f"re: {s.messages[-1].content}"
    usage = t.Usage(input_tokens=5, output_tokens=3)
    done = turn.next(Replied(t.ModelReply(message=t.AssistantMessage(content=text), usage=usage)), Facts(now=now))
    assert isinstance(done, Done)
    return c.answered(s, done, now, "exec-1")


def test_queued_messages_are_answered_in_order_then_it_waits_then_an_end_ends_it():
    s = session_run()
    send(s, "Where is my order?")
    send(s, "And the invoice?")
    first = c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1")
    assert first == c.Answer(guard=None)
    assert answer(s, first, T0).output == "re: Where is my order?"
    second = c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1")
    assert answer(s, second, T0).message == 2
    assert s.output == "re: And the invoice?" and s.session is not None and s.session.answered == 2

    wait = c.between(s, AGENT, Facts(now=T0 + timedelta(seconds=60)), c.Woke(), "exec-1")
    assert isinstance(wait, c.WaitForMessage)
    assert wait.seconds == 600 - 60  # idle since the last answer (T0), not since the wait began
    assert wait.step == "answered 2 message(s); waiting for the next"

    s.session.ending = t.EndSession(by="bob", reason="resolved")
    ended = c.between(s, AGENT, Facts(now=T0 + timedelta(seconds=90)), c.Woke(waited=True), "exec-1")
    assert ended == c.EndSession("ended by bob: resolved")
    assert c.ended(s) == ("re: And the invoice?", None)


def test_a_message_queued_before_an_end_is_still_answered():
    s = session_run()
    send(s, "one more thing")
    assert s.session is not None
    s.session.ending = t.EndSession(by="alice")
    step = c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1")
    assert isinstance(step, c.Answer)
    answer(s, step, T0)
    assert c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1") == c.EndSession("ended by alice")


def test_idle_time_is_kept_across_waits_and_running_out_ends_it_at_once():
    s = session_run()
    first = c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1")
    assert isinstance(first, c.WaitForMessage) and first.seconds == 600
    assert first.detail == "ends after 10 min without a message"  # said "after 600s"; 7 days: "after 604800s"
    later = c.between(s, AGENT, Facts(now=T0 + timedelta(seconds=599.9995)), c.Woke(), "exec-1")
    assert isinstance(later, c.WaitForMessage) and later.seconds == c.MIN_WAIT  # spent: asks the server once
    send(s, "too late", T0 + timedelta(seconds=600))  # in the same instant the wait ran out
    out = c.between(s, AGENT, Facts(now=T0 + timedelta(seconds=600)), c.Woke(waited=True, timed_out=True), "exec-1")
    assert out == c.EndSession("idle for 10 min")
    assert c.ended(s) == ("", None)  # nothing answered: an empty result


def test_it_continues_as_new_before_waiting_never_after_a_wait():
    s = session_run()
    for text in ("a", "b", "c"):
        send(s, text)
        answer(s, c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1"), T0)  # type: ignore[arg-type]
    assert s.turns_here == 3  # the agent's continue_as_new_after
    assert c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1") == c.ContinueAsNew()
    assert s.session is not None
    s.session.ending = t.EndSession(by="alice")  # what a wait woke to decides, not history's length
    assert c.between(s, AGENT, Facts(now=T0), c.Woke(waited=True), "exec-1") == c.EndSession("ended by alice")
    fresh = session_run()  # nothing answered in this execution: no reason to go on in a new one
    assert isinstance(c.between(fresh, AGENT, Facts(now=T0, continue_suggested=True), c.Woke(), "x"), c.WaitForMessage)


def test_a_failed_answer_is_that_messages_error_and_the_conversation_goes_on():
    s = session_run()
    send(s, "first")
    send(s, "second")
    guarded = AGENT.model_copy(update={"input_guardrails": ["no_secrets"]})
    step = c.between(s, guarded, Facts(now=T0), c.Woke(), "e")
    assert step == c.Answer(guard="first")  # the opened message's text goes to the input guardrails
    s.approvals.request("call-1", "send", {}, 1, T0)  # a call waiting for a person when the answer failed
    s.error, s.error_type = "over budget", "TokenBudgetExceeded"
    detail = c.failed(s, "TokenBudgetExceeded", "over budget", T0, "exec-1")
    assert detail == "message 1 · failed (TokenBudgetExceeded)"
    assert (s.error, s.error_type, s.approvals.pending) == (None, None, {})
    assert s.session is not None and s.session.exchanges[0].error == "TokenBudgetExceeded: over budget"
    nxt = c.between(s, AGENT, Facts(now=T0), c.Woke(), "exec-1")
    assert isinstance(nxt, c.Answer) and s.session.current is not None and s.session.current.message == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(min_size=1, max_size=20), max_size=3), min_size=1, max_size=5), st.booleans())
def test_every_accepted_message_is_answered_once_in_order_before_the_session_ends(batches, idle_out):
    """Messages arrive in batches while the session waits; then an end, or an idle wait runs out.
    Whatever the batches, every message is answered exactly once, in order, before it ends."""
    agent = AGENT.model_copy(update={"continue_as_new_after": 10_000})
    s = session_run(agent)
    now, sent, answered, woke = T0, [], [], c.Woke()
    pending = list(batches)
    while True:
        step = c.between(s, agent, Facts(now=now), woke, "exec-1")
        woke = c.Woke()
        if isinstance(step, c.Answer):
            answered.append(answer(s, step, now).message)
        elif isinstance(step, c.WaitForMessage):
            now += timedelta(seconds=1)
            if pending:
                for text in pending.pop(0):  # an empty batch: the wait goes on
                    sent.append(send(s, text, now).message)
                woke = c.Woke(waited=True)
            elif idle_out:
                woke = c.Woke(waited=True, timed_out=True)
            else:
                assert s.session is not None
                s.session.ending = t.EndSession(by="alice")
                woke = c.Woke(waited=True)
        else:
            assert isinstance(step, c.EndSession)
            break
    assert answered == sent == list(range(1, len(sent) + 1))


@pytest.mark.parametrize("release_2", [True, False])
def test_each_message_starts_on_the_agents_first_models_in_2_0(release_2: bool):
    """A model that failed for good in one answer is asked again by the next message (its provider
    may be back), in a run started on 2.0; a run started on 1.x stays where its fallbacks left it."""
    billing = t.AgentSpec(name="billing", model="p2", fallback_models=["b2"])
    lead = t.AgentSpec(name="helpdesk", model="p1", fallback_models=["b1", "c1"], team=[billing])
    s = session_run(lead)
    send(s, "Where is my order?")
    first = c.between(s, lead, Facts(now=T0, release_2=release_2), c.Woke(), "exec-1")
    assert first == c.Answer(guard=None)
    turn = Turn(s, None)
    assert isinstance(turn.next(Ready(), Facts(now=T0)), CallModel)
    down = turn.next(ModelFailed("ModelHTTP503", "down"), Facts(now=T0))  # p1 → b1
    assert isinstance(down, CallModel) and down.agent.model == "b1"
    down = turn.next(ModelFailed("ModelHTTP503", "down"), Facts(now=T0))  # b1 → c1
    assert isinstance(down, CallModel) and down.agent.model == "c1"
    assert s.agent is not None
    s.agent = fallback.switched(s.agent, "billing")  # a member switched too (as after a handoff)
    s.switches.append(t.ModelSwitch(agent="billing", turn=s.turn, from_model="p2", to_model="b2", why="x", at=T0))
    reply = t.ModelReply(message=t.AssistantMessage(content="on its way"))
    done = turn.next(Replied(reply), Facts(now=T0))
    assert isinstance(done, Done)
    c.answered(s, done, T0, "exec-1")
    send(s, "And the invoice?")
    assert c.between(s, lead, Facts(now=T0, release_2=release_2), c.Woke(), "exec-1") == c.Answer(guard=None)
    now = s.agent_now
    member = s.agent.member("billing")
    assert member is not None
    if release_2:
        assert (now.model, now.fallback_models) == ("p1", ["b1", "c1"])
        assert (member.model, member.fallback_models) == ("p2", ["b2"])
    else:
        assert (now.model, now.fallback_models) == ("c1", [])
        assert (member.model, member.fallback_models) == ("b2", [])
    assert [(sw.from_model, sw.to_model) for sw in s.switches] == [("p1", "b1"), ("b1", "c1"), ("p2", "b2")]


def test_a_span_reads_in_whole_days_hours_or_minutes_when_it_is_one():
    from durable_agent_runner.machine.texts import duration

    spans = [604_800, 86_400, 7_200, 5_400, 90, 45, 0.5, 3_601]
    assert [duration(x) for x in spans] == ["7 days", "1 day", "2 h", "90 min", "90 s", "45 s", "0.5 s", "3601 s"]
