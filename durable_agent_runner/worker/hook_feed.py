"""The hook feed: the exactly-once lifecycle hooks, fed from each run's durable event log.

A worker whose hooks override an exactly-once method (durable_agent_runner/agents/lifecycle.py) runs one
`HookFeed` beside its Temporal workers. It finds the AgentRun workflows of its task queue by
visibility (the running ones, and the ones closed since it last looked), reads each run's
numbered events with the `agent.events` query (following the chain across continue-as-new), and
calls the hooks once per event, in order. After each event it writes the run's cursor to a file
of its own under the state directory (HOOKS_STATE_DIR, default .state/hooks), atomically (a
rename), so a worker killed and restarted goes on from the next event: nothing skipped, nothing
repeated — except the one event whose hooks had returned when the process died and whose
checkpoint had not yet been written (hooks get run_id and seq to dedupe on, if they must).

One feed per state directory delivers: it holds a lock on the directory, and the feeds of other
workers sharing it wait. Every wait is bounded: queries and listings have an RPC timeout, a run
without news is polled less often (up to IDLE_MAX seconds), errors back off, and a stop is
honoured between two events.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time
import urllib.parse
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.agents.lifecycle import HookCaller, Step
from durable_agent_runner.config.env import WorkerSettings
from durable_agent_runner.workflows import types as t

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = ".state/hooks"
POLL = 0.5  # seconds between polls of a run with news
IDLE_MAX = 5.0  # seconds between polls of a run without news (doubling up to this)
LIST_EVERY = 2.0  # seconds between visibility listings
RPC_TIMEOUT = timedelta(seconds=5)
MAX_LISTED = 1000  # executions per listing (a warning says when it binds)
MAX_RUNS_PER_POLL = 50  # runs whose events are read in one round
PAGES_PER_RUN = 4  # pages of events (500 each) delivered per run and round
ERROR_BACKOFF_MAX = 30.0
LOOKBACK = timedelta(seconds=60)  # visibility and clocks lag: runs closed this long before the last look count too
LOCK_RETRY = 5.0
FORGET_DONE_AFTER = timedelta(days=7)  # a finished run's checkpoint, once no listing can show it again


def state_dir_from_env() -> Path:
    """$HOOKS_STATE_DIR, as the settings read it (config/env.py)."""
    return Path(WorkerSettings.load().hooks_state_dir or DEFAULT_STATE_DIR)


@dataclass
class Cursor:
    """A run's place in its event log, written after each delivered event."""

    run_id: str
    next: int = 0  # the seq of the next event to deliver
    agent: str = ""  # the agent in charge ("" until the first event)
    active: bool = False  # an agent has started and not yet ended
    done: bool = False  # every event delivered, and the run has closed


@dataclass
class _Follow:
    cursor: Cursor
    closed: bool = False  # the latest listing said it is closed
    due: float = 0.0  # monotonic time of the next poll
    idle: int = 0  # polls in a row without news
    errors: int = 0  # failed polls in a row


