"""A person's control of a running run, decided here: whether a pause, a resume (with a budget
raise) or an edit may be taken now, and what taking it does to the run. Pure: the update
validators raise what `check_*` raises (DecisionRefused, its kind the error's type) before
anything is recorded, and the handlers carry out what the rest returns (machine/edits.py does
an edit itself).

What reaches the run at the door is taken whole here too: a decision on a call, a resolution of
a doubt, a session's message, a pause, a resume, an edit, each with what status says and the
story's event. The handlers (workflows/handlers.py) and the pure driver (tests/pure_run.py) call
these same rules through machine/drafts.take; neither writes words of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from durable_agent_runner.machine import edits, progress, texts
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.progress import person_waits
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import Pause
from durable_agent_runner.workflows import types as t

PAUSE_LIMIT = timedelta(days=30)  # a paused run waits this long for a resume, then fails (forkable)


def pause_requested(request: t.PauseRequest) -> str:
    """What status says of a run asked to pause, until it does (RunState.step_words keeps it said)."""
    return texts.pause_requested(request.by)


def check_pause(s: RunState) -> None:
    if s.done:
        raise DecisionRefused("RunEnded", "the run has ended: fork it to go on from a turn")
    if s.paused is not None:
        raise DecisionRefused("AlreadyPaused", f"the run is already paused ({s.paused.why})")
    asked = s.pause_request
    if asked is not None:  # refused, not taken again: the first asker's name and reason stay on record
        why = f" ({asked.reason})" if asked.reason else ""
        raise DecisionRefused(
            "PauseAlreadyRequested",
            f"a pause is already requested by {asked.by}{why}: the run pauses at its next safe point "
            "(resume withdraws the request)",
        )


def pause(s: RunState, request: t.PauseRequest) -> str:
    """The request kept: the run pauses at its next safe point. What status says now (said)."""
    if s.pause_request is None:  # what the run was doing, said again if the request is withdrawn
        s.before_pause = s.last_step
    s.pause_request = request
    waits = person_waits(s)  # a person is waited for first: status keeps saying so
    said = f"{waits[1]}; {pause_requested(request)}" if waits is not None else pause_requested(request)
    progress.say(s, said)
    return said


def check_resume(s: RunState, ledger: Ledger | None, request: t.ResumeRequest, between: bool = False) -> None:
    """A resume needs a pause or a pause request; a run paused on its budget goes on only once
    raised; a raise needs a budget of its kind, and a child's stays within its parent's grant.
    `between`: the run takes a raise alone while it is a session waiting for its next message
    (session-raise-2.0.4), so a session whose budget is spent can go on."""
    raising = bool(request.add_tokens or request.add_usd)
    waiting = between and s.session is not None and s.phase is t.Phase.WAITING_FOR_MESSAGE
    if s.paused is None and s.pause_request is None and not (waiting and raising):
        also = ""
        if waiting:
            also = ": a session waiting for a message takes a budget raise (--add-tokens N or --add-usd X)"
        elif between and raising and s.session is not None:  # it is answering a message
            also = ": a session answering a message takes a raise once paused (client.py pause RUN_ID)"
        raise DecisionRefused("NotPaused", "the run is not paused" + also)
    if s.resumed_by is not None:
        raise DecisionRefused("NotPaused", f"already resumed by {s.resumed_by}")
    if s.paused is not None and s.paused.reason == "budget" and not raising:
        message = "the run is paused on its budget: raise it (--add-usd X or --add-tokens N), or cancel it"
        raise DecisionRefused("BudgetNotRaised", message)
    if raising and ledger is None:
        raise DecisionRefused("NoBudget", "this run has no budget to raise")
    refused = ledger.refuse_raise(request) if ledger is not None else None
    if refused is not None:
        raise DecisionRefused("NoBudget", refused)
    beyond = ledger.beyond_grant(request) if ledger is not None else None
    if beyond is not None:
        raise DecisionRefused("BeyondParentGrant", beyond)


@dataclass(frozen=True)
class Resumed:
    """What a resume did: the events it makes (kind, detail) and, when it withdrew a request the
    run had said nothing since, what status says again."""

    events: tuple[tuple[t.EventKind, str], ...]
    say: str | None = None


def resume(s: RunState, ledger: Ledger | None, request: t.ResumeRequest, now: datetime) -> Resumed:
    """The budget raised, if asked; a paused run goes on (its pause ends as it wakes), a request
    not yet taken is withdrawn. Its events told, and what status says again (`Resumed`)."""
    done = _resumed(s, ledger, request)
    for kind, detail in done.events:
        s.event(now, kind, detail=detail)
    if done.say is not None:
        progress.say(s, done.say)
    return done


def _resumed(s: RunState, ledger: Ledger | None, request: t.ResumeRequest) -> Resumed:
    events: list[tuple[t.EventKind, str]] = []
    if ledger is not None and (request.add_tokens or request.add_usd):
        ledger.raised(request)
        raised = texts.raised(request.add_tokens, request.add_usd)
        events.append((t.EventKind.BUDGET_RAISED, f"{raised} by {request.by}"))
    if s.paused is not None:
        s.resumed_by = request.by
        return Resumed(tuple(events))
    if s.pause_request is None:  # a session's raise between messages: there is nothing to resume
        return Resumed(tuple(events))
    asked, s.pause_request = s.pause_request, None
    events.append((t.EventKind.RESUMED, f"pause request withdrawn by {request.by}"))
    return Resumed(tuple(events), _unsaid(s, asked))


def _unsaid(s: RunState, asked: t.PauseRequest | None) -> str | None:
    """What status says once a pause request is withdrawn: what it said before the request, if
    it has said nothing since; the wait for a person it names, without the request's words, if
    that is what it says (`pause` put them after it); None: it said something else since."""
    if asked is None:
        return None
    words = pause_requested(asked)
    if s.last_step == words:
        return s.before_pause
    return s.last_step.removesuffix(f"; {words}") if s.last_step.endswith(f"; {words}") else None


def check_edit(s: RunState, edit: t.Edit) -> None:
    """An edit applies to a paused run only, and only as edits.apply takes it (tried on a copy)."""
    if s.paused is None or s.resumed_by is not None:
        raise DecisionRefused("NotPaused", "the run is not paused: pause it first (client.py pause RUN_ID)")
    try:
        edits.apply(edit, s.editable())
    except edits.EditRefused as refused:
        raise DecisionRefused(refused.kind, str(refused)) from None


def take_edit(s: RunState, edit: t.Edit, now: datetime) -> t.EditRecord:
    """An edit taken (a person's, checked by the validator, or a breakpoint function's): it
    applies to the run, its record is kept and told. EditRefused, before anything changes."""
    state = s.editable()
    summary = edits.apply(edit, state)
    s.take_edit(state)
    record = t.EditRecord(edit=edit, at=now, turn=s.turn, summary=summary)
    s.edits.append(record)
    s.event(now, t.EventKind.EDITED, detail=record.summary)
    return record


def decision(s: RunState, decision: t.ApprovalDecision, now: datetime) -> t.ApprovalRecord:
    """A decision on a waiting call (checked by Approvals.check): recorded, and said. The waiting
    call takes it up (machine/call.py) and tells the story (`approval_decided`)."""
    record = s.approvals.apply(decision, now)
    progress.decided(s, record)
    return record


def resolution(s: RunState, decision: t.ResolveCall, now: datetime) -> t.CallResolution:
    """A resolution of a call in doubt (checked by Doubts.check): recorded, and said."""
    record = s.doubts.apply(decision, now)
    progress.resolved_doubt(s, record)
    return record


def message(s: RunState, message: t.SessionMessage, now: datetime, *, opening: bool = False) -> t.MessageReceipt:
    """A session's message (checked by SessionState.check) accepted: queued, or steering the
    answer in progress for an agent that steers (never the opening prompt, message 1); told in
    the story unless it was sent before (the same message id: counted once)."""
    assert s.session is not None, "not a session"
    steer = not opening and s.agent is not None and s.agent.mid_turn == "steer"
    receipt = s.session.accept(message, now, steer)
    if not receipt.duplicate:
        how = f" · {receipt.queued} ahead" if receipt.queued else ""
        how = " · steers the answer in progress" if receipt.steer else how
        detail = f"message {receipt.message} from {message.by}{how}"
        s.event(now, t.EventKind.MESSAGE, text=message.text, detail=detail)
    return receipt


def breakpoint_ended(
    s: RunState, name: str, result: t.HookResult, now: datetime
) -> tuple[list[t.EditRecord], str | None]:
    """The agent's breakpoint function answered: its edits taken in order (the first refused one
    stops there), and why the run pauses, if it asked to or an edit was refused."""
    taken = []
    for edit in result.edits:
        try:
            taken.append(take_edit(s, edit.model_copy(update={"by": f"breakpoint function {name}"}), now))
        except edits.EditRefused as refused:
            return taken, f"breakpoint function {name}: its edit was refused: {refused}"
    if result.pause is not None:
        return taken, f"breakpoint function {name}: {result.pause or 'pause'}"
    return taken, None


@dataclass(frozen=True)
class Holding:
    """A pause taken: where, in words, and what the run waits on."""

    point: str  # "before model call 3", "before the tool calls of turn 3"
    why: str  # the phase's words


def holding(step: Pause) -> Holding:
    """Where the run holds still at `step`, in words."""
    point = texts.pause_point(step.where, step.turn)
    return Holding(point, f"paused {point}: {step.why}")


def paused(s: RunState, step: Pause, now: datetime) -> Holding:
    """The run holds still at `step` until a resume (a request is used up by it)."""
    s.pause_request, s.resumed_by = None, None
    s.paused = t.PauseInfo(where=step.where, turn=step.turn, why=step.why, at=now, reason=step.reason)
    return holding(step)


def went_on(s: RunState, step: Pause) -> tuple[str, t.Phase, str]:
    """The pause over, resumed by a person: the event's detail, and the phase and words it goes on with."""
    by = s.resumed_by
    s.paused = None
    phase = t.Phase.RUNNING_TOOLS if step.where == "before_tools" else t.Phase.CALLING_MODEL
    return f"by {by}", phase, f"resumed by {by}"


def gave_up(s: RunState, holding: Holding) -> str:
    """No resume within PAUSE_LIMIT: the run fails, with this message (its state stays forkable)."""
    s.paused = None
    return f"paused {holding.point} for {PAUSE_LIMIT.days} days without a resume (fork it to go on)"


def waits_as(s: RunState, call_id: str, besides: object = None) -> str:
    """What call `call_id` waits for in a book other than `besides`, and the verb that acts on it,
    for a refusal that named the wrong verb ("no question waits with call_3_0": it waits for
    approval); "" if it waits for nothing else."""
    books: list[tuple[object, Mapping[str, object], str]] = [
        (s.approvals, s.approvals.pending, "waits for approval: approve or reject it"),
        (s.doubts, s.doubts.pending, "is in doubt: resolve it"),
        (s.questions, s.questions.pending, "waits for a person's answer: answer it"),
        (s.outside, s.outside.pending, "waits for an outside completion: complete it"),
    ]
    return next(
        (f"call {call_id} {verb}" for book, pending, verb in books if book is not besides and call_id in pending), ""
    )
