"""The run's handlers: the signals, updates and queries through which people and other runs reach
it. Each takes one pydantic model; a decision, message or edit is checked by the update's
validator (or, for the approval signal, by the handler) before anything is recorded.

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
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.call_steps import CallSteps

MAX_CHILD_LEDGERS = 100  # cancelled children's usage not yet counted (each is read once, then dropped)


class Handlers(CallSteps):
    """What reaches a run from outside while it runs; `AgentRun` adds the loop."""

    def _agent_now(self) -> t.AgentSpec | None:
        return self._s.agent_now if self._s.agent is not None else None

    def _edited(self, record: t.EditRecord) -> None:
        """An edit taken (machine/control.take_edit): watchers and the Web UI hear of it."""
        self._event(t.EventKind.EDITED, detail=record.summary)
        workflow.set_current_details(self._s.details())

    @workflow.signal(name=t.CHILD_USAGE_SIGNAL, description="Internal: what a cancelled child run spent.")
    def child_usage(self, ledger: t.ChildUsage) -> None:
        mine = ledger.child_id.startswith(workflow.info().workflow_id + ".")  # only this run's children
        if mine and len(self._child_usage) < MAX_CHILD_LEDGERS:
            self._child_usage[ledger.child_id] = ledger

    # ------------------------------------------------------------------------------ approvals

    @workflow.signal(
        name=t.APPROVAL_SIGNAL,
        description='Decide on a pending tool call: {"call_id": "call_…", "approve": true, "by": "you"}; '
        'reject with {"call_id": …, "approve": false, "reason": "…"}; edit with "arguments": {…}; '
        '"always": true approves later calls of that tool. The pending calls are in the current details.',
    )
    def approval_signal(self, body: RawValue) -> None:
        """For `temporal workflow signal` and the Web UI. A body that does not parse, or a refused
        decision, is ignored and kept in the status so the sender can see why (the SDK would
        otherwise drop an undecodable signal with only a worker log line); a repeated one counts once."""
        try:
            decision = workflow.payload_converter().from_payload(body.payload, t.ApprovalDecision)
            self._s.approvals.check(decision, self._agent_now())
        except DecisionRefused as refused:
            return self._ignore(str(refused))
        except Exception as bad:  # any undecodable body: the converter's errors vary by payload
            return self._ignore(f"approval signal body is not a decision: {str(bad)[:300]}")
        if self._s.done:
            return self._ignore(f"call {decision.call_id}: the run has ended")
        self._decide(decision)

    def _ignore(self, reason: str) -> None:
        workflow.logger.warning("approval signal ignored: %s", reason)
        self._s.approvals.ignore(reason)

    @workflow.update(
        name=t.APPROVAL_UPDATE,
        description="Like the approval signal, but a bad decision is refused before anything is recorded.",
    )
    def approval_update(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        return self._decide(decision)

    @approval_update.validator
    def _validate_approval(self, decision: t.ApprovalDecision) -> None:
        _checked(self._s.approvals.check, decision, self._agent_now())

    def _decide(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        record = self._s.approvals.apply(decision, workflow.now())
        self._record_decision(record)
        return t.DecisionReceipt(call_id=decision.call_id, approved=record.approved, recorded_at=record.at)

    # ------------------------------------------------------------------------------ in doubt

    @workflow.signal(
        name=t.RESOLVE_SIGNAL,
        description='Resolve a call in doubt (its one attempt ended without a result): {"call_id": "call_…", '
        '"action": "rerun", "by": "you"}; or "action": "result" with "result": "<JSON text of what it returned>"; '
        'or "action": "fail" with "reason": "…" (told to the model). The calls in doubt are in the current details.',
    )
    def resolve_signal(self, body: RawValue) -> None:
        """For `temporal workflow signal` and the Web UI; a refused or undecodable body is kept in
        the status, as for the approval signal."""
        try:
            decision = workflow.payload_converter().from_payload(body.payload, t.ResolveCall)
            self._s.doubts.check(decision)
        except DecisionRefused as refused:
            return self._ignore(str(refused))
        except Exception as bad:  # any undecodable body: the converter's errors vary by payload
            return self._ignore(f"resolve signal body is not a resolution: {str(bad)[:300]}")
        self._resolve_call(decision)

    @workflow.update(
        name=t.RESOLVE_UPDATE,
        description="Like the resolve_call signal, but a bad resolution is refused before anything is recorded.",
    )
    def resolve_update(self, decision: t.ResolveCall) -> t.ResolveReceipt:
        return self._resolve_call(decision)

    @resolve_update.validator
    def _validate_resolve(self, decision: t.ResolveCall) -> None:
        _checked(self._s.doubts.check, decision)

    def _resolve_call(self, decision: t.ResolveCall) -> t.ResolveReceipt:
        record = self._s.doubts.apply(decision, workflow.now())
        self._record_resolution(record)
        return t.ResolveReceipt(call_id=record.call_id, action=record.action, by=record.by, recorded_at=record.at)

    # ------------------------------------------------------------------------------ questions

    @workflow.update(
        name=t.ANSWER_UPDATE,
        description='Answer an ask_person question: {"call_id": "call_…", "text": "…", "by": "you"}, or '
        '{"call_id": …, "choice": 2} (1-based). A choice outside the list, an empty answer or a question '
        "already answered is refused before anything is recorded. The questions are in the current details.",
    )
    def answer_question(self, answer: t.AnswerQuestion) -> t.AnswerReceipt:
        record = self._s.questions.apply(answer, workflow.now())
        workflow.set_current_details(self._s.details())
        return t.AnswerReceipt(
            call_id=record.call_id, answer=record.answer, choice=record.choice, by=record.by, recorded_at=record.at
        )

    @answer_question.validator
    def _validate_answer(self, answer: t.AnswerQuestion) -> None:
        _checked(self._s.questions.check, answer)

    # ------------------------------------------------------------------- outside completions

    @workflow.update(
        name=t.COMPLETE_UPDATE,
        description='Complete a call waiting for an outside completion: {"call_id": "call_…", "result": "<JSON '
        'text>", "by": "you"}, or {"call_id": …, "fail": "why"}. A result that is not JSON or not of the tool\'s '
        "result type, or a call already completed, is refused before anything is recorded.",
    )
    def complete_call(self, completion: t.CompleteCall) -> t.CompleteReceipt:
        record = self._s.outside.apply(completion, workflow.now())
        workflow.set_current_details(self._s.details())
        outcome = "fail" if record.fail is not None else "result"
        return t.CompleteReceipt(call_id=record.call_id, outcome=outcome, by=record.by, recorded_at=record.at)

    @complete_call.validator
    def _validate_complete(self, completion: t.CompleteCall) -> None:
        _checked(self._s.outside.check, completion)

    # ------------------------------------------------------------------------- session updates

    @workflow.update(
        name=t.SESSION_SEND_UPDATE,
        description='A message to a session: {"text": "…", "by": "alice", "message_id": "…"}. Answered after '
        "the ones before it (or, for an agent that steers, within the answer in progress); refused once it has ended.",
    )
    def send_message(self, message: t.SessionMessage) -> t.MessageReceipt:
        s, session = self._s, self._s.session
        assert session is not None
        steer = s.agent is not None and s.agent.mid_turn == "steer"
        receipt = session.accept(message, workflow.now(), steer)
        if not receipt.duplicate:
            self._received(message, receipt)
        return receipt

    def _received(self, message: t.SessionMessage, receipt: t.MessageReceipt) -> None:
        how = f" · {receipt.queued} ahead" if receipt.queued else ""
        how = " · steers the answer in progress" if receipt.steer else how
        self._event(t.EventKind.MESSAGE, text=message.text, detail=f"message {receipt.message} from {message.by}{how}")
        workflow.set_current_details(self._s.details())

    @send_message.validator
    def _validate_send(self, message: t.SessionMessage) -> None:
        _checked(self._session().check, message, self._s.done)

    @workflow.update(
        name=t.SESSION_END_UPDATE,
        description='Ends a session once the messages it has accepted are answered: {"by": "alice", "reason": "…"}.',
    )
    def end_session(self, end: t.EndSession) -> t.EndReceipt:
        session = self._session()
        session.ending = session.ending or end
        return t.EndReceipt(messages=session.messages, unanswered=session.messages - session.answered)

    @end_session.validator
    def _validate_end(self, end: t.EndSession) -> None:
        self._session()
        if self._s.done:
            raise ApplicationError("the session has ended", type="SessionEnded", non_retryable=True)

    def _session(self) -> SessionState:
        if self._s.session is None:
            raise ApplicationError(
                "this run is not a session: start one with `client.py chat`", type="NotASession", non_retryable=True
            )
        return self._s.session

    # -------------------------------------------------------------------------- debug updates

    @workflow.update(name=t.PAUSE_UPDATE, description='Pause at the next safe point: {"by": "alice", "reason": "…"}.')
    def pause(self, request: t.PauseRequest) -> t.RunStatus:
        self._say(control.pause(self._s, request))
        return self.status()

    @pause.validator
    def _validate_pause(self, request: t.PauseRequest) -> None:
        _checked(control.check_pause, self._s)

    @workflow.update(
        name=t.RESUME_UPDATE,
        description='Go on from a pause (with any edits): {"by": "alice"}; a run paused on its budget '
        'goes on once raised: {"by": "alice", "add_usd": 2.5} or {"add_tokens": 50000}.',
    )
    def resume(self, request: t.ResumeRequest) -> t.RunStatus:
        done = control.resume(self._s, self._ledger, request)
        for kind, detail in done.events:
            self._event(kind, detail=detail)
        if done.say is not None:
            self._say(done.say)
        return self.status()

    @resume.validator
    def _validate_resume(self, request: t.ResumeRequest) -> None:
        _checked(control.check_resume, self._s, self._ledger, request)

    @workflow.update(
        name=t.EDIT_UPDATE, description='Edit a paused run: {"op": "text", "index": 3, "text": "…"} (see Edit).'
    )
    def edit(self, edit: t.Edit) -> t.EditReceipt:
        record = control.take_edit(self._s, edit, workflow.now())
        self._edited(record)
        return t.EditReceipt(summary=record.summary, items=len(self._s.messages))

    @edit.validator
    def _validate_edit(self, edit: t.Edit) -> None:
        _checked(control.check_edit, self._s, edit)

    # -------------------------------------------------------------------------------- queries

    @workflow.query(name=t.STATUS_QUERY, description="Phase, turn, token usage, pending approvals and decisions.")
    def status(self) -> t.RunStatus:
        status = self._s.status(workflow.info().workflow_id)
        if self._ledger is not None:
            status.budget = self._ledger.status(self._s.usage)
        return status

    @workflow.query(name=t.TRANSCRIPT_QUERY, description='The conversation so far: {} for all, or {"start": N}.')
    def transcript(self, query: t.TranscriptQuery) -> t.Transcript:
        return t.Transcript(agent=self._s.agent, messages=self._s.messages[query.start :])

    @workflow.query(name=t.EVENTS_QUERY, description='The run\'s numbered steps for watchers: {"since": N}.')
    def events(self, query: t.EventsQuery) -> t.EventsPage:
        return self._s.events_page(query)

    @workflow.query(name=t.EXCHANGE_QUERY, description='A session\'s message K and its answer: {"message": K}.')
    def exchange(self, query: t.ExchangeQuery) -> t.ExchangeAnswer:
        return self._session().find(query.message)

    @workflow.query(name=t.INSPECT_QUERY, description="A paused run's state: items with indexes, pending calls, edits.")
    def inspect(self) -> t.Inspection:
        return self._s.inspection(workflow.info().workflow_id)

    @workflow.query(name=t.FORK_POINT_QUERY, description='The state just before model call N: {"turn": N}.')
    def fork_point(self, query: t.ForkQuery) -> t.ForkPoint:
        try:
            return self._s.fork_point(query.turn)
        except ValueError as err:
            raise ApplicationError(str(err), type="CannotFork") from None

    @workflow.query(name=t.MODEL_CONTEXT_QUERY, description="Internal: read by the model-call activity.")
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        try:
            return self._s.model_context(query)
        except ValueError as err:
            raise ApplicationError(str(err)) from None


def _checked(check: Callable[..., None], *args: Any) -> None:
    """A validator: the machine's check, its refusal raised as the update's error (nothing recorded)."""
    try:
        check(*args)
    except (DecisionRefused, Refused) as refused:
        raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None
