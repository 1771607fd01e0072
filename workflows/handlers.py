"""What the run's handlers do: the signals, updates and queries through which people and other
runs reach it. `AgentRun` declares each handler (its name and description, in workflows/agent.py)
and hands the body to `Inbox`. Each takes one pydantic model; a decision, message or edit is
checked by the update's validator (or, for a signal, here) with the machine's checks before
anything is recorded.

Determinism rules as for all of workflows/: no I/O, no clocks, no randomness, no threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from durable_agent_runner.machine import control
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.session import Refused, SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.steps import Steps

MAX_CHILD_LEDGERS = 100  # cancelled children's usage not yet counted (each is read once, then dropped)


class Inbox:
    """What reaches a run from outside while it runs, recorded in its books at the door."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.s = steps.s
        self.raise_between = False  # a session takes a budget raise between messages (session-raise-2.0.4)

    def child_usage(self, ledger: t.ChildUsage) -> None:
        mine = ledger.child_id.startswith(workflow.info().workflow_id + ".")  # only this run's children
        if mine and len(self.steps.child_usage) < MAX_CHILD_LEDGERS:
            self.steps.child_usage[ledger.child_id] = ledger

    # ------------------------------------------------------------------------------ approvals

    def approval_signal(self, body: RawValue) -> None:
        """For `temporal workflow signal` and the Web UI. A body that does not parse, or a refused
        decision, is ignored and kept in the status so the sender can see why (the SDK would
        otherwise drop an undecodable signal with only a worker log line); a repeated one counts once."""
        try:
            decision = workflow.payload_converter().from_payload(body.payload, t.ApprovalDecision)
            self.s.approvals.check(decision, self.steps.agent_or_none())
        except DecisionRefused as refused:
            return self._ignore(str(refused))
        except Exception as bad:  # any undecodable body: the converter's errors vary by payload
            return self._ignore(f"approval signal body is not a decision: {str(bad)[:300]}")
        if self.s.done:
            return self._ignore(f"call {decision.call_id}: the run has ended")
        self.decide(decision)

    def _ignore(self, reason: str) -> None:
        workflow.logger.warning("approval signal ignored: %s", reason)
        self.steps.take(lambda s, _: s.approvals.ignore(reason))

    def check_approval(self, decision: t.ApprovalDecision) -> None:
        hint = control.waits_as(self.s, decision.call_id, besides=self.s.approvals)
        checked(self.s.approvals.check, decision, self.steps.agent_or_none(), hint=hint)

    def decide(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        record = self.steps.take(lambda s, _: control.decision(s, decision, workflow.now()))
        return t.DecisionReceipt(call_id=decision.call_id, approved=record.approved, recorded_at=record.at)

    # ------------------------------------------------------------------------------ in doubt

    def resolve_signal(self, body: RawValue) -> None:
        """For `temporal workflow signal` and the Web UI; a refused or undecodable body is kept in
        the status, as for the approval signal."""
        try:
            decision = workflow.payload_converter().from_payload(body.payload, t.ResolveCall)
            self.s.doubts.check(decision)
        except DecisionRefused as refused:
            return self._ignore(str(refused))
        except Exception as bad:  # any undecodable body: the converter's errors vary by payload
            return self._ignore(f"resolve signal body is not a resolution: {str(bad)[:300]}")
        self.resolve(decision)

    def check_resolve(self, decision: t.ResolveCall) -> None:
        checked(self.s.doubts.check, decision, hint=control.waits_as(self.s, decision.call_id, besides=self.s.doubts))

    def resolve(self, decision: t.ResolveCall) -> t.ResolveReceipt:
        record = self.steps.take(lambda s, _: control.resolution(s, decision, workflow.now()))
        return t.ResolveReceipt(call_id=record.call_id, action=record.action, by=record.by, recorded_at=record.at)

    # ------------------------------------------------------------- questions, outside completions

    def check_answer(self, answer: t.AnswerQuestion) -> None:
        checked(self.s.questions.check, answer, hint=control.waits_as(self.s, answer.call_id, besides=self.s.questions))

    def answer(self, answer: t.AnswerQuestion) -> t.AnswerReceipt:
        record = self.steps.take(lambda s, _: s.questions.apply(answer, workflow.now()))
        return t.AnswerReceipt(
            call_id=record.call_id, answer=record.answer, choice=record.choice, by=record.by, recorded_at=record.at
        )

    def check_complete(self, completion: t.CompleteCall) -> None:
        hint = control.waits_as(self.s, completion.call_id, besides=self.s.outside)
        checked(self.s.outside.check, completion, hint=hint)

    def complete(self, completion: t.CompleteCall) -> t.CompleteReceipt:
        record = self.steps.take(lambda s, _: s.outside.apply(completion, workflow.now()))
        outcome = "fail" if record.fail is not None else "result"
        return t.CompleteReceipt(call_id=record.call_id, outcome=outcome, by=record.by, recorded_at=record.at)

    # ------------------------------------------------------------------------------ sessions

    def check_send(self, message: t.SessionMessage) -> None:
        checked(self.session().check, message, self.s.done)

    def send(self, message: t.SessionMessage) -> t.MessageReceipt:
        self.session()
        return self.steps.take(lambda s, _: control.message(s, message, workflow.now()))

    def opening(self, message: t.SessionMessage) -> None:
        """A session's opening prompt, message 1 (never a steer: nothing is being answered yet)."""
        self.steps.take(lambda s, _: control.message(s, message, workflow.now(), opening=True))

    def check_end(self, end: t.EndSession) -> None:
        self.session()
        if self.s.done:
            raise ApplicationError("the session has ended", type="SessionEnded", non_retryable=True)

    def end(self, end: t.EndSession) -> t.EndReceipt:
        self.session()
        return self.steps.take(lambda s, _: _session(s).end(end))

    def session(self) -> SessionState:
        if self.s.session is None:
            raise ApplicationError(
                f"{t.NOT_A_SESSION}: start one with `client.py chat`", type="NotASession", non_retryable=True
            )
        return self.s.session

    # ---------------------------------------------------------------------------------- debug

    def check_pause(self, request: t.PauseRequest) -> None:
        checked(control.check_pause, self.s)

    def pause(self, request: t.PauseRequest) -> t.RunStatus:
        self.steps.take(lambda s, _: control.pause(s, request))
        return self.status()

    def check_resume(self, request: t.ResumeRequest) -> None:
        checked(control.check_resume, self.s, self.steps.ledger, request, self.raise_between)

    def resume(self, request: t.ResumeRequest) -> t.RunStatus:
        self.steps.take(lambda s, ledger: control.resume(s, ledger, request, workflow.now()))
        return self.status()

    def check_edit(self, edit: t.Edit) -> None:
        checked(control.check_edit, self.s, edit)

    def edit(self, edit: t.Edit) -> t.EditReceipt:
        record = self.steps.take(lambda s, _: control.take_edit(s, edit, workflow.now()))
        return t.EditReceipt(summary=record.summary, items=len(self.s.messages))

    # -------------------------------------------------------------------------------- queries

    def status(self) -> t.RunStatus:
        status = self.s.status(workflow.info().workflow_id)
        if self.steps.ledger is not None:
            status.budget = self.steps.ledger.status(self.s.usage)
        return status

    def fork_point(self, query: t.ForkQuery) -> t.ForkPoint:
        try:
            return self.s.fork_point(query.turn)
        except ValueError as err:
            raise ApplicationError(str(err), type="CannotFork") from None

    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        try:
            return self.s.model_context(query)
        except ValueError as err:
            raise ApplicationError(str(err)) from None


def checked(check: Callable[..., None], *args: Any, hint: str = "") -> None:
    """A validator: the machine's check, its refusal raised as the update's error (nothing recorded).
    `hint`: what the call waits for instead (control.waits_as), added when the call is not this verb's."""
    try:
        check(*args)
    except (DecisionRefused, Refused) as refused:
        said = f"{refused}; {hint}" if hint and refused.kind in ("UnknownCall", "NotInDoubt") else str(refused)
        raise ApplicationError(said, type=refused.kind, non_retryable=True) from None


def _session(s: RunState) -> SessionState:
    assert s.session is not None  # checked by `Inbox.session` first
    return s.session
