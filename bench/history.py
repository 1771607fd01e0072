"""Reading a run's history: bytes and events per turn, and where a turn's time goes.

A turn is grouped as tests/helpers.bytes_per_turn does: the events from one model call being
scheduled up to (not including) the next one. Runs that continue as new are followed through
their chain; the events of an execution before its first model call (its start, carrying the
run's state) and the continue-as-new event that hands it over are counted apart, as
`carry_bytes`, not as part of a turn.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.variant_types import BARE_MODEL_ACTIVITY, INLINE_MODEL_ACTIVITY, RIVAL_MODEL_ACTIVITY
from durable_agent_runner.workflows.types import MODEL_CALL_ACTIVITY, TOOL_CALL_ACTIVITY

E = EventType
MAX_EXECUTIONS = 100


@dataclass
class Turn:
    events: list[HistoryEvent] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(e.ByteSize() for e in self.events)


@dataclass
class RunHistory:
    turns: list[Turn]
    executions: int
    total_bytes: int
    total_events: int
    carry_bytes: list[int]  # per continue-as-new: the handing-over event + the new execution's start


async def chain(client: Client, workflow_id: str, run_id: str | None) -> list[list[HistoryEvent]]:
    """The events of each execution of a run, following continue-as-new."""
    out: list[list[HistoryEvent]] = []
    while run_id is not None and len(out) < MAX_EXECUTIONS:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events = list(history.events)
        out.append(events)
        last = events[-1] if events else None
        run_id = None
        if last is not None and last.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return out


def _marker_activity(e: HistoryEvent) -> str | None:
    """The activity type of a local-activity marker (its `data` detail is JSON)."""
    if e.event_type != E.EVENT_TYPE_MARKER_RECORDED:
        return None
    data = e.marker_recorded_event_attributes.details.get("data")
    if data is None or not data.payloads:
        return None
    try:
        return str(json.loads(data.payloads[0].data).get("activity_type"))
    except (ValueError, AttributeError):
        return None


def starts_turn(e: HistoryEvent) -> bool:
    """A model call scheduled: a model activity (ours, the rival's, the bare loop's), a local one,
    or a tool activity that makes the next model call once its tool has run (machine/requests.py)."""
    if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        a = e.activity_task_scheduled_event_attributes
        name = a.activity_type.name
        if name == TOOL_CALL_ACTIVITY:
            return any(b'"then":{' in p.data for p in a.input.payloads)
        return name in (MODEL_CALL_ACTIVITY, INLINE_MODEL_ACTIVITY, RIVAL_MODEL_ACTIVITY, BARE_MODEL_ACTIVITY)
    return _marker_activity(e) in (MODEL_CALL_ACTIVITY, INLINE_MODEL_ACTIVITY)  # a local model call


async def read(client: Client, workflow_id: str, run_id: str | None) -> RunHistory:
    executions = await chain(client, workflow_id, run_id)
    turns: list[Turn] = []
    carry: list[int] = []
    handed_over = 0  # the continue-as-new event closing the previous execution
    for n, events in enumerate(executions):
        before = 0
        in_turn = False
        for e in events:
            if e.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                handed_over = e.ByteSize()
                continue
            if starts_turn(e):
                turns.append(Turn())
                in_turn = True
            if in_turn:
                turns[-1].events.append(e)
            else:
                before += e.ByteSize()
        if n > 0:
            carry.append(handed_over + before)
    return RunHistory(
        turns=turns,
        executions=len(executions),
        total_bytes=sum(e.ByteSize() for ev in executions for e in ev),
        total_events=sum(len(ev) for ev in executions),
        carry_bytes=carry,
    )


def kinds(turn: Turn) -> dict[str, int]:
    """Event types in a turn, e.g. {"ACTIVITY_TASK_SCHEDULED": 2, ...}."""
    out: dict[str, int] = {}
    for e in turn.events:
        name = E.Name(e.event_type).removeprefix("EVENT_TYPE_")
        out[name] = out.get(name, 0) + 1
    return out


def slope(values: list[float]) -> float:
    """Least-squares slope of values against their index: bytes per turn added per turn."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sxx


