"""The run as one value transition: `step(run, happened, facts)` returns the new run and what the
interpreter carries out next, and never changes the run or the happening it was given.

    begin(books, ledger, execution) → Run
    step(run, happened, facts)      → Transition(run, step, phases, search)
    adopt(run, books, ledger)       → Run   the interpreter keeps the new state in its live objects
    (machine/drafts.py: the drafts, a call's transition into the books, what people do at the door)

    Began ──▶ a single run: its prompt, then its answer's first step
          ──▶ a session: what `conversation.between` says (answer, wait, continue as new, end)
    an Outcome ──▶ the answer's next step (machine/turn.py); its Done ends the answer:
          a single run's Finish, or a session's next `between`
    Woke (a session's wait ended) ──▶ `between` again
    Failed (the answer in progress failed) ──▶ in a session, that message's error, then `between`
    PauseEnded, BreakpointAnswered, Summarized, HandoffFiltered ──▶ what the interpreter's I/O
          came to, taken into the books here, then the answer's next step

The interpreter carries out only I/O: a steer, a pause's taking and end, a breakpoint's edits, a
compaction and a handoff are written here. What status says comes with the transition (`phases`,
`search`), set by the interpreter in order before it carries out the step; where the old code
set it before the turn chose its next step (a resume, a handoff), the step is `GoOn`.

A `Run` is all the run's steps read and write: its books (`RunState`), its budget ledger and the
answer in progress (`Answer`: the plan in flight, the stage, a reply made ahead …). The rules (in
turn.py, conversation.py, control.py, handoff.py, memory.py, drafts.py) are written as changes to
one state; `step` hands them a draft, as Immer's producers do: a shallow copy of the books whose
lists, dicts and sets are copied (a few pointers each, not the messages), the session's record
likewise, a copy of the ledger (machine/drafts.py), and a copy of a reply whose call ids the run
renames. What is not copied no step changes in place; the pure driver checks that on every step
of the whole-run tests and of one drawn run in four (tests/pure_run.py `World.check_pure`). A
draft costs about 15 µs (40 messages, 200 events).

The interpreter (workflows/agent.py, and the driver) adopts each new run into the one live state
that queries and handlers read, before anything else can run: `step` is synchronous.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime

from durable_agent_runner.machine import control, conversation, edits, handoff, memory, progress, rerun
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import RunTools, describe_call
from durable_agent_runner.machine.drafts import draft, keep, ledger_draft
from durable_agent_runner.machine.outcomes import (
    BreakpointRan,
    Compacted,
    Facts,
    HandedOff,
    Outcome,
    Ready,
    Replied,
    Resumed,
    Steered,
)
from durable_agent_runner.machine.requests import who
from durable_agent_runner.machine.rules import Done, Stop
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import (
    CallModel,
    Compact,
    ContinueAsNew,
    HandOff,
    NextStep,
    Pause,
    Stage,
    Steer,
    Turn,
)
from durable_agent_runner.workflows import types as t

# ----------------------------------------------------------------------------- the happenings


@dataclass(frozen=True)
class Began:
    """The run (or an execution of it) begins; `prompt`: a new single run's (None: carried).
    `check_break_tools`: its breakpoints' tools must be its team's (patch break-tools-2.0.2)."""

    prompt: str | None = None
    check_break_tools: bool = False


@dataclass(frozen=True)
class Failed:
    """The answer in progress failed: a Stop the interpreter raised, or an error it caught."""

    kind: str
    message: str


@dataclass(frozen=True)
class BreakpointAnswered:
    """The agent's breakpoint function answered: its edits, and whether it asks to pause."""

    name: str
    result: t.HookResult


@dataclass(frozen=True)
class Summarized:
    """A compaction's summary came back (`summary`: the model's, or why not; None: a trim)."""

    plan: memory.Compaction
    summary: t.CompactResult | str | None = None


@dataclass(frozen=True)
class PauseEnded:
    """A person resumed the run held at `pause`, or nobody did within the pause limit."""

    pause: Pause
    timed_out: bool = False


@dataclass(frozen=True)
class HandoffFiltered:
    """The agent's handoff filter function answered: the conversation the target goes on with
    (None: it returned none, which fails the answer)."""

    agent: t.AgentSpec
    handoff: handoff.Handoff
    messages: list[t.Message] | None


