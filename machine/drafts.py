"""The run's state as values: the drafts the machine's rules write, and what the interpreter keeps.

    draft(books)                 → a copy the rules may write (machine/run.py `step` hands it to them)
    record(books, tracker, …)    → Recorded(books, tracker, took)   a call's transition, into the books
    took(books, agent, moved, …) → whether a wait for a person started or ended with it
    take(books, ledger, write)   → Taken(books, ledger, value)      what a person does at the door
    keep(new, live)              → the live object, holding `new`'s state

The rules are written as changes to one state; each of these hands them a draft, as Immer's
producers do, and gives back the new state, the state given left as it was: a shallow copy of the
books whose lists, dicts and sets are copied (a few pointers each, not the messages), and of the
records that change (a session's, the books of who waits for whom, the ledger, status's tracker).
Their members (messages, events, decisions) are shared and never changed in place: the pure
driver checks it on every step of the whole-run tests and of one drawn run in four
(tests/pure_run.py `World.check_pure`). A write that raises leaves nothing half done.

The books are who waits for a person (approvals, questions, calls in doubt) or for a system
(outside completions), and every answer the run gave itself (an earlier "always", a timeout's
default): status, queries and the update validators read them, and each call's transition
(machine/call.py) writes them here.

The interpreter keeps each new state in the live objects its queries, handlers and steps hold
(`keep`), before anything else can run: all of these are synchronous.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, TypeVar

from durable_agent_runner.machine import call, progress
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.progress import CallDoing, Status, person_waits
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

R = TypeVar("R")
W = TypeVar("W")
WAITS_FOR_WHOM = ("approvals", "doubts", "questions", "outside")  # the books of who waits for whom
WAITS = (call.Stage.ASKING, call.Stage.IN_DOUBT, call.Stage.QUESTION)  # a person is asked
# What status says a call does while it is at a stage (waiting for a person has its own words).
DOING: dict[call.Stage, CallDoing] = {
    call.Stage.CHECKING: "checking", call.Stage.RUNNING: "running", call.Stage.OUTSIDE: "outside"
}  # fmt: skip


def draft(books: RunState, waits: bool = False) -> RunState:
    """A copy the rules may write: the books' own lists, dicts and sets copied, and the session's
    record likewise (`waits`: the books of who waits for whom too)."""
    new = _copied(books)
    if books.session is not None:
        new.session = _copied(books.session)
    for name in WAITS_FOR_WHOM if waits else ():
        setattr(new, name, _copied(getattr(books, name)))
    return new


def ledger_draft(ledger: Ledger | None) -> Ledger | None:
    return replace(ledger, grants=dict(ledger.grants)) if ledger is not None else None


@dataclass(frozen=True)
class Took:
    """What a call's transition leaves the interpreter to tell Temporal: whether what status says
    changed (the Web UI's current details), and the phase to set when a wait for a person started
    or ended with it (a phase change may write search attributes: a command)."""

    said: bool
    phase: tuple[t.Phase, str] | None


@dataclass(frozen=True)
class Recorded:
    books: RunState
    tracker: Status
    took: Took


def record(
    books: RunState, tracker: Status, agent: t.AgentSpec, moved: call.Transition, before: call.Stage | None,
    now: datetime, ahead_began: datetime | None = None,
) -> Recorded:  # fmt: skip
    """A call's transition (machine/call.py, itself a value) carried into a draft of the books
    (`_written`): new books and status tracker."""
    new, seen = draft(books, waits=True), _copied(tracker)
    return Recorded(new, seen, _written(new, seen, agent, moved, before, now, ahead_began))


def _written(
    s: RunState, tracker: Status, agent: t.AgentSpec, moved: call.Transition, before: call.Stage | None,
    now: datetime, ahead_began: datetime | None = None,
) -> Took:  # fmt: skip
    """A call's transition from stage `before`, written into `s`: its books (`took`), a
    decision in status's words, its events (a tool's activity that made the next model call
    finished when that call began: `ahead_began`), what the call does now, and the phase.
    `agent`: the one whose call it is (a --live-tools fork reruns a call as the agent that made
    it, which may have handed off since)."""
    c = moved.call
    refresh = took(s, agent, moved, before, now)
    for note in moved.notes:
        if note.kind is t.EventKind.APPROVAL_DECIDED and c.approval is not None:
            progress.decided(s, c.approval)
        at = ahead_began if note.kind is t.EventKind.TOOL_FINISHED and ahead_began is not None else now
        s.event(at, note.kind, call_id=note.call_id, tool=note.tool, text=note.text, detail=note.detail)
    said = tracker.doing(s, c.call_id, DOING.get(c.stage), c.planned.call)
    outside = call.Stage.OUTSIDE
    if said is None and not refresh and (c.stage is outside) is not (before is outside):
        waits = person_waits(s)  # a sibling's outside wait came or went while a person is waited for
        said = waits[1] if waits is not None else None  # the words change, not the phase
    if said is not None:
        progress.say(s, said)
    return Took(said is not None, tracker.waiting(s) if refresh else None)


def took(s: RunState, agent: t.AgentSpec, moved: call.Transition, before: call.Stage | None, now: datetime) -> bool:
    """The call's transition from stage `before`, written into the books; whether a wait for a
    person started or ended with it (the run's phase changes then)."""
    c = moved.call
    if c.stage is call.Stage.ASKING and before is not call.Stage.ASKING:
        s.approvals.request(c.call_id, c.tool, c.asked or {}, c.turn, now)
    if c.stage is call.Stage.IN_DOUBT and before is not call.Stage.IN_DOUBT:
        assert c.doubt is not None
        s.doubts.mark(c.doubt)
    if c.stage is call.Stage.QUESTION and before is not call.Stage.QUESTION:
        s.questions.ask(pending_question(moved, now))
    _outside(s, agent, moved, before, now)
    answer = c.message.answer if c.message is not None else None
    if answer is not None and s.questions.answered(c.call_id) is None:
        s.questions.settle(answer)  # the run's own: the question's timeout and its default
    if c.approval is not None and s.approvals.decided(c.call_id) is None:
        s.approvals.settle(c.approval)  # the run's own: an earlier "always", an approval timeout
    return before in WAITS or (c.stage in WAITS and before is not c.stage)


def pending_question(moved: call.Transition, now: datetime) -> t.PendingQuestion:
    c = moved.call
    ask = next(step for step in moved.steps if isinstance(step, call.AskPerson))
    choices = list(c.choices) if c.choices is not None else None
    deadline = now + ask.timeout if ask.timeout is not None else None
    return t.PendingQuestion(
        call_id=c.call_id, question=c.question, choices=choices, since=now, turn=c.turn, deadline=deadline
    )


def _outside(s: RunState, agent: t.AgentSpec, moved: call.Transition, before: call.Stage | None, now: datetime) -> None:
    """The book of outside waits: a wait that starts, one the run ended itself (its timeout,
    told to the model), one that went to a person."""
    c = moved.call
    if c.stage is call.Stage.OUTSIDE and before is not call.Stage.OUTSIDE:
        spec = agent.tool(c.tool)
        wait = next(step for step in moved.steps if isinstance(step, call.AwaitOutside))
        assert spec is not None and spec.outside is not None
        pending = t.PendingOutside(
            call_id=c.call_id, tool=c.tool, turn=c.turn, since=now, deadline=now + wait.timeout,
            started=c.started[:2000], on_timeout=spec.outside.on_timeout,
        )  # fmt: skip
        s.outside.wait(pending, spec.outside)
    elif before is call.Stage.OUTSIDE:
        record = c.completion
        if record is not None and record.automatic:
            s.outside.settle(record)
        elif record is None:
            s.outside.expire(c.call_id)  # to a person: in doubt


@dataclass(frozen=True)
class Taken(Generic[W]):
    books: RunState
    ledger: Ledger | None
    value: W


def take(books: RunState, ledger: Ledger | None, write: Callable[[RunState, Ledger | None], W]) -> Taken[W]:
    """What reaches the run from outside, checked by its validator first (a decision, a
    resolution, an answer, a completion, a message, a pause, a resume with its raise, an edit),
    written by the machine's rule `write` into a draft: the new books and ledger, and what the
    rule gave back (its record, what status says)."""
    new, raised = draft(books, waits=True), ledger_draft(ledger)
    return Taken(new, raised, write(new, raised))


def keep(new: R, live: R) -> R:
    """`new`'s state kept in `live`, the object the interpreter's queries, handlers and steps hold."""
    vars(live).update(vars(new))
    return live


def _copied(record: R) -> R:
    new = copy.copy(record)
    for name, value in vars(record).items():
        if isinstance(value, list | dict | set):
            setattr(new, name, copy.copy(value))
    return new