class Checkpoints:
    """A file per run under `root/runs/`, plus the time of the last listing (`root/feed.json`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = root / "runs"

    def path(self, run_id: str) -> Path:
        name = urllib.parse.quote(run_id, safe="-_.")
        if len(name) > 180 or name.startswith("."):
            name = "id-" + hashlib.sha256(run_id.encode()).hexdigest()
        return self.runs / f"{name}.json"

    def load(self, run_id: str) -> Cursor | None:
        path = self.path(run_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Cursor(**data) if data.get("run_id") == run_id else None
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, OSError) as err:  # not written by us: writes are atomic
            log.warning("hook feed: unreadable checkpoint %s (%s); run %s starts over", path, err, run_id)
            return None

    def unfinished(self) -> list[Cursor]:
        cursors: list[Cursor] = []
        for path in sorted(self.runs.glob("*.json")):
            try:
                cursor = Cursor(**json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, TypeError, OSError) as err:
                log.warning("hook feed: ignoring unreadable checkpoint %s (%s)", path, err)
                continue
            if not cursor.done:
                cursors.append(cursor)
        return cursors

    def save(self, cursor: Cursor) -> None:
        _write_atomic(self.path(cursor.run_id), asdict(cursor))

    def last_look(self) -> datetime | None:
        try:
            return datetime.fromisoformat(json.loads((self.root / "feed.json").read_text())["last_look"])
        except (FileNotFoundError, KeyError, ValueError):
            return None

    def save_last_look(self, at: datetime) -> None:
        _write_atomic(self.root / "feed.json", {"last_look": at.isoformat()})

    def forget_done(self, before: datetime) -> None:
        """Delete finished runs' checkpoints written before `before`: no listing shows them again."""
        cutoff = before.timestamp()
        for path in self.runs.glob("*.json"):
            with contextlib.suppress(OSError, ValueError, TypeError):
                if path.stat().st_mtime < cutoff and json.loads(path.read_text(encoding="utf-8")).get("done"):
                    path.unlink()


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class HookFeed:
    """`start()` when the worker starts, `await stop()` when it stops."""

    def __init__(self, client: Client, task_queue: str, hooks: HookCaller, state_dir: Path) -> None:
        self.client = client
        self.task_queue = task_queue
        self.hooks = hooks
        self.checkpoints = Checkpoints(state_dir)
        self._runs: dict[str, _Follow] = {}
        self._finished: dict[str, float] = {}  # run id -> monotonic time it was seen done
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock: IO[bytes] | None = None
        self._listed_at = 0.0
        self._errors = 0  # failed listings in a row

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="hook feed")

    async def stop(self) -> None:
        """Stop between two events; a hook in flight gets its own bound, then is abandoned."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=self._grace())
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, 1.0)
        if self._lock is not None:
            self._lock.close()  # releases the directory's lock
            self._lock = None

    def _grace(self) -> float:
        return max((h.timeout_seconds for h in self.hooks.hooks), default=0.0) + 1.0

    # ------------------------------------------------------------------------------ the loop

    async def _supervise(self) -> None:
        """The feed's loop, restarted after anything unexpected: logged in one line, then a pause."""
        while not self._stopping.is_set():
            try:
                await self._run()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("hook feed: %s: %s; restarting in 5s", type(err).__name__, err)
                self._runs.clear()
                await self._pause(5.0)

    async def _run(self) -> None:
        while not await self._take_lock():
            await self._pause(LOCK_RETRY)
            if self._stopping.is_set():
                return
        for cursor in self.checkpoints.unfinished():
            self._runs.setdefault(cursor.run_id, _Follow(cursor))
        last = self.checkpoints.last_look()
        if last is not None:
            self.checkpoints.forget_done(min(last - LOOKBACK, datetime.now(UTC)) - FORGET_DONE_AFTER)
        log.info("hook feed: following runs of %s (state in %s)", self.task_queue, self.checkpoints.root)
        while not self._stopping.is_set():
            if time.monotonic() - self._listed_at >= LIST_EVERY:
                await self._list()
            now = time.monotonic()
            due = sorted((f for f in self._runs.values() if f.due <= now), key=lambda f: f.due)
            for follow in due[:MAX_RUNS_PER_POLL]:
                if self._stopping.is_set():
                    return
                await self._poll(follow)
            await self._pause(POLL)

    async def _take_lock(self) -> bool:
        if self._lock is not None:  # held since before a restart of the loop
            return True
        self.checkpoints.runs.mkdir(parents=True, exist_ok=True)
        f = (self.checkpoints.root / "feed.lock").open("ab")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            if self._lock is None:
                log.info("hook feed: another worker's feed holds %s; waiting", self.checkpoints.root)
            return False
        self._lock = f
        return True

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    # ------------------------------------------------------------------------------ discovery

    async def _list(self) -> None:
        self._listed_at = time.monotonic()
        looked = datetime.now(UTC)
        since = (self.checkpoints.last_look() or looked) - LOOKBACK
        query = (
            f'WorkflowType="{t.WORKFLOW_NAME}" AND TaskQueue="{_quoted(self.task_queue)}" AND '
            f'(ExecutionStatus="Running" OR CloseTime > "{since.strftime("%Y-%m-%dT%H:%M:%SZ")}")'
        )
        running: dict[str, bool] = {}
        try:
            async for wf in self.client.list_workflows(query, limit=MAX_LISTED, rpc_timeout=RPC_TIMEOUT):
                running[wf.id] = running.get(wf.id, False) or wf.status == WorkflowExecutionStatus.RUNNING
        except Exception as err:
            self._errors += 1
            if self._errors == 1:
                log.warning("hook feed: cannot list runs (%s); retrying", _reason(err))
            self._listed_at += min(2.0**self._errors, ERROR_BACKOFF_MAX)
            return
        if self._errors:
            log.info("hook feed: listing runs again")
        self._errors = 0
        if len(running) >= MAX_LISTED:
            log.warning("hook feed: %d runs listed, the most one listing takes; others wait", MAX_LISTED)
        self.checkpoints.save_last_look(looked)
        forget = time.monotonic() - 2 * (LOOKBACK.total_seconds() + LIST_EVERY)
        self._finished = {k: v for k, v in self._finished.items() if v > forget}
        for run_id, is_running in running.items():
            follow = self._runs.get(run_id)
            if follow is None and run_id not in self._finished:
                cursor = self.checkpoints.load(run_id) or Cursor(run_id)
                if cursor.done:
                    self._finished[run_id] = time.monotonic()
                    continue
                follow = self._runs[run_id] = _Follow(cursor)
            if follow is not None:
                if not is_running and not follow.closed:
                    follow.due = 0.0  # closed: read what is left, now
                follow.closed = not is_running

    # ------------------------------------------------------------------------------ delivery

    async def _poll(self, follow: _Follow) -> None:
        cursor = follow.cursor
        try:
            delivered = 0
            for _ in range(PAGES_PER_RUN):
                page = await self._events(cursor.run_id, cursor.next)
                fresh = [ev for ev in page.events if ev.seq >= cursor.next]
                if fresh and not cursor.agent:
                    cursor.agent = await self._first_agent(cursor.run_id)
                for ev in fresh:
                    if ev.seq > cursor.next:
                        log.warning("hook feed: run %s: events %d–%d are no longer held; skipped",
                                    cursor.run_id, cursor.next, ev.seq - 1)  # fmt: skip
                    await self._deliver(cursor, ev)
                    cursor.next = ev.seq + 1
                    self.checkpoints.save(cursor)
                    delivered += 1
                    if self._stopping.is_set():
                        return
                if page.done and cursor.next >= page.next:
                    return self._finish(follow)
                if not fresh:
                    break
            if not delivered and follow.closed and await self._closed_for_good(cursor.run_id):
                return self._finish(follow)  # terminated or timed out: no event says so
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                log.warning("hook feed: run %s no longer exists; its remaining events are lost", cursor.run_id)
                return self._finish(follow)
            return self._failed(follow, err)
        except Exception as err:
            return self._failed(follow, err)
        if follow.errors:
            log.info("hook feed: run %s: reading events again", cursor.run_id)
        follow.errors = 0
        follow.idle = 0 if delivered else follow.idle + 1
        follow.due = time.monotonic() + min(POLL * 2.0**follow.idle, IDLE_MAX)

    def _failed(self, follow: _Follow, err: Exception) -> None:
        follow.errors += 1
        if follow.errors == 1:
            log.warning("hook feed: run %s: cannot read events (%s); retrying", follow.cursor.run_id, _reason(err))
        follow.due = time.monotonic() + min(2.0**follow.errors, ERROR_BACKOFF_MAX)

    def _finish(self, follow: _Follow) -> None:
        follow.cursor.done = True
        self.checkpoints.save(follow.cursor)
        self._runs.pop(follow.cursor.run_id, None)
        self._finished[follow.cursor.run_id] = time.monotonic()

    async def _deliver(self, cursor: Cursor, ev: t.AnyRunEvent) -> None:
        """The hooks for one event, in the order the class docstring of RunHooks gives."""
        step = Step(run_id=cursor.run_id, seq=ev.seq, turn=ev.turn, agent=cursor.agent, event=ev)
        call = self.hooks.call
        match ev:  # a call's events always name the call and its tool (t.CallEvent)
            case t.ModelStartedEvent():
                if not cursor.active:
                    cursor.active = True
                    await call("on_agent_start", step, cursor.agent)
                await call("on_model_start", step, ev.detail.rsplit(" · ", 1)[-1])
            case t.ModelFinishedEvent():
                await call("on_model_end", step, ev.text, ev.usage)
            case t.ToolStartedEvent():
                await call("on_tool_start", step, ev.tool, ev.call_id, ev.detail)
            case t.ToolFinishedEvent():
                await call("on_tool_end", step, ev.tool, ev.call_id, ev.text)
            case t.HandoffEvent():
                source, _, target = ev.detail.partition(" → ")
                await call("on_handoff", step, source, target)
                cursor.agent, cursor.active = target, True
                await call("on_agent_start", Step(step.run_id, step.seq, step.turn, target, ev), target)
            case t.ApprovalRequestedEvent():
                await call("on_approval_requested", step, ev.tool, ev.call_id, ev.detail)
            case t.ApprovalDecidedEvent():
                await call("on_approval_decided", step, ev.tool, ev.call_id, ev.detail)
            case _ if ev.kind in t.END_KINDS:
                cursor.active = False
                await call("on_agent_end", step, cursor.agent, ev.text)
            case t.AnsweredEvent():  # a session's answer is over (a failed one too): the next one starts anew
                cursor.active = False
        await call("on_event", step)

    # ------------------------------------------------------------------------------ reading

    async def _events(self, run_id: str, since: int, execution: str | None = None) -> t.EventsPage:
        """Events from `since` on, reaching back through earlier executions that hold some (as
        durable_agent_runner/client/follow.py `events_since` does, with every call bounded)."""
        handle = self.client.get_workflow_handle(run_id, run_id=execution)
        page: t.EventsPage = await handle.query(
            t.EVENTS_QUERY, t.EventsQuery(since=since), result_type=t.EventsPage, rpc_timeout=RPC_TIMEOUT
        )
        if since < page.first and page.previous_run_id:
            older = await self._events(run_id, since, page.previous_run_id)
            held = [e for e in older.events if e.seq < page.first]
            if older.next < page.first:  # the earlier execution has more than one page: those first
                return t.EventsPage(events=held, next=older.next, first=older.first)
            page.events = held + page.events
        return page

    async def _first_agent(self, run_id: str) -> str:
        status: t.RunStatus = await self.client.get_workflow_handle(run_id).query(
            t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=RPC_TIMEOUT
        )
        return status.handoffs[0].from_agent if status.handoffs else status.agent or ""

    async def _closed_for_good(self, run_id: str) -> bool:
        desc = await self.client.get_workflow_handle(run_id).describe(rpc_timeout=RPC_TIMEOUT)
        return desc.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _reason(err: Exception) -> str:
    return err.message if isinstance(err, RPCError) else f"{type(err).__name__}: {err}"
