"""A whole run as JSON lines (`RunHandle.export()`, `client.py export RUN_ID`), read from its
history: no worker is needed.

    {"type": "run", ...}            the agent as frozen at the start, the prompt, whether a session, its
                                    budget cap, the run it was forked from, the outcome
    {"type": "model_call", ...}     each model reply as recorded, with its wire capture if kept
    {"type": "model_fallback", ...} a model that failed for good, and the model its turn went to
    {"type": "decision", ...}       what the run did next: the tool calls it ran, or its answer
    {"type": "approval", ...}       a person's decision on a call that waited (who, when, what, edited
                                    arguments); the run's own (a timeout, --always) too, from status
    {"type": "resolution", ...}     a person's decision on a call in doubt: rerun, result, fail
    {"type": "answer", ...}         an `ask_person` answer; "completion": an outside completion; from status
    {"type": "handoff", ...}        each transfer from one agent to another (who, to whom, turn, call); from status
    {"type": "tool_result", ...}    what each tool returned: run by a worker, given by a person
                                    (`resolve --result`: `given_by`), or a child run's answer
                                    (`child_run_id`; a child that failed: `is_error`)
    {"type": "message", ...}        a session: each message sent to it (K, text, sender, time);
                                    "answer_failed": one whose answer failed (from the run's events)
    {"type": "control", ...}        a pause, a resume (with its budget raise), an edit, a session's end
    {"type": "compaction", ...}     a session: each summary that replaced messages[:upto]
    {"type": "result", ...}         the final answer, or why the run failed; "scores": its online scores

Every execution of a run that continued as new is included, oldest first: a session's whole
transcript stays here after compaction has replaced its older messages in the run's memory.
replay.py feeds the captured responses back through the pure turn logic (the same decisions).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.update.v1 import Outcome
from temporalio.client import Client
from temporalio.converter import DataConverter

from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.client import export_people as people
from durable_agent_runner.client.export_people import decode
from durable_agent_runner.client.follow import READ
from durable_agent_runner.client.scores import scores_of
from durable_agent_runner.workflows import types as t

E = EventType
STATUS_TIMEOUT = timedelta(seconds=3)  # the run's own status query (a worker answers)


async def export_run(client: Client, run_id: str, captures: CaptureStore) -> list[dict[str, Any]]:
    query = f"WorkflowId={json.dumps(run_id)}"  # a quoted literal
    runs = [wf async for wf in client.list_workflows(query, rpc_timeout=READ)]
    runs.sort(key=lambda wf: wf.start_time)
    if not runs:  # visibility can lag a just-started run; its latest execution is enough then
        desc = await client.get_workflow_handle(run_id).describe(rpc_timeout=READ)
        runs_ids = [desc.run_id]
    else:
        runs_ids = [wf.run_id for wf in runs]
    lines: list[dict[str, Any]] = []
    for execution in runs_ids:
        history = await client.get_workflow_handle(run_id, run_id=execution).fetch_history(rpc_timeout=READ)
        lines += [line async for line in _lines(client.data_converter, history.events, captures)]
    lines += await _run_decisions(client, run_id, lines)
    if any(line["type"] == "message" for line in lines):  # a session: the answers that failed
        lines += await people.failed_answers(client, run_id, runs_ids, STATUS_TIMEOUT)
    if (scores := await scores_of(client, run_id)) is not None:  # online scoring: its ScoreRun's result
        lines.append({"type": "scores", "turn": None, **scores.model_dump(mode="json")})
    lines.insert(0, {"type": "run", "run_id": run_id, "executions": len(runs_ids), **_header(lines)})
    return [line for line in lines if line["type"] not in ("start", "agent")]


async def _run_decisions(client: Client, run_id: str, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions the run made itself (an approval timeout, an earlier `always`) and those not in
    its history as a person's update (a signal's), and its handoffs (a run still going has no
    result to hold them): from its status query, adding what lines lack."""
    try:
        live: t.RunStatus = await client.get_workflow_handle(run_id).query(
            t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=STATUS_TIMEOUT
        )
    except Exception:  # no worker answers: the history's decisions are what is known
        return []
    seen = {(line["type"], line["call_id"]) for line in lines if line["type"] in ("approval", "resolution")}
    out: list[dict[str, Any]] = []
    for d in live.decisions:
        if ("approval", d.call_id) not in seen:
            out.append({"type": "approval", "turn": None, **d.model_dump(mode="json"), "via": "run"})
    for r in live.resolutions:
        if ("resolution", r.call_id) not in seen:
            out.append({"type": "resolution", "turn": None, **r.model_dump(mode="json"), "via": "run"})
    out += [{"type": "answer", "turn": None, **a.model_dump(mode="json"), "via": "run"} for a in live.answers]
    out += [{"type": "completion", "turn": None, **c.model_dump(mode="json"), "via": "run"} for c in live.completions]
    out += [{"type": "handoff", **h.model_dump(mode="json"), "via": "run"} for h in live.handoffs]
    return out


