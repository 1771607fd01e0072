"""A run's story as it happens, from two sources. Durable steps (tool calls, approvals, each
reply's final text, the answer) come from the run's numbered event log (query `agent.events`), so a
reader that reconnects with `since=N` resumes without gaps or repeats, across continue-as-new too.
The text of a reply still being streamed comes from the model activity's heartbeat details, read
with `describe()`; it is tagged with the call's attempt, so when a call fails half-way and is
retried, the partial text is withdrawn (durable_agent_runner/client/events.py turns it into deltas).

`follow` yields the raw story, retrying through server gaps; `RunHandle.events()`, `client.py
watch` and `client.py chat` are built on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client.errors import STATUS_NAMES
from durable_agent_runner.workflows import types as t

POLL = 0.1  # seconds between polls while a run is live
# After these no model call is in flight: nothing streams until the next model_started (or a
# tool_started, whose activity may make the next call). A wait for a person reads no progress.
CALL_ENDS = frozenset(
    {
        t.EventKind.MODEL_FINISHED,
        t.EventKind.MODEL_DROPPED,
        t.EventKind.TOOL_FINISHED,
        t.EventKind.APPROVAL_REQUESTED,
        t.EventKind.CALL_IN_DOUBT,
        t.EventKind.PAUSED,
    }
)
STREAM_POLL = 0.05  # seconds between reads of the streamed text while a model call is in flight
GIVE_UP_AFTER = 60  # consecutive failed polls (about a minute) before a watcher gives up
# A deadline that passed: the client's ("Timeout expired") or the server's.
DEADLINE = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
# Each read's bound: a query or describe the server or the worker does not answer in time fails
# (a Gap) and is asked again, never awaited for good.
READ = timedelta(seconds=10)


async def events_since(client: Client, run_id: str, since: int, execution: str | None = None) -> t.EventsPage:
    """Events from `since` on, reaching back through earlier executions when they hold some."""
    handle = client.get_workflow_handle(run_id, run_id=execution)
    page: t.EventsPage = await handle.query(
        t.EVENTS_QUERY, t.EventsQuery(since=since), result_type=t.EventsPage, rpc_timeout=READ
    )
    if since < page.first and page.previous_run_id:
        older = await events_since(client, run_id, since, page.previous_run_id)
        held = [e for e in older.events if e.seq < page.first]
        # An earlier execution with more than a page left: this page is its events alone, so the
        # next call goes on from there (never a gap between the two executions).
        more = bool(held) and held[-1].seq + 1 < page.first
        page.events = held if more else held + page.events
    return page


async def live_progress(client: Client, run_id: str, turn: int) -> t.ModelProgress | None:
    """The streamed text of model call `turn` in flight: the model activity's, or that of the
    tool activity of turn `turn - 1` that makes it once its tool has run (machine/requests.py)."""
    desc = await client.get_workflow_handle(run_id).describe(rpc_timeout=READ)
    for pending in desc.raw_description.pending_activities:
        ours = pending.activity_id == f"model-{turn}" or pending.activity_id.startswith(f"tool-{turn - 1}-")
        if ours and pending.heartbeat_details.payloads:
            try:  # a tool's own heartbeat (before its call ahead) is no progress
                values = await client.data_converter.decode(pending.heartbeat_details.payloads[:1], [t.ModelProgress])
            except Exception:
                continue
            progress = values[0]
            if isinstance(progress, t.ModelProgress) and progress.turn == turn:
                return progress
    return None


async def is_session(client: Client, run_id: str) -> bool:
    try:
        status = await client.get_workflow_handle(run_id).query(
            t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=READ
        )
    except Exception:  # no worker yet: a session says so in its first events, but a plain run is likelier
        return False
    return status.session is not None


def gap_words(err: Exception) -> str:
    """What a failed poll means to the person following, not the transport's words ("Timeout expired")."""
    if isinstance(err, RPCError) and err.status in DEADLINE:
        return "no answer in time (the run's worker busy or restarting, or the server)"
    if isinstance(err, RPCError) and err.status == RPCStatusCode.UNAVAILABLE:
        return f"Temporal did not answer ({err.message})"
    return err.message if isinstance(err, RPCError) else f"{type(err).__name__}: {err}"


@dataclass
class Gap:
    """A poll that failed (a server restart, a worker gap): the follower keeps its place and retries."""

    error: str
    errors: int  # failed polls in a row, this one included


@dataclass
class Closed:
    """The run closed without an event saying how (terminated, timed out)."""

    status: str


async def follow(
    client: Client, run_id: str, since: int = 0
) -> AsyncGenerator[t.AnyRunEvent | t.ModelProgress | Gap | Closed, None]:
    """The run's story from event `since` on, as it happens: its events, the streamed text of the
    model call in flight, failed polls, and Closed when it has closed with no event left to tell.
    Never raises on a failed poll and never ends on its own otherwise: the caller decides when
    it has seen enough (an answer, GIVE_UP_AFTER gaps in a row) and stops iterating."""
    calling: int | None = None  # the turn whose model call is in flight
    shown: int | None = None  # the turn whose model call has shown text: it streams
    errors = 0
    clock = asyncio.get_running_loop().time
    asked = -POLL  # when the events were last read
    while True:
        progress: t.ModelProgress | None = None
        closed: str | None = None
        events: list[t.AnyRunEvent] = []
        try:
            # While text streams, its reads (a describe, served by the server alone) come every
            # STREAM_POLL; the events (a query, which the worker answers) every POLL as ever.
            fresh = calling is None or shown != calling or clock() - asked >= POLL
            if fresh:
                asked, events = clock(), (await events_since(client, run_id, since)).events
            if fresh and not events:
                status = (await client.get_workflow_handle(run_id).describe(rpc_timeout=READ)).status
                if status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
                    # It may have closed after its events were read: its last ones are read again.
                    events = (await events_since(client, run_id, since)).events
                    closed = None if events else STATUS_NAMES.get(status, "ended") if status else "ended"
            for ev in events:
                calling = ev.turn if ev.kind == t.EventKind.MODEL_STARTED else None if ev.kind in CALL_ENDS else calling
                # A lone tool's activity may make the next model call (machine/requests.py): its text too.
                calling = ev.turn + 1 if ev.kind == t.EventKind.TOOL_STARTED else calling
            if calling is not None and closed is None and not any(ev.kind in t.RUN_END_KINDS for ev in events):
                progress = await live_progress(client, run_id, calling)
        except Exception as err:  # a server restart or a worker gap: keep our place and retry, a while
            errors += 1
            yield Gap(gap_words(err), errors)
            await asyncio.sleep(1.0)
            continue
        errors = 0
        for ev in events:
            since = ev.seq + 1
            yield ev
        if progress is not None and progress.turn == calling:
            shown = calling if progress.text or progress.offset else shown
            yield progress
        if closed is not None:
            yield Closed(closed)
            return
        await asyncio.sleep(STREAM_POLL if calling is not None and shown == calling else POLL)
