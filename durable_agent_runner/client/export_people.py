"""What people sent a run, as `export` lines, from its history's updates and signals: decisions
on calls (an approval; a call in doubt resolved, with the result given by `resolve --result`),
messages to a session, and the run's controls (pause, resume with any budget raise, edit, a
session's end). An update the run refused changed nothing, and gives no line (a message refused
keeps its line, with the run's words)."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.update.v1 import Outcome
from temporalio.client import Client
from temporalio.converter import DataConverter

from durable_agent_runner.workflows import types as t

# A control update: what its body is, and the line's `update` word.
CONTROLS: dict[str, tuple[type[t.Contract], str]] = {
    t.PAUSE_UPDATE: (t.PauseRequest, "pause"),
    t.RESUME_UPDATE: (t.ResumeRequest, "resume"),
    t.EDIT_UPDATE: (t.Edit, "edit"),
    t.SESSION_END_UPDATE: (t.EndSession, "end"),
}


FAILED = re.compile(r"message (\d+) · failed \((\w+)\)")  # an answered event's detail (machine/conversation.py)
EVENT_PAGES = 100  # of an execution's events, read for a session's failed answers (500 events a page)


async def failed_answers(client: Client, run_id: str, executions: list[str], wait: timedelta) -> list[dict[str, Any]]:
    """A session's messages whose answer failed, the session going on (`message 2 failed:
    TokenBudgetExceeded: …`): no history event says so, the run's events do (a worker answers;
    an execution whose events no worker gives within `wait` gives none)."""
    out: list[dict[str, Any]] = []
    for execution in executions:
        handle, since = client.get_workflow_handle(run_id, run_id=execution), 0
        for _ in range(EVENT_PAGES):
            try:
                page: t.EventsPage = await handle.query(
                    t.EVENTS_QUERY, t.EventsQuery(since=since), result_type=t.EventsPage, rpc_timeout=wait
                )
            except Exception:  # no worker answered in time: what history holds is what is known
                break
            for ev in page.events:
                if ev.kind == t.EventKind.ANSWERED and (failed := FAILED.fullmatch(ev.detail)) is not None:
                    message, error_type = int(failed[1]), failed[2]
                    out.append({"type": "answer_failed", "turn": ev.turn, "message": message, "error_type": error_type,
                                "error": ev.text, "at": ev.at.isoformat(), "via": "run"})  # fmt: skip
            if page.done or not page.events or page.next <= since:
                break
            since = page.next
    return out


async def decode(converter: DataConverter, payloads: Any, kind: type) -> Any:
    (value,) = await converter.decode(payloads.payloads, [kind])
    return value


async def control(
    converter: DataConverter, e: HistoryEvent, name: str, args: Payloads, outcome: Outcome | None, turn: int | None
) -> list[dict[str, Any]]:
    """A control the run took: `{"type": "control", "update": "resume", "by": …, "add_tokens": 5000}`
    (a resume's raise is the budget's), an edit with the run's words for it (`summary`)."""
    if outcome is not None and outcome.HasField("failure"):
        return []
    kind, word = CONTROLS[name]
    body = await decode(converter, args, kind)
    at = e.event_time.ToDatetime(tzinfo=UTC).isoformat()
    line = {
        "type": "control",
        "update": word,
        "turn": turn,
        "at": at,
        **body.model_dump(mode="json", exclude_none=True),
    }
    if name == t.EDIT_UPDATE and outcome is not None and outcome.HasField("success"):
        line["summary"] = (await decode(converter, outcome.success, t.EditReceipt)).summary
    return [line]


async def decision(
    converter: DataConverter,
    e: HistoryEvent,
    name: str,
    args: Payloads,
    outcome: Outcome | None,
    tools: dict[str, str],
    turn: int | None,
) -> list[dict[str, Any]]:
    """A person's decision sent as an update (or a signal): an approval or a call in doubt
    resolved, with the tool result given when it was `resolve --result`. An update the run refused
    (its outcome a failure) changed nothing, and gives no line."""
    if outcome is not None and outcome.HasField("failure"):
        return []
    at = e.event_time.ToDatetime(tzinfo=UTC).isoformat()
    if name == t.APPROVAL_UPDATE:
        asked = await decode(converter, args, t.ApprovalDecision)
        if outcome is not None:
            receipt = await decode(converter, outcome.success, t.DecisionReceipt)
            at = receipt.recorded_at.isoformat()
        return [
            {
                "type": "approval",
                "turn": turn,
                "call_id": asked.call_id,
                "tool": tools.get(asked.call_id, ""),
                "approved": asked.approve,
                "by": asked.by,
                "at": at,
                "reason": asked.reason,
                "arguments": asked.arguments,
                "always": asked.always,
            }
        ]
    resolve = await decode(converter, args, t.ResolveCall)
    if outcome is not None:
        receipt = await decode(converter, outcome.success, t.ResolveReceipt)
        at = receipt.recorded_at.isoformat()
    tool = tools.get(resolve.call_id, "")
    line = {
        "type": "resolution",
        "turn": turn,
        "call_id": resolve.call_id,
        "tool": tool,
        "action": resolve.action,
        "by": resolve.by,
        "at": at,
        "doubt": resolve.doubt,
        "result": resolve.result,
        "reason": resolve.reason,
    }
    if resolve.action != "result":
        return [line]
    given = {"type": "tool_result", "turn": turn, "call_id": resolve.call_id, "tool": tool}
    return [line, given | {"output": resolve.result, "is_error": False, "given_by": resolve.by}]


async def message(converter: DataConverter, e: HistoryEvent, args: Payloads, outcome: Outcome | None) -> dict[str, Any]:
    """A message sent to a session, numbered K by its receipt (None while the update has none)."""
    message = await decode(converter, args, t.SessionMessage)
    line: dict[str, Any] = {"type": "message", "message": None, "text": message.text, "by": message.by}
    line["at"] = e.event_time.ToDatetime(tzinfo=UTC).isoformat()
    if outcome is not None and outcome.HasField("success"):
        receipt = await decode(converter, outcome.success, t.MessageReceipt)
        line["message"] = receipt.message
        if receipt.duplicate:  # sent again with the same message_id: recorded once, under K
            line["duplicate"] = True
    elif outcome is not None and outcome.HasField("failure"):
        line["error"] = outcome.failure.message
    return line