def _header(lines: list[dict[str, Any]]) -> dict[str, Any]:
    start = next((line for line in lines if line["type"] == "start"), {})
    agent = next((line["agent"] for line in lines if line["type"] == "agent"), start.get("agent"))
    result = next((line for line in lines if line["type"] == "result"), {"status": "running"})
    facts = {key: start.get(key) for key in ("session", "budget", "forked_from")}
    return {"prompt": start.get("prompt"), "agent": agent, **facts, "status": result["status"]}


def _dumped(value: t.Contract | None) -> dict[str, Any] | None:
    return value.model_dump(mode="json", exclude_none=True) if value is not None else None


LOCAL_ACTIVITY_MARKER = "core_local_activity"
FAILURE_KINDS = {"MaxTurnsExceeded": "max_turns", "TokenBudgetExceeded": "budget_spent"}
# Ends no workflow code records: the history alone says how the run ended.
ENDINGS = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: ("cancelled", "workflow_execution_canceled_event_attributes"),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: ("terminated", "workflow_execution_terminated_event_attributes"),
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: ("timed_out", "workflow_execution_timed_out_event_attributes"),
}
# Where an execution's last turn ends, its decision written.
TURN_ENDS = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    *ENDINGS,
}


async def _lines(converter: DataConverter, events: Sequence[HistoryEvent], captures: CaptureStore) -> Any:
    scheduled: dict[int, tuple[str, Any]] = {}  # event id -> (activity name, input)
    outcomes: dict[int, Outcome] = {}  # an accepted update's event id -> how it completed
    for e in events:
        if e.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            update = e.workflow_execution_update_completed_event_attributes
            outcomes[update.accepted_event_id] = update.outcome
    turn: int | None = None  # the turn whose decision is not yet written
    ahead_turn: int | None = None  # that turn's reply came with a tool's result (it may be dropped)
    ran: list[str] = []
    # Calls the last reply brought back already run: the turn took those it ran no tool for.
    with_reply: dict[str, t.ToolResult] = {}
    asked: list[str] = []  # the last reply's call ids, in the model's order
    tools: dict[str, str] = {}  # call id -> its tool, from the replies that asked for them
    children: dict[int, tuple[str, str, int | None]] = {}  # initiated event id -> (call id, child run id, turn)
    used: set[str] = set()  # every call id of the run's earlier replies: the run renames a repeat
    failed: dict[str, Any] | None = None  # the last model call, when it failed for good

    def run_tools() -> dict[str, Any]:
        order = {call_id: i for i, call_id in enumerate(asked)}
        return {
            "type": "decision",
            "turn": turn,
            "kind": "run_tools",
            "ran": sorted(ran, key=lambda c: order.get(c, len(order))),
        }

    def brought_back(reply: t.ModelReply) -> tuple[dict[str, t.ToolResult], list[str]]:
        """The results `reply` brought back that its turn may take, and its call ids. A renamed
        call's result is never taken (turn.taken): the turn ran the call anew."""
        results = {r.call_id: r for r in reply.tool_results if r.call_id not in used}
        asked = [c.call_id for c in reply.message.tool_calls]
        tools.update((c.call_id, c.name) for c in reply.message.tool_calls)
        used.update(asked)
        return results, asked

    def taken() -> Iterator[dict[str, Any]]:
        for result in with_reply.values():
            ran.append(result.call_id)
            yield {"type": "tool_result", "turn": turn, **result.model_dump(mode="json")}
        with_reply.clear()

    for e in events:
        kind = e.event_type
        if with_reply and kind in TURN_ENDS:
            for line in taken():
                yield line
        if kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            run_input = await decode(converter, e.workflow_execution_started_event_attributes.input, t.RunInput)
            carried = run_input.carry.agent.model_dump() if run_input.carry else None
            start: dict[str, Any] = {"type": "start", "prompt": run_input.prompt, "agent": carried}
            start["session"], start["budget"] = run_input.session, _dumped(run_input.budget)  # its cap, as given
            start["forked_from"] = _dumped(run_input.carry.forked_from if run_input.carry else None)
            yield start
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            name = a.activity_type.name
            input_type = {
                t.MODEL_CALL_ACTIVITY: t.ModelCallInput,
                t.TOOL_CALL_ACTIVITY: t.ToolCallInput,
                t.HOOK_ACTIVITY: t.HookInput,
                t.COMPACT_ACTIVITY: t.CompactInput,
            }.get(name)
            value: Any = await decode(converter, a.input, input_type) if input_type else None
            scheduled[e.event_id] = (name, value)
            if name == t.TOOL_CALL_ACTIVITY:
                tools.setdefault(value.call_id, value.tool)
            if name == t.MODEL_CALL_ACTIVITY:
                for line in taken():
                    yield line
                if failed is not None and failed["turn"] == value.turn:  # the same turn, on the next model
                    yield failed | {"to": value.model}
                elif turn is not None and turn == ahead_turn == value.turn:  # the reply made ahead was not used
                    yield {"type": "model_dropped", "turn": turn}
                elif turn is not None:
                    yield run_tools()
                turn, ran, ahead_turn, failed = value.turn, [], None, None
            elif name == t.TOOL_CALL_ACTIVITY and value.call_id not in ran:
                with_reply.pop(value.call_id, None)  # run anew: the turn did not take that result
                ran.append(value.call_id)
            elif name == t.HOOK_ACTIVITY and value.kind == "approval" and value.call_id not in ran:
                ran.append(value.call_id)  # checked first; it ran, was rejected, or was told it was invalid
        elif kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            initiated = e.start_child_workflow_execution_initiated_event_attributes
            if initiated.workflow_type.name != t.WORKFLOW_NAME:  # its scoring (a ScoreRun): its own line
                continue
            child = initiated.workflow_id
            call_id = child.rsplit(".", 1)[-1]
            children[e.event_id] = (call_id, child, turn)
            if call_id not in ran:
                ran.append(call_id)
        elif kind in CHILD_ENDS:
            answered = await _child_result(converter, e, children, tools)
            if answered is not None:
                yield answered
        elif kind in MODEL_CALL_ENDS:
            failed = _failed_model_call(MODEL_CALL_ENDS[kind](e), scheduled) or failed
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = e.activity_task_completed_event_attributes
            name, value = scheduled[done.scheduled_event_id]
            if name == t.RESOLVE_AGENT_ACTIVITY:
                spec = await decode(converter, done.result, t.AgentSpec)
                yield {"type": "agent", "agent": spec.model_dump()}
            elif name == t.MODEL_CALL_ACTIVITY:
                reply = await decode(converter, done.result, t.ModelReply)
                capture = captures.get(reply.capture) if reply.capture else None
                yield {
                    "type": "model_call",
                    "turn": value.turn,
                    "reply": reply.model_dump(mode="json", exclude={"tool_results"}),
                    "capture": capture,
                }
                with_reply, asked = brought_back(reply)
            elif name == t.TOOL_CALL_ACTIVITY:
                result = await decode(converter, done.result, t.ToolResult)
                yield {"type": "tool_result", "turn": value.turn, **result.model_dump(mode="json", exclude={"ahead"})}
                if result.ahead is not None:  # the next model call, made by this activity (machine/requests.py)
                    made = result.ahead
                    for line in taken():
                        yield line
                    if turn is not None:
                        yield run_tools()
                    turn, ran, ahead_turn = made.request.turn, [], made.request.turn
                    capture = captures.get(made.reply.capture) if made.reply.capture else None
                    reply_line = made.reply.model_dump(mode="json", exclude={"tool_results"})
                    yield {"type": "model_call", "turn": turn, "reply": reply_line, "capture": capture}
                    with_reply, asked = brought_back(made.reply)
            elif name == t.COMPACT_ACTIVITY:
                compacted = await decode(converter, done.result, t.CompactResult)
                yield {"type": "compaction", "turn": value.turn, "upto": value.upto, "summary": compacted.summary}
        elif kind == E.EVENT_TYPE_MARKER_RECORDED and (found := local_result(e)) is not None:
            name, payloads = found  # a local activity: its result is the marker's
            if name == t.RESOLVE_AGENT_ACTIVITY:
                spec = await decode(converter, payloads, t.AgentSpec)
                yield {"type": "agent", "agent": spec.model_dump()}
            elif name == t.MODEL_CALL_ACTIVITY:  # a local model call: only what it brought back
                for line in taken():
                    yield line
                with_reply, asked = brought_back(await decode(converter, payloads, t.ModelReply))
            elif name == t.TOOL_CALL_ACTIVITY:
                local = await decode(converter, payloads, t.ToolResult)
                with_reply.pop(local.call_id, None)  # run anew: the turn did not take that result
                if local.call_id not in ran:
                    ran.append(local.call_id)
                yield {"type": "tool_result", "turn": turn, **local.model_dump(mode="json")}
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = e.workflow_execution_update_accepted_event_attributes.accepted_request
            outcome, name, args = outcomes.get(e.event_id), request.input.name, request.input.args
            if name == t.SESSION_SEND_UPDATE:
                yield await people.message(converter, e, args, outcome)
            elif name in (t.APPROVAL_UPDATE, t.RESOLVE_UPDATE):
                for line in await people.decision(converter, e, name, args, outcome, tools, turn):
                    yield line
            elif name in people.CONTROLS:  # pause, resume (a budget raise), edit, end
                for line in await people.control(converter, e, name, args, outcome, turn):
                    yield line
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signal = e.workflow_execution_signaled_event_attributes
            if signal.signal_name in (t.APPROVAL_SIGNAL, t.RESOLVE_SIGNAL):
                name = t.APPROVAL_UPDATE if signal.signal_name == t.APPROVAL_SIGNAL else t.RESOLVE_UPDATE
                for line in await people.decision(converter, e, name, signal.input, None, tools, turn):
                    yield line | {"via": "signal"}  # a signal the run may have ignored: status says
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            result = await decode(converter, e.workflow_execution_completed_event_attributes.result, t.RunResult)
            yield {"type": "decision", "turn": turn, "kind": "final", "output": result.output}
            yield {"type": "result", "status": "completed", **result.model_dump(mode="json")}
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            failure = e.workflow_execution_failed_event_attributes.failure
            error_type = failure.application_failure_info.type
            yield {"type": "decision", "turn": turn, "kind": FAILURE_KINDS.get(error_type, "failed")}
            yield {"type": "result", "status": "failed", "error": failure.message, "error_type": error_type}
        elif kind in ENDINGS:
            status, attrs = ENDINGS[kind]
            why = getattr(e, attrs)
            detail = getattr(why, "reason", "") or getattr(getattr(why, "failure", None), "message", "")
            yield {"type": "decision", "turn": turn, "kind": status}
            yield {"type": "result", "status": status, "error": detail or status}
        elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW and turn is not None:
            yield run_tools()