# ------------------------------------------------------------------------- time breakdown


def _t(e: HistoryEvent) -> float:
    return e.event_time.ToNanoseconds() / 1e9


def _activity(e: HistoryEvent, scheduled: dict[int, str]) -> str | None:
    if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return e.activity_task_scheduled_event_attributes.activity_type.name
    if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return scheduled.get(e.activity_task_started_event_attributes.scheduled_event_id)
    if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return scheduled.get(e.activity_task_completed_event_attributes.scheduled_event_id)
    return None


SEGMENTS = [
    ("model activity: start", "model scheduled -> started"),
    ("model activity: query + request", "started -> request at model server"),
    ("model activity: reply + complete", "request at server -> completed, server latency taken off"),
    ("workflow task after model: queue", "model completed -> workflow task started"),
    ("workflow task after model: run", "workflow task started -> completed"),
    ("tool activity", "tool scheduled -> completed"),
    ("workflow task after tool: queue", "tool completed -> workflow task started"),
    ("workflow task after tool: run", "workflow task started -> completed"),
    ("other", "rest of the turn, up to the next model call being scheduled"),
]


def breakdown(run: RunHistory, request_times: list[float], latency_ms: float) -> dict[str, float]:
    """Median ms per turn in each segment of SEGMENTS, over the run's full turns (a product
    run: regular activities). request_times[k] is when model call k+1 reached the server."""
    per: dict[str, list[float]] = {name: [] for name, _ in SEGMENTS}
    full = [t for t in run.turns if any(_is(e, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) for e in t.events)]
    for k, (turn, nxt) in enumerate(itertools.pairwise(full)):
        marks = _marks(turn)
        needed = ("m_sched", "m_start", "m_done", "wfts_m", "wft_m", "t_sched", "t_done", "wfts_t", "wft_t")
        if any(m not in marks for m in needed) or k >= len(request_times):
            continue
        total = (_t(nxt.events[0]) - marks["m_sched"]) * 1000 - latency_ms
        seg = {
            "model activity: start": marks["m_start"] - marks["m_sched"],
            "model activity: query + request": request_times[k] - marks["m_start"],
            "model activity: reply + complete": marks["m_done"] - request_times[k] - latency_ms / 1000,
            "workflow task after model: queue": marks["wfts_m"] - marks["m_done"],
            "workflow task after model: run": marks["wft_m"] - marks["wfts_m"],
            "tool activity": marks["t_done"] - marks["t_sched"],
            "workflow task after tool: queue": marks["wfts_t"] - marks["t_done"],
            "workflow task after tool: run": marks["wft_t"] - marks["wfts_t"],
        }
        ms = {name: v * 1000 for name, v in seg.items()}
        ms["other"] = total - sum(ms.values())
        for name, v in ms.items():
            per[name].append(v)
    return {name: median(v) for name, v in per.items() if v}


def _is(e: HistoryEvent, kind: Any) -> bool:
    return bool(e.event_type == kind)


def _marks(turn: Turn) -> dict[str, float]:
    scheduled: dict[int, str] = {}
    marks: dict[str, float] = {}
    last_done: str | None = None
    for e in turn.events:
        name = _activity(e, scheduled)
        if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and name is not None:
            scheduled[e.event_id] = name
        prefix = "m" if name == MODEL_CALL_ACTIVITY else "t" if name == TOOL_CALL_ACTIVITY else None
        if prefix is not None:
            if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                marks.setdefault(f"{prefix}_sched", _t(e))
            elif e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                marks.setdefault(f"{prefix}_start", _t(e))
            elif e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                marks.setdefault(f"{prefix}_done", _t(e))
                last_done = prefix
        if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_STARTED and last_done is not None:
            marks.setdefault(f"wfts_{last_done}", _t(e))
        if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and last_done is not None:
            marks.setdefault(f"wft_{last_done}", _t(e))
            last_done = None
    return marks
