"""A session's loop, decided here: between answers, what the run does next (answer the message
it holds, open the next queued one, continue as new, wait for a message, or end), and what an
answer or a failed answer does to the session. Pure: the run machine (machine/run.py) steps
through it, the workflow carries out each step and feeds back what happened, so a whole
conversation is tested without a server (tests/test_conversation_machine.py, tests/test_whole_runs.py).

The rules, as 1.x kept them (no command changes, so every history replays):
- a message held (opened before a continue-as-new, or joined by a steer) is answered first;
- a queued message is opened next, even when an end was asked after it was sent;
- with nothing to answer, a run that has answered here and should continue as new does so,
  before it waits (never after a wait: a message or an end decides then);
- an asked end ends the session; an idle wait that runs out ends it at once;
- a failed answer is that message's error: the conversation goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durable_agent_runner.machine import fallback
from durable_agent_runner.machine.outcomes import Facts
from durable_agent_runner.machine.rules import Done
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.texts import duration
from durable_agent_runner.machine.turn import should_continue
from durable_agent_runner.workflows import types as t

MIN_WAIT = 0.001  # seconds: a wait whose idle time is spent still asks the server once


@dataclass(frozen=True)
class Answer:
    """Answer the message the session holds; `guard`: its text for the input guardrails."""

    guard: str | None


@dataclass(frozen=True)
class ContinueAsNew:
    """History is long: go on in a new execution before waiting."""


@dataclass(frozen=True)
class WaitForMessage:
    """Wait (durably, holding no worker) for a message or an end, for at most `seconds`: what is
    left of the idle timeout since the session went idle (kept across waits and continue-as-new)."""

    seconds: float
    step: str  # the phase's words
    detail: str  # the waiting event's


@dataclass(frozen=True)
class EndSession:
    why: str


Between = Answer | ContinueAsNew | WaitForMessage | EndSession


@dataclass(frozen=True)
class Woke:
    """What the last wait came to: nothing yet (`waited` False), a message or an end, or its
    idle time ran out (`timed_out`)."""

    waited: bool = False
    timed_out: bool = False


def between(s: RunState, first: t.AgentSpec, facts: Facts, woke: Woke, execution: str) -> Between:
    """The session's next step (`execution`: this execution's run id, kept with an exchange).
    Two changes are made to `s` here: a queued message opened (its exchange, its user message,
    a fresh set of refusals and, in a run started on 2.0, every agent back on the model it had
    before the last answer's fallbacks), and the time the session went idle, when it starts to
    wait."""
    session = s.session
    assert session is not None
    idle = first.idle_timeout_seconds
    if woke.timed_out:  # nothing came while it waited (a message in the same instant waits for the next run)
        return EndSession(f"idle for {duration(idle)}")
    if session.current is not None:
        return Answer(guard=None)  # held across continue-as-new, or a steer's
    if session.queue:
        opened = session.open(s.turn, facts.now, execution)
        if facts.release_2 and len(session.exchanges) > 1:  # each answer starts on the first models
            last_began = session.exchanges[-2].first_turn
            undone = [sw for sw in s.switches if sw.turn >= last_began]
            if undone:
                assert s.agent is not None
                s.agent = fallback.restored(s.agent, undone)
        s.refusals = {}
        s.messages.append(t.UserMessage(content=opened.text))
        return Answer(guard=opened.text if first.input_guardrails else None)
    if not woke.waited and s.turns_here and should_continue(s, first, facts):
        return ContinueAsNew()
    if session.ending is not None:
        by = session.ending
        return EndSession(f"ended by {by.by}" + (f": {by.reason}" if by.reason else ""))
    since = session.idle_since = session.idle_since or facts.now
    return WaitForMessage(
        seconds=max(idle - (facts.now - since).total_seconds(), MIN_WAIT),
        step=f"answered {session.answered} message(s); waiting for the next",
        detail=f"ends after {duration(idle)} without a message",
    )


def steer(s: RunState) -> list[tuple[str, str]]:
    """A session's queued messages join the answer in progress, in order, as user messages of its
    transcript; each one's event text and detail."""
    session = s.session
    assert session is not None
    said = []
    for queued in session.steer():
        s.messages.append(t.UserMessage(content=queued.text))
        said.append((queued.text, f"message {queued.message} from {queued.by} · steers the answer"))
    return said


def answered(s: RunState, done: Done, now: datetime, execution: str) -> t.Exchange:
    """The held message answered: the run's output, and its exchange closed with it."""
    session = s.session
    assert session is not None
    s.output = done.output
    return session.close(now, s.turn, s.usage, done.output, done.output_object, None, execution)


def failed(s: RunState, kind: str, message: str, now: datetime, execution: str) -> str:
    """The held message's answer failed: its exchange closed with the error, every call still
    waiting for a person given up, and the run's own error cleared (the session goes on).
    The event's detail."""
    session = s.session
    assert session is not None
    number = session.current.message if session.current else 0
    s.abandon()
    s.error = s.error_type = None
    _close_calls(s, f"the answer to message {number} failed ({kind}) before this call's result was taken")
    session.close(now, s.turn, s.usage, None, None, f"{kind}: {message}", execution)
    return f"message {number} · failed ({kind})"


def _close_calls(s: RunState, why: str) -> None:
    """The transcript goes on to the next message whole: the calls of the last reply that have no
    result (the turn limit stopped them, a person's wait ran out) get one saying why. A model's API
    refuses calls left unanswered in a transcript (OpenAI with a 400, Anthropic too), which would
    fail every later message of the session."""
    last = next((i for i in range(len(s.messages) - 1, -1, -1) if isinstance(s.messages[i], t.AssistantMessage)), None)
    if last is None:
        return
    reply = s.messages[last]
    assert isinstance(reply, t.AssistantMessage)
    answered = {m.call_id for m in s.messages[last + 1 :] if isinstance(m, t.ToolMessage)}
    for call in reply.tool_calls:
        if call.call_id not in answered:
            text = f"error: no result: {why}; it may or may not have run"
            s.messages.append(t.ToolMessage(call_id=call.call_id, name=call.name, content=text, is_error=True))


def ended(s: RunState) -> tuple[str, object]:
    """What a session's run returns as it ends: its last answer (empty when none)."""
    session = s.session
    assert session is not None
    last = next((ex for ex in reversed(session.exchanges) if ex.output is not None), None)
    return (last.output or "", last.output_object) if last else ("", None)