MODEL_CALL_ENDS = {  # how a model call fails for good: the next one of its turn is a fallback
    E.EVENT_TYPE_ACTIVITY_TASK_FAILED: lambda e: e.activity_task_failed_event_attributes,
    E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: lambda e: e.activity_task_timed_out_event_attributes,
}


def _failed_model_call(ended: Any, scheduled: dict[int, tuple[str, Any]]) -> dict[str, Any] | None:
    """A model call that failed for good: what a fallback line says of it (None: not a model call)."""
    name, asked = scheduled[ended.scheduled_event_id]
    if name != t.MODEL_CALL_ACTIVITY:
        return None
    why = ended.failure
    error = why.cause.message or why.message if why.HasField("cause") else why.message
    return {"type": "model_fallback", "turn": asked.turn, "from": asked.model, "error": error}


CHILD_ENDS = {
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: "child_workflow_execution_completed_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: "child_workflow_execution_failed_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: "child_workflow_execution_canceled_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: "child_workflow_execution_timed_out_event_attributes",
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: "child_workflow_execution_terminated_event_attributes",
}


async def _child_result(
    converter: DataConverter,
    e: HistoryEvent,
    children: dict[int, tuple[str, str, int | None]],
    tools: dict[str, str],
) -> dict[str, Any] | None:
    """A child run's answer (an agent used as a tool) as its call's result; how it failed if it did."""
    attrs = getattr(e, CHILD_ENDS[e.event_type])
    started = children.get(attrs.initiated_event_id)
    if started is None:
        return None
    call_id, child_id, turn = started
    line: dict[str, Any] = {"type": "tool_result", "turn": turn, "call_id": call_id, "tool": tools.get(call_id, "")}
    line["child_run_id"] = child_id
    if e.event_type == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
        result = await decode(converter, attrs.result, t.RunResult)
        return line | {"output": result.output, "is_error": False, "agent": result.agent}
    failure = getattr(attrs, "failure", None)
    ended = E.Name(e.event_type).removeprefix("EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_").lower()
    why = (failure.message if failure is not None and failure.message else "") or f"the child run {ended}"
    return line | {"output": why, "is_error": True}


def local_result(e: HistoryEvent) -> tuple[str, Payloads] | None:
    """A completed local activity's type and result, from the marker the SDK records for it
    (its `data` is the SDK's own plain JSON; its `result`, our payload); None for any other event."""
    marker = e.marker_recorded_event_attributes
    if marker.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in marker.details:
        return None
    data = marker.details["data"].payloads
    about = json.loads(data[0].data) if data else {}
    if not marker.details["result"].payloads:
        return None
    return str(about.get("activity_type", "")), marker.details["result"]
