"""One answer's turns as a value transition: `step(run, happened, facts)` returns the new run and
the next step, and never changes the run or the happening it was given.

    begin(books, guard, ledger) → Run
    step(run, happened, facts)  → Transition(run, step)   the rules of machine/turn.py
    adopt(run, books, ledger)   → Run                       the interpreter keeps the new state

A `Run` is all a turn reads and writes: the run's books (`RunState`), its budget ledger and the
answer's own memo (`Answer`: the plan in flight, the stage, a reply made ahead …). The rules in
`turn.py` are written as changes to one state; `step` hands them a draft, as Immer's producers
do: a shallow copy of the books whose lists, dicts and sets are copied (a few pointers each, not
the messages), a copy of the ledger, and a copy of a reply whose call ids the run renames. What
is not copied (approvals, doubts, a session's queue) the turn only reads; the pure driver checks
that on every step of every drawn run (tests/pure_run.py `World.check_pure`).

The interpreter (workflows/agent.py, and the driver) adopts each new run into the one live state
that queries and handlers read, before anything else can run: `step` is synchronous.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Literal

from durable_agent_runner.machine import rerun
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.outcomes import Facts, Outcome, Replied
from durable_agent_runner.machine.rules import Done
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import NextStep, Turn
from durable_agent_runner.workflows.types import AgentSpec, AheadReply


@dataclass(frozen=True)
class Answer:
    """What one answer's turns remember between steps (see `Turn` for each field)."""

    first: AgentSpec
    guard: str | None
    base: int
    calls: int
    plan: RunTools | None
    candidate: str
    answer: Done | None
    stage: Literal["begin", "model", "tools", "steered", "budget"]
    reruns: rerun.Reruns | None
    ahead: AheadReply | None
    guarded: str | None


@dataclass(frozen=True)
class Run:
    books: RunState
    ledger: Ledger | None
    answer: Answer


@dataclass(frozen=True)
class Transition:
    run: Run  # the new state; the run given to `step` is unchanged
    step: NextStep  # what the interpreter carries out next (Done, Stop: the answer ends)


def begin(books: RunState, guard: str | None, ledger: Ledger | None) -> Run:
    """An answer about to start. `guard`: the prompt the first call's input guardrails check."""
    return Run(books, ledger, _memo(Turn(books, guard, ledger)))


def step(run: Run, happened: Outcome, facts: Facts) -> Transition:
    books, ledger = draft(run.books), replace(run.ledger, grants=dict(run.ledger.grants)) if run.ledger else None
    turn = Turn(books, run.answer.guard, ledger)
    m = run.answer
    turn.first, turn.base, turn.calls, turn.plan, turn.candidate = m.first, m.base, m.calls, m.plan, m.candidate
    turn.answer, turn.stage, turn.reruns, turn.ahead, turn.guarded = m.answer, m.stage, m.reruns, m.ahead, m.guarded
    if isinstance(happened, Replied):  # the run renames call ids it used before (RunState.claim_call_ids)
        message = happened.reply.message.model_copy(deep=True)
        happened = Replied(happened.reply.model_copy(update={"message": message}))
    nxt = turn.next(happened, facts)
    return Transition(Run(books, ledger, _memo(turn)), nxt)


def adopt(run: Run, books: RunState, ledger: Ledger | None) -> Run:
    """Keep `run`'s state in the interpreter's live books and ledger (the objects its queries,
    handlers and steps hold), and return the run to step next, over them."""
    vars(books).update(vars(run.books))
    if ledger is not None and run.ledger is not None:
        vars(ledger).update(vars(run.ledger))
    return Run(books, ledger, run.answer)


def draft(books: RunState) -> RunState:
    """A copy the turn's rules may write: the books' own lists, dicts and sets copied, their
    members (messages, events, records) shared, never changed in place by a turn."""
    new = copy.copy(books)
    for name, value in vars(books).items():
        if isinstance(value, list | dict | set):
            setattr(new, name, copy.copy(value))
    return new


def _memo(turn: Turn) -> Answer:
    return Answer(
        turn.first, turn.guard, turn.base, turn.calls, turn.plan, turn.candidate, turn.answer, turn.stage,
        turn.reruns, turn.ahead, turn.guarded,
    )  # fmt: skip
