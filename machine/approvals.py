"""Approval bookkeeping for one run: calls waiting for a person, and every decision made.

Pure state, no Temporal calls: the workflow passes the time in. `check` is what both the signal
and the update's validator run, so a bad decision is refused the same way on either path.
"""

from __future__ import annotations

import json
from datetime import datetime

from durable_agent_runner.machine import schema
from durable_agent_runner.workflows.types import AgentSpec, ApprovalDecision, ApprovalRecord, PendingApproval

MAX_IGNORED = 20


class DecisionRefused(ValueError):
    """A decision that cannot be applied; `kind` names why, for the client's exit code."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Approvals:
    def __init__(self) -> None:
        self.pending: dict[str, PendingApproval] = {}
        self.decisions: list[ApprovalRecord] = []
        self.always: dict[str, ApprovalRecord] = {}  # tool name -> the decision that said "always"
        self.ignored: list[str] = []  # refused signals, kept so a person can see why

    def request(self, call_id: str, tool: str, arguments: dict[str, object], turn: int, now: datetime) -> None:
        self.pending[call_id] = PendingApproval(call_id=call_id, tool=tool, arguments=arguments, since=now, turn=turn)

    def decided(self, call_id: str) -> ApprovalRecord | None:
        return next((d for d in self.decisions if d.call_id == call_id), None)

    def check(self, decision: ApprovalDecision, agent: AgentSpec | None) -> None:
        """Raise DecisionRefused unless `decision` can be applied now."""
        if done := self.decided(decision.call_id):
            verdict = "approved" if done.approved else "rejected"
            when = f"{done.at:%Y-%m-%d %H:%M:%S}"
            raise DecisionRefused("NotPending", f"call {decision.call_id} was already {verdict} by {done.by} at {when}")
        waiting = self.pending.get(decision.call_id)
        if waiting is None:
            ids = ", ".join(self.pending) or "none"
            raise DecisionRefused("UnknownCall", f"no pending call {decision.call_id}; pending: {ids}")
        if decision.turn is not None and decision.turn != waiting.turn:
            raise DecisionRefused(
                "UnknownCall", f"call {decision.call_id} is waiting in turn {waiting.turn}, not turn {decision.turn}"
            )
        if decision.arguments is not None:
            if not decision.approve:
                raise DecisionRefused("InvalidDecision", "edited arguments only go with an approval")
            spec = agent.tool(waiting.tool) if agent else None
            problems = schema.check(decision.arguments, spec.parameters) if spec else []
            if problems:
                raise DecisionRefused(
                    "InvalidArguments", f"edited arguments for {waiting.tool} are invalid: " + "; ".join(problems)
                )

    def apply(self, decision: ApprovalDecision, now: datetime, automatic: bool = False) -> ApprovalRecord:
        waiting = self.pending[decision.call_id]
        return self.settle(approval_record(decision, waiting.tool, now, automatic))

    def settle(self, record: ApprovalRecord) -> ApprovalRecord:
        """Records a decision made (by a person at the door, or by the run: a timeout)."""
        self.pending.pop(record.call_id, None)
        self.decisions.append(record)
        if record.always:
            self.always[record.tool] = record
        return record

    def abandon(self) -> None:
        """The run ended (failed, cancelled): nothing is waiting any more."""
        self.pending.clear()

    def ignore(self, reason: str) -> None:
        """A signal that could not be applied: kept (bounded) so a person sees why in `status`."""
        self.ignored = [*self.ignored, reason[:500]][-MAX_IGNORED:]

    def auto_approve(self, call_id: str, tool: str, turn: int, now: datetime) -> ApprovalRecord:
        """A later call of a tool someone approved with `always`: recorded, not asked."""
        earlier = self.always[tool]
        self.request(call_id, tool, {}, turn, now)
        reason = f"'always' approval given by {earlier.by} for call {earlier.call_id}"
        return self.apply(ApprovalDecision(call_id=call_id, approve=True, by=earlier.by, reason=reason), now, True)


def approval_record(decision: ApprovalDecision, tool: str, now: datetime, automatic: bool = False) -> ApprovalRecord:
    """The record of a decision on a call of `tool`: who, when, what (the one way one is made)."""
    return ApprovalRecord(
        call_id=decision.call_id,
        tool=tool,
        approved=decision.approve,
        by=decision.by,
        at=now,
        reason=decision.reason,
        arguments=decision.arguments,
        always=decision.always and decision.approve,
        automatic=automatic,
    )


def decision_words(record: ApprovalRecord) -> str:
    """One line for the UI, watchers and status: what was decided, by whom."""
    verdict = "approved" if record.approved else f"rejected: {record.reason}"
    return f"{verdict} by {record.by}" + (" (arguments edited)" if record.arguments is not None else "")


def rejection_text(record: ApprovalRecord) -> str:
    who = "the run's approval timeout" if record.automatic else record.by
    return f"The call was not approved (rejected by {who}): {record.reason or 'no reason given'}"


def edited_note(record: ApprovalRecord) -> str:
    return f"[arguments edited by {record.by} before running: {json.dumps(record.arguments, ensure_ascii=False)}]\n"
