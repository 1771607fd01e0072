"""Calls in doubt for one run: the `once` calls whose attempt ended without a result, waiting for a
person, and every resolution made.

Pure state, no Temporal calls: the workflow passes the time in. `check` is what both the signal
and the update's validator run, so a bad resolution is refused the same way on either path.
What an attempt or a resolution becomes is `workflows.calls` (`attempt_ended`, `resolved`).
"""

from __future__ import annotations

import json
from datetime import datetime

from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.workflows.types import RESOLVE_SIGNAL, CallResolution, InDoubtCall, ResolveCall


class Doubts:
    def __init__(self) -> None:
        self.pending: dict[str, InDoubtCall] = {}
        self.resolutions: list[CallResolution] = []

    def times(self, call_id: str) -> int:
        """How often `call_id` has been in doubt so far in this run."""
        return sum(1 for r in self.resolutions if r.call_id == call_id) + (call_id in self.pending)

    def mark(self, call: InDoubtCall) -> None:
        self.pending[call.call_id] = call

    def decided(self, call_id: str, doubt: int) -> CallResolution | None:
        return next((r for r in self.resolutions if r.call_id == call_id and r.doubt == doubt), None)

    def check(self, decision: ResolveCall) -> None:
        """Raise DecisionRefused unless `decision` can be applied now."""
        waiting = self.pending.get(decision.call_id)
        if waiting is not None and decision.doubt is not None and decision.doubt != waiting.doubt:
            # A stale page or a late repeat: the doubt the person saw is no longer the open one.
            seen = self.decided(decision.call_id, decision.doubt)
            then = f" ({seen.by} resolved that one: {seen.action} at {seen.at:%Y-%m-%d %H:%M:%S})" if seen else ""
            raise DecisionRefused(
                "NotInDoubt",
                f"call {decision.call_id} is in doubt for time {waiting.doubt}, not {decision.doubt}{then}: "
                "look at it again and decide the open one",
            )
        if waiting is None:
            done = [r for r in self.resolutions if r.call_id == decision.call_id]
            if done and waiting is None:
                last = done[-1]
                raise DecisionRefused(
                    "NotInDoubt",
                    f"call {decision.call_id} is not in doubt: {last.by} resolved it ({last.action}) "
                    f"at {last.at:%Y-%m-%d %H:%M:%S}",
                )
            ids = ", ".join(f"{p.call_id} ({p.tool})" for p in self.pending.values()) or "none"
            raise DecisionRefused("NotInDoubt", f"call {decision.call_id} is not in doubt; in doubt: {ids}")

    def apply(self, decision: ResolveCall, now: datetime) -> CallResolution:
        waiting = self.pending.pop(decision.call_id)
        record = CallResolution(
            call_id=decision.call_id,
            tool=waiting.tool,
            action=decision.action,
            by=decision.by,
            at=now,
            doubt=waiting.doubt,
            result=decision.result,
            reason=decision.reason,
        )
        self.resolutions.append(record)
        return record

    def abandon(self) -> None:
        """The run ended (failed, cancelled): nothing is waiting any more."""
        self.pending.clear()


def resolution_words(record: CallResolution) -> str:
    """One line for the UI, watchers and status: what the person decided."""
    what = {"rerun": "run again", "result": "result given", "fail": f"failed: {record.reason}"}[record.action]
    return f"{what} by {record.by}"


def details(pending: dict[str, InDoubtCall]) -> list[str]:
    """The Web UI's current details for each call in doubt: what, since when, how to resolve it."""
    lines: list[str] = []
    for d in pending.values():
        body = json.dumps({"call_id": d.call_id, "action": "rerun", "by": "your-name"})
        started = f"started {d.started_at:%H:%M:%S}" if d.started_at else f"asked for {d.scheduled_at:%H:%M:%S}"
        what = f"its attempt ({started} UTC) ended without a result ({d.ended}); it may or may not have happened"
        lines += [
            "",
            f"**In doubt:** `{d.tool}` ({d.call_id}): {d.ended if d.fork_of else what}",
            f"```json\n{json.dumps(d.arguments, ensure_ascii=False, indent=2)}\n```",
            f"Resolve: `python client.py resolve RUN_ID {d.call_id} --rerun | --result JSON | --fail REASON`, "
            f"or Send a Signal → `{RESOLVE_SIGNAL}` with `{body}`",
        ]
    return lines