Happened = Outcome | Began | conversation.Woke | Failed | BreakpointAnswered | Summarized | PauseEnded | HandoffFiltered

# ---------------------------------------------------------------------------------- the steps


@dataclass(frozen=True)
class Finish:
    """The run ends: its phase's words, the answer (a single run's: online scoring samples it)
    and what it returns."""

    words: str
    output: str
    output_object: object
    done: Done | None = None
    ended_by: str | None = None  # a session's end


@dataclass(frozen=True)
class GoOn:
    """Nothing to carry out but the transition's phases: feed `happened` back at once (what
    status says is set before the machine takes its next step, as the search attributes it
    writes count the state as it is then)."""

    happened: Outcome


@dataclass(frozen=True)
class FilterHandoff:
    """Call the agent's handoff filter function (its name: `handoff.hook`) on the conversation."""

    agent: t.AgentSpec
    handoff: handoff.Handoff


RUNNABLE = ("tool", "child", "ask")  # what a planned call that runs does (its action); the rest only answer

# Done never leaves the machine; Stop: the interpreter fails the run (in a session, the answer).
Step = NextStep | conversation.WaitForMessage | Finish | GoOn | FilterHandoff

# ---------------------------------------------------------------------------------- the state


@dataclass(frozen=True)
class Answer:
    """What the answer in progress remembers between steps: `Turn`'s attributes of these names
    (see `Turn` for each)."""

    first: t.AgentSpec
    guard: str | None
    base: int
    calls: int
    plan: RunTools | None
    candidate: str
    answer: Done | None
    stage: Stage
    reruns: rerun.Reruns | None
    ahead: t.AheadReply | None
    guarded: str | None


MEMO = tuple(f.name for f in fields(Answer))  # the one list of what a turn remembers between steps


@dataclass(frozen=True)
class Run:
    books: RunState
    ledger: Ledger | None
    first: t.AgentSpec  # the agent the run started with: its limits and session settings hold
    execution: str  # this execution's run id (a session's exchanges keep it)
    answer: Answer | None = None  # the answer in progress


@dataclass(frozen=True)
class Transition:
    run: Run  # the new state; the run given to `step` is unchanged
    step: Step
    # What status says, in order, before `step` is carried out: the interpreter sets each phase
    # (and the search attributes it writes) as it adopts the run.
    phases: tuple[tuple[t.Phase, str], ...] = ()
    search: tuple[t.SearchWrite, ...] = ()  # search attributes written with the next phase change


def begin(books: RunState, ledger: Ledger | None, execution: str) -> Run:
    assert books.agent is not None
    return Run(books, ledger, books.agent, execution)


# -------------------------------------------------------------------------------- the machine


def step(run: Run, happened: Happened, facts: Facts) -> Transition:
    moved = _step(run, happened, facts)
    return replace(moved, phases=moved.phases + _saying(moved.run, moved.step, facts.now))


def _saying(run: Run, nxt: Step, at: datetime) -> tuple[tuple[t.Phase, str], ...]:
    """What status says as the interpreter carries out `nxt` (after the transition's own phases),
    and what the run's story tells of it, written into the new run's books."""
    s = run.books
    if isinstance(nxt, CallModel):
        agent, made = nxt.agent, nxt.made
        model = agent.model or "the worker's default model"
        began = (made.began_at if made is not None else None) or at  # a call made ahead began earlier
        s.event(began, t.EventKind.MODEL_STARTED, detail=f"{who(s, agent)}{model}")
        return ((t.Phase.CALLING_MODEL, f"turn {s.turn}: {agent.name} calling {model}"),)
    if isinstance(nxt, RunTools | rerun.RerunRecorded):
        runs = [p for p in (nxt if isinstance(nxt, RunTools) else nxt.plan).calls if p.action in RUNNABLE]
        if run.ledger is not None:  # the turn's child runs share what the budget has left
            run.ledger.expect(sum(p.action == "child" for p in runs))
        names = ", ".join(describe_call(p.call, 60) for p in runs) or "no runnable calls"
        return ((t.Phase.RUNNING_TOOLS, f"turn {s.turn}: running {names}"),)
    if isinstance(nxt, conversation.WaitForMessage):
        s.event(at, t.EventKind.WAITING, detail=nxt.detail)
        return ((t.Phase.WAITING_FOR_MESSAGE, nxt.step),)
    if isinstance(nxt, Finish):
        return ((t.Phase.COMPLETED, nxt.words),)
    return ()


