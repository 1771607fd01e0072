"""Calls completed from outside (`@tool(completes="outside")`) for one run: the calls whose tool
started the work and returned, waiting for an outside system's completion, and every completion.

    Outside.check(completion)  → raises DecisionRefused unless it applies now (the validator)
    Outside.apply(completion)  → the CompletionRecord (the handler, once checked)
    timeout_record(…)          → the run's own record when no completion came in time
    for_model(record)          → the tool's result as the model reads it

Pure state, no Temporal calls: the workflow passes the time in. A completion's result is JSON
within the bounds (workflows.bounds) that matches the tool's result type (its JSON Schema,
machine/schema.py): checked here, at the door, before anything is recorded.
"""

from __future__ import annotations

import json
from datetime import datetime

from durable_agent_runner.machine import bounds, schema
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows.types import (
    COMPLETE_UPDATE,
    CompleteCall,
    CompletionRecord,
    OutsideSpec,
    PendingOutside,
)


class Outside:
    def __init__(self) -> None:
        self.pending: dict[str, PendingOutside] = {}
        self.records: list[CompletionRecord] = []
        self._schemas: dict[str, dict[str, object] | None] = {}  # each waiting call's result type
        self._to_person: set[str] = set()  # calls whose wait ran out and went to a person (in doubt)

    def wait(self, call: PendingOutside, spec: OutsideSpec) -> None:
        self.pending[call.call_id] = call
        self._to_person.discard(call.call_id)  # run again by a person: it waits anew
        self._schemas[call.call_id] = spec.result_schema

    def completed(self, call_id: str) -> CompletionRecord | None:
        """The call's completion in its current wait (a call a person ran again waits anew)."""
        return None if call_id in self.pending else self._last(call_id)

    def _last(self, call_id: str) -> CompletionRecord | None:
        return next((r for r in reversed(self.records) if r.call_id == call_id), None)

    def check(self, completion: CompleteCall) -> None:
        """Raise DecisionRefused unless `completion` can be recorded now: the validator's, before anything is."""
        self._value(completion)

    def _value(self, completion: CompleteCall) -> str | None:
        """The result's JSON text as recorded (None for a failure); DecisionRefused when it cannot be."""
        call_id = completion.call_id
        if call_id not in self.pending:
            done = self._last(call_id)
            if done is not None:
                how = "timed out" if done.automatic else f"was already completed by {done.by}"
                raise DecisionRefused("NotPending", f"call {call_id} {how} at {done.at:%Y-%m-%d %H:%M:%S}")
            if call_id in self._to_person:
                raise DecisionRefused(
                    "NotPending",
                    f"call {call_id} timed out waiting for its completion and is in doubt: a person resolves it "
                    f"(client.py resolve RUN_ID {call_id} --result JSON | --fail REASON)",
                )
            ids = ", ".join(self.pending) or "none"
            raise DecisionRefused(
                "UnknownCall", f"no call waits for an outside completion with id {call_id}; waiting: {ids}"
            )
        if completion.fail is not None:
            if not completion.fail.strip():
                raise DecisionRefused("InvalidCompletion", f"a failure of call {call_id} needs a reason")
            return None
        try:
            value = bounds.parse_json(completion.result or "")
        except bounds.OutsideDataError as err:
            raise DecisionRefused("InvalidResult", f"the result for call {call_id} is not JSON: {err}") from None
        wanted = self._schemas.get(call_id)
        problems = schema.check(value, wanted, root="result") if wanted is not None else []
        if problems:
            shown = "; ".join(problems)
            raise DecisionRefused(
                "InvalidResult", f"the result for call {call_id} does not match the tool's result type: {shown}"
            )
        return json.dumps(value, ensure_ascii=False)

    def apply(self, completion: CompleteCall, now: datetime) -> CompletionRecord:
        result = self._value(completion)
        waiting = self.pending.pop(completion.call_id)
        fail = completion.fail.strip() if completion.fail is not None else None
        record = CompletionRecord(
            call_id=waiting.call_id, tool=waiting.tool, result=result, fail=fail, by=completion.by, at=now
        )
        self.records.append(record)
        return record

    def settle(self, record: CompletionRecord) -> None:
        """Records the run's own end of a wait (its timeout, told to the model)."""
        self.pending.pop(record.call_id, None)
        self.records.append(record)

    def expire(self, call_id: str) -> None:
        """The wait ran out and the call went to a person (in doubt): it waits for no completion now."""
        self.pending.pop(call_id, None)
        self._to_person.add(call_id)

    def abandon(self) -> None:
        """The run ended (failed, cancelled): nothing is waiting any more."""
        self.pending.clear()


def timeout_record(call_id: str, tool: str, spec: OutsideSpec, now: datetime) -> CompletionRecord:
    """No completion came within the tool's timeout: the model is told so."""
    why = f"no outside completion within {spec.timeout_seconds:g}s"
    return CompletionRecord(call_id=call_id, tool=tool, fail=why, by="timeout", at=now, automatic=True)


def for_model(record: CompletionRecord) -> tuple[str, bool]:
    """The tool's result as the model reads it, and whether it is an error: the result's JSON (a
    JSON string as its text), or the failure with its reason."""
    if record.fail is not None:
        who = "" if record.automatic else f" (reported by {record.by})"
        return f"error: tool '{record.tool}' failed: {record.fail}{who}", True
    try:  # checked against the tool's type when it came in: this reads it, within the bounds
        value = bounds.parse_json(record.result or "null")
    except bounds.OutsideDataError:
        value = None
    return (value if isinstance(value, str) else record.result or "null"), False


def completion_words(record: CompletionRecord) -> str:
    """One line for events and status: how the call completed, by whom."""
    if record.automatic:
        return record.fail or "timed out"
    what = f"failed: {excerpt(record.fail, 200)}" if record.fail is not None else "result given"
    return f"{what} (by {record.by})"


def waiting_words(call: PendingOutside) -> str:
    return f"waiting for outside completion of {call.tool} ({call.call_id})"


def details(pending: dict[str, PendingOutside]) -> list[str]:
    """The calls waiting, for the Web UI's current details, with how to complete each."""
    lines: list[str] = []
    for p in pending.values():
        body = json.dumps({"call_id": p.call_id, "result": "<JSON text>", "by": "you"})
        started = f" Its start returned: {excerpt(p.started, 300)}" if p.started else ""
        until = f"until {p.deadline:%Y-%m-%d %H:%M:%S} UTC"
        lines += [
            "",
            f"**Waiting for outside completion:** `{p.tool}` ({p.call_id}) {until}.{started}",
            f"Complete: `python client.py complete RUN_ID {p.call_id} --result JSON | --fail REASON`, "
            f"or Send an Update → `{COMPLETE_UPDATE}` with `{body}`",
        ]
    return lines
