"""Follow a run as it happens: `client.py watch RUN_ID` and `client.py run --follow PROMPT`.

Two sources, one story. Durable steps (tool calls, approvals, each reply's final text, the
answer) come from the run's numbered event log (query `agent.events`), so a watcher that
reconnects with `--since N` resumes without gaps or repeats, across continue-as-new too. The
text of a reply still being streamed comes from the model activity's heartbeat details, read
with `describe()`; it is tagged with the call's attempt, so when a call fails half-way and is
retried, the partial text is withdrawn and never passed off as the answer. A heartbeat holds only
the text's tail, with its `offset` in the whole: the watcher shows what lies past what it has
shown, and says so when text streamed by faster than it polls.

`follow` yields that story as it happens, retrying through server gaps; `watch` prints it, and
`client.py chat` (durable_agent_runner/cli/chat.py) renders it as a conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TextIO

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from durable_agent_runner.cli.common import existing
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.state import EVENT_TEXT

ENDINGS = ("final", "failed", "cancelled")  # events after which a run calls no model
POLL = 0.1  # seconds between polls while a run is live
STREAM_POLL = 0.05  # seconds between reads of the streamed text while a model call is in flight
GIVE_UP_AFTER = 60  # consecutive failed polls (about a minute) before the watcher gives up


@dataclass
class Live:
    """The streamed text shown so far for the model call in flight."""

    turn: int = 0
    attempt: int = 0
    end: int = 0  # where the text shown so far ends in the reply
    head: str = ""  # the reply's first characters as shown, without gaps: the event is checked against it
    skipped: int = 0  # characters that streamed by between two polls, never shown


@dataclass
class Printer:
    run_id: str
    as_json: bool
    out: TextIO = field(default_factory=lambda: sys.stdout)
    live: Live = field(default_factory=Live)
    answered: int | None = None  # the turn whose reply text was last shown whole

    def emit(self, obj: dict[str, Any], text: str | None) -> None:
        if self.as_json:
            print(json.dumps(obj, default=str, ensure_ascii=False), file=self.out, flush=True)
        elif text is not None:
            print(text, end="", file=self.out, flush=True)

    def delta(self, progress: t.ModelProgress) -> None:
        live = self.live
        if (progress.turn, progress.attempt) != (live.turn, live.attempt):
            if live.end and progress.turn == live.turn:
                self.discard(live.attempt)
            self.live = live = Live(progress.turn, progress.attempt)
        start, end = progress.offset, progress.offset + len(progress.text)
        if end <= live.end:
            return  # nothing new: an older heartbeat, or the same one again
        skipped = max(start - live.end, 0)
        new = progress.text[max(live.end - start, 0) :]
        if not live.skipped and not skipped and len(live.head) < EVENT_TEXT:
            live.head += new[: EVENT_TEXT - len(live.head)]
        obj: dict[str, Any] = {"type": "delta", "turn": progress.turn, "attempt": progress.attempt}
        obj |= {"offset": end - len(new), "text": new} | ({"skipped": skipped} if skipped else {})
        live.end, live.skipped = end, live.skipped + skipped
        self.emit(obj, (f"\n  … [{skipped} characters streamed by unseen] …\n" if skipped else "") + new)

    def discard(self, attempt: int) -> None:
        obj = {"type": "discard", "turn": self.live.turn, "attempt": attempt}
        self.emit(obj, f"\n  ↻ model call attempt {attempt} failed mid-stream; its partial text above is void\n")
        self.live = Live(self.live.turn)

    def event(self, ev: t.RunEvent) -> None:
        obj = {"type": "event", **ev.model_dump(mode="json")}
        self.emit(obj, None)
        if self.as_json:
            if ev.kind == "model_finished":
                self.live = Live(ev.turn)
            return
        self.emit(obj, self._render(ev))

    def reply(self, ev: t.RunEvent) -> str:
        """A finished reply's text (a model_finished event) as it completes the live view: what the
        live view had not shown yet, or the whole reply again if a retry changed it."""
        live, self.live = self.live, Live(ev.turn)
        self.answered = ev.turn if not ev.detail else None
        text = ev.text
        if live.turn == ev.turn and live.end:
            n = min(len(live.head), len(text), EVENT_TEXT)
            if text[:n] != live.head[:n]:
                text = "\n  ↻ the reply was retried; its final text:\n" + text
            elif len(text) > EVENT_TEXT and live.end >= EVENT_TEXT:  # the event keeps less than was shown
                text = f"\n  (the run's events keep a reply's first {EVENT_TEXT} characters; the live view may"
                text += f" have missed its end: python client.py result {self.run_id} prints an answer whole)"
            else:
                text = text[live.end :]  # what the live view had not shown yet
        return text + "\n" if (text or live.end) else ""

    def _render(self, ev: t.RunEvent) -> str:
        if ev.kind == "model_started":
            return f"── turn {ev.turn} · {ev.detail}\n"
        if ev.kind == "model_finished":
            calls = f"  → asks for: {ev.detail}\n" if ev.detail else ""
            return self.reply(ev) + calls
        if ev.kind == "tool_started":
            return f"  ⚙ {ev.detail}\n"
        if ev.kind == "tool_finished":
            return f"  ← {ev.tool}: {ev.text}\n"
        if ev.kind == "approval_requested":
            hint = f"python client.py approve {self.run_id} {ev.call_id}"
            return f"  ⏸ waiting for approval: {ev.detail}  ({hint})\n"
        if ev.kind == "approval_decided":
            return f"  ✔ {ev.tool} {ev.call_id}: {ev.detail}\n"
        if ev.kind == "final":  # the answer is the reply just shown; repeat it only if it was not
            return f"✓ final answer (turn {ev.turn})\n" if self.answered == ev.turn else f"\n{ev.text}\n"
        if ev.kind == "handoff":
            return f"  ⇢ handoff: {ev.detail}\n"
        if ev.kind == "guardrail":
            return f"  ⛨ {ev.detail}\n"
        if ev.kind == "output_refused":
            return f"  ↺ final output refused, asking again: {ev.text.splitlines()[0] if ev.text else ''}\n"
        if ev.kind == "cancelled":
            return f"\n✗ run {ev.text}\n"
        if ev.kind == "failed":
            return f"\n✗ run failed: {ev.text}\n"
        return self._later(ev)

    def _later(self, ev: t.RunEvent) -> str:
        """Sessions' and breakpoints' steps."""
        first_line = ev.text.splitlines()[0] if ev.text else ""
        if ev.kind == "message":
            return f"\n» {ev.detail}: {first_line}\n"
        if ev.kind == "answered":
            return f"  ✗ {ev.detail}: {first_line}\n" if "failed" in ev.detail else f"✓ answered {ev.detail}\n"
        if ev.kind == "compacted":
            return f"  ⊟ memory compacted: {ev.detail}\n"
        if ev.kind == "waiting":
            return f"… waiting for the next message ({ev.detail})\n"
        if ev.kind == "ended":
            return f"\n■ session ended: {ev.text}\n"
        if ev.kind == "paused":
            return f"  ⏸ paused {ev.detail}  (python client.py inspect {self.run_id})\n"
        if ev.kind == "edited":
            return f"  ✎ {ev.detail}\n"
        if ev.kind == "resumed":
            return f"  ▶ resumed {ev.detail}\n"
        if ev.kind == "call_in_doubt":
            hint = f"python client.py resolve {self.run_id} {ev.call_id} --rerun | --result JSON | --fail REASON"
            return f"  ⚠ in doubt: {ev.tool} {ev.call_id} {ev.detail}  ({hint})\n"
        if ev.kind == "call_resolved":
            return f"  ✔ {ev.tool} {ev.call_id}: {ev.detail}\n"
        return f"  · {ev.kind}: {ev.detail or first_line}\n"  # a kind newer than this watcher


async def events_since(client: Client, run_id: str, since: int, execution: str | None = None) -> t.EventsPage:
    """Events from `since` on, reaching back through earlier executions when they hold some."""
    handle = client.get_workflow_handle(run_id, run_id=execution)
    page: t.EventsPage = await handle.query(t.EVENTS_QUERY, t.EventsQuery(since=since), result_type=t.EventsPage)
    if since < page.first and page.previous_run_id:
        older = await events_since(client, run_id, since, page.previous_run_id)
        held = [e for e in older.events if e.seq < page.first]
        # An earlier execution with more than a page left: this page is its events alone, so the
        # next call goes on from there (never a gap between the two executions).
        more = bool(held) and held[-1].seq + 1 < page.first
        page.events = held if more else held + page.events
    return page


async def live_progress(client: Client, run_id: str, turn: int) -> t.ModelProgress | None:
    desc = await client.get_workflow_handle(run_id).describe()
    for pending in desc.raw_description.pending_activities:
        if pending.activity_id == f"model-{turn}" and pending.heartbeat_details.payloads:
            values = await client.data_converter.decode(pending.heartbeat_details.payloads, [t.ModelProgress])
            progress = values[0]
            return progress if isinstance(progress, t.ModelProgress) else None
    return None


async def is_session(client: Client, run_id: str) -> bool:
    try:
        status = await client.get_workflow_handle(run_id).query(t.STATUS_QUERY, result_type=t.RunStatus)
    except Exception:  # no worker yet: a session says so in its first events, but a plain run is likelier
        return False
    return status.session is not None


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
) -> AsyncGenerator[t.RunEvent | t.ModelProgress | Gap | Closed, None]:
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
        events: list[t.RunEvent] = []
        try:
            # While text streams, its reads (a describe, served by the server alone) come every
            # STREAM_POLL; the events (a query, which the worker answers) every POLL as ever.
            fresh = calling is None or shown != calling or clock() - asked >= POLL
            if fresh:
                asked, events = clock(), (await events_since(client, run_id, since)).events
            if fresh and not events:
                status = (await client.get_workflow_handle(run_id).describe()).status
                if status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
                    # It may have closed after its events were read: its last ones are read again.
                    events = (await events_since(client, run_id, since)).events
                    closed = None if events else status.name.lower() if status else "ended"
            for ev in events:
                calling = ev.turn if ev.kind == "model_started" else None if ev.kind == "model_finished" else calling
            if calling is not None and closed is None and not any(ev.kind in ENDINGS for ev in events):
                progress = await live_progress(client, run_id, calling)
        except Exception as err:  # a server restart or a worker gap: keep our place and retry, a while
            errors += 1
            yield Gap(err.message if isinstance(err, RPCError) else f"{type(err).__name__}: {err}", errors)
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


async def watch(client: Client, run_id: str, since: int = 0, as_json: bool = False, out: TextIO | None = None) -> int:
    """Print the run's story from event `since` on until it ends; 0 if it answered, else 1."""
    printer = Printer(run_id, as_json, out or sys.stdout)
    # A session's answers don't end it: its watcher goes on until the session ends. Its events
    # say so too (a session's first event is a message, or waiting for one).
    session = await is_session(client, run_id)
    async with aclosing(follow(client, run_id, since)) as story:
        async for item in story:
            if isinstance(item, t.ModelProgress):
                printer.delta(item)
            elif isinstance(item, Gap):
                if item.errors >= GIVE_UP_AFTER:
                    printer.emit({"type": "gave_up", "error": item.error, "next": since}, None)
                    print(f"watch: giving up after {item.errors} failed polls: {item.error}", file=sys.stderr)
                    return 1
                printer.emit({"type": "retrying", "error": item.error}, None)
                print(f"(watch: {item.error}; retrying)", file=sys.stderr)
            elif isinstance(item, Closed):
                printer.emit({"type": "ended", "status": item.status}, f"\n✗ run {item.status}\n")
                return 1
            else:
                printer.event(item)
                since = item.seq + 1
                session = session or item.kind in ("message", "waiting", "answered", "ended")
                if item.kind in (("ended", "failed", "cancelled") if session else ("final", "failed", "cancelled")):
                    printer.emit({"type": "end", "outcome": item.kind, "next": since}, None)
                    return 0 if item.kind in ("final", "ended") else 1
    return 1  # not reached: the story ends with Closed


async def cmd_watch(client: Client, args: argparse.Namespace) -> int:
    await existing(client, args.run_id)
    return await watch(client, args.run_id, args.since, args.json)