def _step(run: Run, happened: Happened, facts: Facts) -> Transition:
    books, ledger = draft(run.books), ledger_draft(run.ledger)
    drafted = replace(run, books=books, ledger=ledger)
    if isinstance(happened, Began):
        return _began(drafted, happened, facts)
    if isinstance(happened, conversation.Woke):
        return _between(drafted, happened, facts)
    if isinstance(happened, Failed):
        return _failed(drafted, happened, facts)
    assert run.answer is not None, f"{type(happened).__name__} with no answer in progress"
    if isinstance(happened, Replied):  # the run renames call ids it used before (RunState.claim_call_ids)
        message = happened.reply.message.model_copy(deep=True)
        happened = Replied(happened.reply.model_copy(update={"message": message}))
    elif isinstance(happened, BreakpointAnswered):  # its edits taken, in order
        _, why = control.breakpoint_ended(books, happened.name, happened.result, facts.now)  # each edit told
        happened = BreakpointRan(why)
    elif isinstance(happened, Summarized):
        plan = happened.plan
        size = memory.transcript_bytes(books.messages[: plan.upto])
        text, detail = memory.apply(books, plan, size, happened.summary)
        books.event(facts.now, t.EventKind.COMPACTED, text=text, detail=detail)
        happened = Compacted()
    elif isinstance(happened, HandoffFiltered):
        return _handed_off(drafted, happened.agent, happened.handoff, happened.messages, facts)
    elif isinstance(happened, PauseEnded):
        if happened.timed_out:  # the run fails; its state stays forkable
            why = control.gave_up(books, control.holding(happened.pause))
            return Transition(drafted, Stop(error="PausedTooLong", message=why))
        detail, phase, words = control.went_on(books, happened.pause)
        books.event(facts.now, t.EventKind.RESUMED, detail=detail)
        return Transition(drafted, GoOn(Resumed()), ((phase, words),))
    return _turn(drafted, _resume(run.answer, books, ledger), happened, facts)


def _began(run: Run, began: Began, facts: Facts) -> Transition:
    s = run.books
    if began.check_break_tools and (why := edits.unknown_break_tools(s.breakpoints, run.first)) is not None:
        return Transition(run, Stop(error="BreakpointInvalid", message=why))
    if s.session is not None:
        return _between(run, conversation.Woke(), facts)
    if began.prompt is not None:
        progress.prompted(s, began.prompt)
    if s.live_tools:  # a fork made with --live-tools (machine/rerun.py); older histories have none
        progress.live_tools(s, facts.patched(t.FORK_LIVE_TOOLS_PATCH))
    guard = began.prompt if began.prompt is not None and run.first.input_guardrails else None
    return _turn(run, Turn(s, guard, run.ledger), Ready(), facts)


