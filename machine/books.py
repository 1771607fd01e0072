"""The run's books, kept with each call's transition (machine/call.py): who waits for a person
(approvals, questions, calls in doubt) or for a system (outside completions), and every answer
the run gave itself (an earlier "always", a timeout's default). Status, queries and the update
validators read these books. Pure; the workflow calls `took` for every transition it carries out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durable_agent_runner.machine import call as machine
from durable_agent_runner.machine import progress
from durable_agent_runner.machine.phase import CallDoing, Status, person_waits
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

WAITS = (machine.Stage.ASKING, machine.Stage.IN_DOUBT, machine.Stage.QUESTION)  # a person is asked
# What status says a call does while it is at a stage (waiting for a person has its own words).
DOING: dict[machine.Stage, CallDoing] = {
    machine.Stage.CHECKING: "checking", machine.Stage.RUNNING: "running", machine.Stage.OUTSIDE: "outside"
}  # fmt: skip


@dataclass(frozen=True)
class Took:
    """What a call's transition leaves the interpreter to tell Temporal: whether what status says
    changed (the Web UI's current details), and the phase to set when a wait for a person started
    or ended with it (a phase change may write search attributes: a command)."""

    said: bool
    phase: tuple[t.Phase, str] | None


def record(
    s: RunState, tracker: Status, agent: t.AgentSpec, moved: machine.Transition, before: machine.Stage | None,
    now: datetime, ahead_began: datetime | None = None,
) -> Took:  # fmt: skip
    """A call's transition from stage `before`, carried into the run: its books (`took`), a
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
    outside = machine.Stage.OUTSIDE
    if said is None and not refresh and (c.stage is outside) is not (before is outside):
        waits = person_waits(s)  # a sibling's outside wait came or went while a person is waited for
        said = waits[1] if waits is not None else None  # the words change, not the phase
    if said is not None:
        progress.say(s, said)
    return Took(said is not None, tracker.waiting(s) if refresh else None)


def took(
    s: RunState, agent: t.AgentSpec, moved: machine.Transition, before: machine.Stage | None, now: datetime
) -> bool:
    """The call's transition from stage `before`, written into the books; whether a wait for a
    person started or ended with it (the run's phase changes then)."""
    c = moved.call
    if c.stage is machine.Stage.ASKING and before is not machine.Stage.ASKING:
        s.approvals.request(c.call_id, c.tool, c.asked or {}, c.turn, now)
    if c.stage is machine.Stage.IN_DOUBT and before is not machine.Stage.IN_DOUBT:
        assert c.doubt is not None
        s.doubts.mark(c.doubt)
    if c.stage is machine.Stage.QUESTION and before is not machine.Stage.QUESTION:
        s.questions.ask(pending_question(moved, now))
    _outside(s, agent, moved, before, now)
    answer = c.message.answer if c.message is not None else None
    if answer is not None and s.questions.answered(c.call_id) is None:
        s.questions.settle(answer)  # the run's own: the question's timeout and its default
    if c.approval is not None and s.approvals.decided(c.call_id) is None:
        s.approvals.settle(c.approval)  # the run's own: an earlier "always", an approval timeout
    return before in WAITS or (c.stage in WAITS and before is not c.stage)


def pending_question(moved: machine.Transition, now: datetime) -> t.PendingQuestion:
    c = moved.call
    ask = next(step for step in moved.steps if isinstance(step, machine.AskPerson))
    choices = list(c.choices) if c.choices is not None else None
    deadline = now + ask.timeout if ask.timeout is not None else None
    return t.PendingQuestion(
        call_id=c.call_id, question=c.question, choices=choices, since=now, turn=c.turn, deadline=deadline
    )


def _outside(
    s: RunState, agent: t.AgentSpec, moved: machine.Transition, before: machine.Stage | None, now: datetime
) -> None:
    """The book of outside waits: a wait that starts, one the run ended itself (its timeout,
    told to the model), one that went to a person."""
    c = moved.call
    if c.stage is machine.Stage.OUTSIDE and before is not machine.Stage.OUTSIDE:
        spec = agent.tool(c.tool)
        wait = next(step for step in moved.steps if isinstance(step, machine.AwaitOutside))
        assert spec is not None and spec.outside is not None
        pending = t.PendingOutside(
            call_id=c.call_id, tool=c.tool, turn=c.turn, since=now, deadline=now + wait.timeout,
            started=c.started[:2000], on_timeout=spec.outside.on_timeout,
        )  # fmt: skip
        s.outside.wait(pending, spec.outside)
    elif before is machine.Stage.OUTSIDE:
        record = c.completion
        if record is not None and record.automatic:
            s.outside.settle(record)
        elif record is None:
            s.outside.expire(c.call_id)  # to a person: in doubt
