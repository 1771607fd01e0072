"""The run's books, kept with each call's transition (machine/call.py): who waits for a person
(approvals, questions, calls in doubt) or for a system (outside completions), and every answer
the run gave itself (an earlier "always", a timeout's default). Status, queries and the update
validators read these books. Pure; the workflow calls `took` for every transition it carries out.
"""

from __future__ import annotations

from datetime import datetime

from durable_agent_runner.machine import call as machine
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

WAITS = (machine.Stage.ASKING, machine.Stage.IN_DOUBT, machine.Stage.QUESTION)  # a person is asked


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
