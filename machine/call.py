"""One tool call's whole life, pure: asked about, decided, run, in doubt, resolved.

    start(planned, ctx)          → the call's first stage, and what to carry out
    advance(call, happened, ctx) → its next stage, and what to carry out
    refusal(call, decision)      → why a person's decision cannot apply now (None: it can)

        start ─▶ checking ─▶ asking ─▶ running ─▶ done
          │         │          │        ▲  │
          │         └─▶ done   └─▶ done │  └─▶ in_doubt ─▶ running (rerun) | done
          └─▶ running | done            └─────────────┘

    A tool that completes outside: running ─▶ outside ─▶ done | in_doubt (its timeout, to a person)

Each transition returns a new `Call` (the input is never changed), the steps the interpreter
carries out, and the events watchers see. What the call waits for is its stage (`waits_for`), so
status names it: the agent's check, a person, the tool, a person again. The rules of each step
(how a call runs, what a check, a lost attempt or a resolution means) are those of
`machine/calls.py`, shared with the 1.x workflow until it goes (docs/design-2.0.md).

No Temporal, no I/O, no clocks, no randomness: the time comes in with `Ctx`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from durable_agent_runner.machine.approvals import approval_record, decision_words, edited_note, rejection_text
from durable_agent_runner.machine.call_types import (
    DOUBT_LIMIT,
    Answered,
    AskPerson,
    AwaitOutside,
    Call,
    CheckApproval,
    Checked,
    Completed,
    Ctx,
    Decided,
    FailRun,
    Happened,
    Lost,
    Note,
    Ran,
    Resolved,
    RunTool,
    Stage,
    StartChild,
    Step,
    TimedOut,
    Transition,
    Unexpected,
)
from durable_agent_runner.machine.calls import (
    PlannedCall,
    Runs,
    answered,
    asks_first,
    attempt_ended,
    attempts,
    checked,
    describe_call,
    resolved,
    runs,
)
from durable_agent_runner.machine.doubts import resolution_words
from durable_agent_runner.machine.outside import completion_words
from durable_agent_runner.machine.outside import for_model as completed_for_model
from durable_agent_runner.machine.outside import timeout_record as outside_timeout
from durable_agent_runner.machine.questions import answer_words, for_model, parse, timeout_record
from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows.patches import ASK_PERSON_PATCH, FORK_ONCE_PATCH, IN_DOUBT_PATCH, OUTSIDE_PATCH
from durable_agent_runner.workflows.types import (
    AnswerRecord,
    ApprovalDecision,
    ApprovalRecord,
    CallResolution,
    CompletionRecord,
    EventKind,
    HookResult,
    InDoubtCall,
    ResolveCall,
    ToolMessage,
    idempotency_key,
)

__all__ = [
    "DOUBT_LIMIT",
    "Answered",
    "AskPerson",
    "AwaitOutside",
    "Call",
    "CheckApproval",
    "Checked",
    "Completed",
    "Ctx",
    "Decided",
    "FailRun",
    "Happened",
    "Lost",
    "Note",
    "Ran",
    "Resolved",
    "RunTool",
    "Stage",
    "StartChild",
    "Step",
    "TimedOut",
    "Transition",
    "Unexpected",
    "advance",
    "refusal",
    "start",
]


# ------------------------------------------------------------------------------- transitions


def start(planned: PlannedCall, turn: int, ctx: Ctx, doubted: int = 0) -> Transition:
    """`doubted`: how often the run had this call in doubt before (its doubts are numbered on)."""
    call = Call(planned=planned, turn=turn, stage=Stage.RUNNING, arguments=planned.call.arguments, doubted=doubted)
    if planned.action in ("answer", "handoff"):  # runs nothing: answered at once
        return _finish(call, answered(planned), ())
    started = _note(call, EventKind.TOOL_STARTED, detail=describe_call(planned.call))
    if planned.action == "ask":
        return _question(call, ctx, started)
    if planned.approval == "check":
        check = CheckApproval(call_id=call.call_id, tool=call.tool, arguments=call.arguments)
        return Transition(call.model_copy(update={"stage": Stage.CHECKING}), (check,), (started,))
    if planned.approval == "auto":
        earlier = ctx.always[call.tool]
        reason = f"'always' approval given by {earlier.by} for call {earlier.call_id}"
        decision = ApprovalDecision(call_id=call.call_id, approve=True, by=earlier.by, reason=reason)
        call = call.model_copy(update={"approval": approval_record(decision, call.tool, ctx.now, automatic=True)})
    return _run(call, ctx, (started,))


def advance(call: Call, happened: Happened, ctx: Ctx) -> Transition:
    if isinstance(happened, Checked) and call.stage is Stage.CHECKING:
        return _checked(call, happened.result, ctx)
    if isinstance(happened, Decided) and call.stage is Stage.ASKING:
        return _decided(call, happened.record, ctx)
    if isinstance(happened, Ran) and call.stage is Stage.RUNNING:
        if (waits := _outside(call, happened, ctx)) is not None:
            return waits
        message = ToolMessage(
            call_id=call.call_id, name=call.tool, content=happened.content, is_error=happened.is_error
        )
        return _finish(call, message, ())
    if isinstance(happened, Lost) and call.stage is Stage.RUNNING:
        return _lost(call, happened, ctx)
    if isinstance(happened, Resolved) and call.stage is Stage.IN_DOUBT:
        return _resolved(call, happened.record, ctx)
    if isinstance(happened, Answered) and call.stage is Stage.QUESTION:
        return _answered(call, happened.record)
    if isinstance(happened, TimedOut) and call.stage is Stage.QUESTION:
        spec = ctx.agent.tool(call.tool)
        assert spec is not None and spec.ask is not None  # the plan asks only for an ask tool
        return _answered(call, timeout_record(call.call_id, call.question, spec.ask, ctx.now))
    if isinstance(happened, Completed) and call.stage is Stage.OUTSIDE:
        return _completed(call, happened.record)
    if isinstance(happened, TimedOut) and call.stage is Stage.OUTSIDE:
        return _outside_timed_out(call, ctx)
    if isinstance(happened, TimedOut) and call.stage in (Stage.ASKING, Stage.IN_DOUBT):
        return _timed_out(call, ctx)
    raise Unexpected(f"{happened.kind} for {call.tool} ({call.call_id}) while it is {call.stage}")


def refusal(call: Call, decision: ApprovalDecision | ResolveCall) -> str | None:
    """Why a person's decision cannot apply to the call as it is now: it is not waiting for one
    of that kind, or the person decided on an earlier doubt than the open one (a stale page)."""
    if isinstance(decision, ApprovalDecision):
        if call.stage is not Stage.ASKING:
            return f"{call.tool} ({call.call_id}) is not waiting for approval: {call.waits_for()}"
        if decision.arguments is not None and not decision.approve:
            return "edited arguments only go with an approval"
        return None
    if call.stage is not Stage.IN_DOUBT or call.doubt is None:
        return f"{call.tool} ({call.call_id}) is not in doubt: {call.waits_for()}"
    if decision.doubt is not None and decision.doubt != call.doubt.doubt:
        return (
            f"{call.tool} ({call.call_id}) is in doubt for time {call.doubt.doubt}, not {decision.doubt}: "
            "the page decided on was out of date; look again and decide"
        )
    return None


# ------------------------------------------------------------------------------------ stages


def _checked(call: Call, result: HookResult, ctx: Ctx) -> Transition:
    verdict = checked(call.planned, result)
    if isinstance(verdict, ToolMessage):  # invalid arguments: the model is told, no person asked
        return _finish(call, verdict, ())
    if verdict == "run":
        return _run(call, ctx, ())
    timeout = ctx.agent.approval_timeout_seconds
    ask = AskPerson(call_id=call.call_id, about="approval", timeout=timedelta(seconds=timeout) if timeout else None)
    asking = call.model_copy(update={"stage": Stage.ASKING, "asked": result.arguments or {}})
    note = _note(call, EventKind.APPROVAL_REQUESTED, detail=describe_call(call.planned.call))
    return Transition(asking, (ask,), (note,))


def _decided(call: Call, record: ApprovalRecord, ctx: Ctx) -> Transition:
    decided = (_note(call, EventKind.APPROVAL_DECIDED, detail=decision_words(record)),)
    call = call.model_copy(update={"approval": record})
    if not record.approved:
        message = ToolMessage(call_id=call.call_id, name=call.tool, content=rejection_text(record), is_error=True)
        return _finish(call, message, decided)
    if record.arguments is not None:
        call = call.model_copy(update={"arguments": json.dumps(record.arguments, ensure_ascii=False)})
    return _run(call, ctx, decided)


def _how(call: Call, ctx: Ctx) -> Runs:
    """How the call runs (`calls.runs`: the tool's own setting). Runs recorded before calls could
    be in doubt ran a once tool as any other (none had one)."""
    how = runs(call.planned, ctx.agent, call.arguments)
    return "activity" if how == "once" and not ctx.patched(IN_DOUBT_PATCH) else how


def _run(call: Call, ctx: Ctx, notes: tuple[Note, ...]) -> Transition:
    how = _how(call, ctx)
    running = call.model_copy(update={"stage": Stage.RUNNING, "scheduled_at": ctx.now})
    if how == "child":
        child = StartChild(call_id=call.call_id, target=call.planned.target, arguments=call.arguments)
        return Transition(running, (child,), notes)
    if how == "with_reply":  # the model's activity ran it with the reply: nothing to carry out
        ran = call.planned.ran
        assert ran is not None
        message = ToolMessage(call_id=call.call_id, name=call.tool, content=ran.output, is_error=ran.is_error)
        return _finish(running, message, notes)
    spec = ctx.agent.tool(call.tool)
    if spec is None:
        raise Unexpected(f"{call.tool} is not a tool of {ctx.agent.name}: the plan answers unknown tools itself")
    first = call.doubt is None and asks_first(call.planned, how, call.approval is not None)
    if first and ctx.patched(FORK_ONCE_PATCH):
        origin = ctx.forked_from or "the run this fork was taken from"
        ended = (
            f"not run in this fork: it ran in {origin}; a --live-tools fork runs a once call again only "
            "when a person says so"
        )
        return _in_doubt(call, ctx, ended, None, origin, notes)
    lost = call.doubt if call.doubt is not None and call.doubt.fork_of is None else None
    suffix = f"-rerun-{lost.doubt}" if lost is not None else ""  # the idempotency key stays the call's
    tool = RunTool(
        call_id=call.call_id,
        tool=call.tool,
        arguments=call.arguments,
        how=how,
        attempts=attempts(how, spec),
        activity_id=f"tool-{call.turn}-{call.call_id}{suffix}",
        idempotency_key=idempotency_key(ctx.run_id, call.call_id),
    )
    return Transition(running, (tool,), notes)


def _lost(call: Call, lost: Lost, ctx: Ctx) -> Transition:
    how = _how(call, ctx)
    spec = ctx.agent.tool(call.tool)
    tries = attempts(how, spec) if spec is not None else 1
    message = attempt_ended(call.planned, how, lost.end, lost.why, tries)
    if message is not None:  # the model learns the tool failed
        return _finish(call, message, ())
    return _in_doubt(call, ctx, lost.ended, lost.started_at, None, ())


def _in_doubt(
    call: Call, ctx: Ctx, ended: str, started_at: datetime | None, fork_of: str | None, notes: tuple[Note, ...]
) -> Transition:
    """The call waits for a person: its attempt ended without a result (`ended` says how), or a
    live fork would run it again (`fork_of`)."""
    previous = call.doubt.doubt if call.doubt is not None else call.doubted
    args = call.args
    doubt = InDoubtCall(
        call_id=call.call_id,
        tool=call.tool,
        arguments=args if args is not None else call.arguments,
        turn=call.turn,
        doubt=previous + 1,
        scheduled_at=call.scheduled_at or ctx.now,
        started_at=started_at,
        ended_at=ctx.now,
        ended=ended,
        idempotency_key=idempotency_key(ctx.run_id, call.call_id),
        fork_of=fork_of,
    )
    timeout = ctx.agent.approval_timeout_seconds
    ask = AskPerson(call_id=call.call_id, about="doubt", timeout=timedelta(seconds=timeout) if timeout else DOUBT_LIMIT)
    note = _note(call, EventKind.CALL_IN_DOUBT, detail=ended if fork_of else f"ended without a result: {ended}")
    waiting = call.model_copy(update={"stage": Stage.IN_DOUBT, "doubt": doubt})
    return Transition(waiting, (ask,), (*notes, note))


def _resolved(call: Call, record: CallResolution, ctx: Ctx) -> Transition:
    note = _note(call, EventKind.CALL_RESOLVED, detail=resolution_words(record))
    outcome = resolved(call.planned, record)
    if outcome == "rerun":
        return _run(call.model_copy(update={"reruns": call.reruns + 1}), ctx, (note,))
    return _finish(call, outcome, (note,))


def _question(call: Call, ctx: Ctx, started: Note) -> Transition:
    """An `ask_person` call: its question goes to a person, whose answer is the call's result.
    Runs recorded before 1.4 never had the tool; a run that did is told so, as for an unknown tool."""
    spec = ctx.agent.tool(call.tool)
    if spec is None or spec.ask is None or not ctx.patched(ASK_PERSON_PATCH):
        message = f"error: {call.tool} needs workers of release 1.4 or later"
        return _finish(call, ToolMessage(call_id=call.call_id, name=call.tool, content=message, is_error=True), ())
    parsed = parse(call.args)
    if isinstance(parsed, str):  # the model is told what is wrong: no person is asked
        return _finish(call, ToolMessage(call_id=call.call_id, name=call.tool, content=parsed, is_error=True), ())
    question, choices = parsed
    asking = call.model_copy(
        update={"stage": Stage.QUESTION, "question": question, "choices": tuple(choices) if choices else None}
    )
    shown = "; ".join(f"{n}. {c}" for n, c in enumerate(choices or [], 1))
    asked = _note(call, EventKind.QUESTION_ASKED, text=excerpt(question), detail=shown or "free text")
    ask = AskPerson(call_id=call.call_id, about="question", timeout=timedelta(seconds=spec.ask.timeout_seconds))
    return Transition(asking, (ask,), (started, asked))


def _answered(call: Call, record: AnswerRecord) -> Transition:
    message = ToolMessage(call_id=call.call_id, name=call.tool, content=for_model(record), answer=record)
    note = _note(call, EventKind.QUESTION_ANSWERED, text=excerpt(record.answer), detail=answer_words(record))
    return _finish(call, message, (note,))


def _outside(call: Call, ran: Ran, ctx: Ctx) -> Transition | None:
    """A tool that completes outside started the work and returned: the call waits for the
    completion (None: it ends as any other, with what the tool returned: its error, or runs
    recorded before 1.4, which had no such tool)."""
    spec = ctx.agent.tool(call.tool)
    if spec is None or spec.outside is None or ran.is_error or not ctx.patched(OUTSIDE_PATCH):
        return None
    waiting = call.model_copy(update={"stage": Stage.OUTSIDE, "started": ran.content})
    wait = AwaitOutside(call_id=call.call_id, timeout=timedelta(seconds=spec.outside.timeout_seconds))
    until = f"within {spec.outside.timeout_seconds:g}s, then {spec.outside.on_timeout.replace('_', ' ')}"
    note = _note(call, EventKind.OUTSIDE_WAITING, text=excerpt(ran.content), detail=until)
    return Transition(waiting, (wait,), (note,))


def _completed(call: Call, record: CompletionRecord) -> Transition:
    content, is_error = completed_for_model(record)
    message = ToolMessage(call_id=call.call_id, name=call.tool, content=content, is_error=is_error)
    note = _note(call, EventKind.OUTSIDE_COMPLETED, text=excerpt(content), detail=completion_words(record))
    return _finish(call.model_copy(update={"completion": record}), message, (note,))


def _outside_timed_out(call: Call, ctx: Ctx) -> Transition:
    """No completion in time: the model is told, or the call goes to a person, in doubt (they give
    its result, fail it, or run its start again)."""
    spec = ctx.agent.tool(call.tool)
    assert spec is not None and spec.outside is not None  # only such a tool's call waits outside
    record = outside_timeout(call.call_id, call.tool, spec.outside, ctx.now)
    if spec.outside.on_timeout == "tell_model":
        return _completed(call, record)
    note = _note(call, EventKind.OUTSIDE_COMPLETED, detail=f"{record.fail}: a person decides")
    return _in_doubt(call, ctx, record.fail or "", None, None, (note,))


def _timed_out(call: Call, ctx: Ctx) -> Transition:
    agent, what = ctx.agent, describe_call(call.planned.call)
    if call.stage is Stage.IN_DOUBT:
        limit = agent.approval_timeout_seconds or DOUBT_LIMIT.total_seconds()
        message = f"{call.tool} ({call.call_id}) stayed in doubt for {limit:g}s: no one resolved it"
        return Transition(call, (FailRun(error="CallInDoubt", message=message),))
    if agent.approval_timeout_outcome == "fail":
        message = f"no decision on {what} ({call.call_id}) within {agent.approval_timeout_seconds or 0:g}s"
        return Transition(call, (FailRun(error="ApprovalTimedOut", message=message),))
    timed_out = ApprovalDecision(
        call_id=call.call_id, approve=False, by="timeout", reason=agent.approval_timeout_reason
    )
    return _decided(call, approval_record(timed_out, call.tool, ctx.now, automatic=True), ctx)


def _finish(call: Call, message: ToolMessage, notes: tuple[Note, ...]) -> Transition:
    record = call.approval
    if record is not None and record.approved and record.arguments is not None:
        message = message.model_copy(update={"content": edited_note(record) + message.content})
    message = message.model_copy(update={"approval": record})
    done = call.model_copy(update={"stage": Stage.DONE, "message": message})
    finished = _note(call, EventKind.TOOL_FINISHED, text=excerpt(message.content))
    return Transition(done, (), (*notes, finished))


def _note(call: Call, kind: EventKind, *, text: str = "", detail: str = "") -> Note:
    return Note(kind=kind, call_id=call.call_id, tool=call.tool, text=text, detail=detail)