def _turn(run: Run, turn: Turn, happened: Outcome, facts: Facts) -> Transition:
    """The answer's next step: a steer is taken here (it only writes the books), a pause and a
    compaction say so; its Done ends the answer."""
    s, at = run.books, facts.now
    nxt = turn.next(happened, facts)
    while isinstance(nxt, Steer):  # a session's queued messages join the answer in progress
        for text, detail in conversation.steer(s):
            s.event(at, t.EventKind.MESSAGE, text=text, detail=detail)
        nxt = turn.next(Steered(), facts)
    if isinstance(nxt, Pause):
        holding = control.paused(s, nxt, at)
        s.event(at, t.EventKind.PAUSED, detail=f"{holding.point}: {nxt.why}")
        return Transition(replace(run, answer=_memo(turn)), nxt, ((t.Phase.PAUSED, holding.why),))
    if isinstance(nxt, HandOff):  # the next model call is the target's, through the handoff's filter
        agent, memo = s.agent_now, replace(run, answer=_memo(turn))
        planned = handoff.plan(s, agent, nxt.call)
        if isinstance(planned, Stop):
            return Transition(memo, planned)
        if planned.hook is not None:
            return Transition(memo, FilterHandoff(agent, planned))
        return _handed_off(memo, agent, planned, None, facts)
    if isinstance(nxt, Compact):
        words = f"turn {s.turn}: compacting {nxt.plan.upto} earlier messages ({nxt.plan.reason})"
        return Transition(replace(run, answer=_memo(turn)), nxt, ((t.Phase.COMPACTING, words),))
    if not isinstance(nxt, Done):
        return Transition(replace(run, answer=_memo(turn)), nxt)
    run = replace(run, answer=None)
    if s.session is None:
        progress.answered(s, nxt.output)
        s.event(at, t.EventKind.FINAL, text=nxt.output)
        words = f"final answer from {s.agent_now.name} after {s.turn} turn(s)"
        return Transition(run, Finish(words, nxt.output, nxt.output_object, done=nxt))
    s.event(at, t.EventKind.FINAL, text=nxt.output)
    exchange = conversation.answered(s, nxt, at, run.execution)
    s.event(at, t.EventKind.ANSWERED, text=nxt.output, detail=f"message {exchange.message}")
    return _between(run, conversation.Woke(), facts)


def _handed_off(
    run: Run, agent: t.AgentSpec, planned: handoff.Handoff, filtered: list[t.Message] | None, facts: Facts
) -> Transition:
    """The target takes over. What status says is set before the next step is chosen (GoOn)."""
    s = run.books
    record = handoff.handed_off(s, agent, planned, filtered, facts.now)
    if isinstance(record, Stop):
        return Transition(run, record)
    target = planned.target
    s.event(facts.now, t.EventKind.HANDOFF, detail=f"{agent.name} → {target.name}", call_id=record.call_id)
    words = f"turn {s.turn}: {agent.name} handed off to {target.name}"
    search = (t.SA_AGENT.value_set(target.name), t.SA_VERSION.value_set(target.version))
    return Transition(run, GoOn(HandedOff()), ((t.Phase.RUNNING_TOOLS, words),), search)


def _failed(run: Run, failed: Failed, facts: Facts) -> Transition:
    """A session's answer failed: that message's error; the conversation goes on."""
    s = run.books
    assert s.session is not None and run.answer is not None, "only a session's answer fails alone"
    detail = conversation.failed(s, failed.kind, failed.message, facts.now, run.execution)
    s.event(facts.now, t.EventKind.ANSWERED, text=failed.message, detail=detail)
    return _between(replace(run, answer=None), conversation.Woke(), facts)


def _between(run: Run, woke: conversation.Woke, facts: Facts) -> Transition:
    s = run.books
    nxt = conversation.between(s, run.first, facts, woke, run.execution)
    if isinstance(nxt, conversation.Answer):
        return _turn(run, Turn(s, nxt.guard, run.ledger), Ready(), facts)
    if isinstance(nxt, conversation.ContinueAsNew):
        return Transition(run, ContinueAsNew())
    if isinstance(nxt, conversation.EndSession):
        s.event(facts.now, t.EventKind.ENDED, text=nxt.why)
        output, output_object = conversation.ended(s)
        return Transition(run, Finish(f"session ended: {nxt.why}", output, output_object, ended_by=nxt.why))
    return Transition(run, nxt)


# ----------------------------------------------------------------------------- state as values


def adopt(run: Run, books: RunState, ledger: Ledger | None) -> Run:
    """Keep `run`'s state in the interpreter's live books and ledger (the objects its queries,
    handlers and steps hold), and return the run to step next, over them."""
    keep(run.books, books)
    if ledger is not None and run.ledger is not None:
        keep(run.ledger, ledger)
    return replace(run, books=books, ledger=ledger)


def _resume(memo: Answer, books: RunState, ledger: Ledger | None) -> Turn:
    """The turn's rules over `books`, remembering what `memo` holds (its fields are Turn's own)."""
    turn = Turn(books, memo.guard, ledger)
    for name in MEMO:
        setattr(turn, name, getattr(memo, name))
    return turn


def _memo(turn: Turn) -> Answer:
    return Answer(**{name: getattr(turn, name) for name in MEMO})
