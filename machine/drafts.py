"""The run's state as values: the drafts the machine's rules write, and what the interpreter keeps.

    draft(books)                 → a copy the rules may write (machine/run.py `step` hands it to them)
    record(books, tracker, …)    → Recorded(books, tracker, took)   a call's transition, into the books
    take(books, ledger, write)   → Taken(books, ledger, value)      what a person does at the door
    keep(new, live)              → the live object, holding `new`'s state

The rules are written as changes to one state; each of these hands them a draft, as Immer's
producers do, and gives back the new state, the state given left as it was: a shallow copy of the
books whose lists, dicts and sets are copied (a few pointers each, not the messages), and of the
records that change (a session's, the books of who waits for whom, the ledger, status's tracker).
Their members (messages, events, decisions) are shared and never changed in place: the pure
driver checks it on every step of the whole-run tests and of one drawn run in four
(tests/pure_run.py `World.check_pure`). A write that raises leaves nothing half done.

The interpreter keeps each new state in the live objects its queries, handlers and steps hold
(`keep`), before anything else can run: all of these are synchronous.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, TypeVar

from durable_agent_runner.machine import books as bookkeeping
from durable_agent_runner.machine import call
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.phase import Status
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

R = TypeVar("R")
W = TypeVar("W")
WAITS_FOR_WHOM = ("approvals", "doubts", "questions", "outside")  # the books of who waits for whom


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
class Recorded:
    books: RunState
    tracker: Status
    took: bookkeeping.Took


def record(
    books: RunState, tracker: Status, agent: t.AgentSpec, moved: call.Transition, before: call.Stage | None,
    now: datetime, ahead_began: datetime | None = None,
) -> Recorded:  # fmt: skip
    """A call's transition (machine/call.py, itself a value) carried into the books as
    machine/books.record says: new books and status tracker."""
    new, seen = draft(books, waits=True), _copied(tracker)
    took = bookkeeping.record(new, seen, agent, moved, before, now, ahead_began)
    return Recorded(new, seen, took)


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
