"""Live updates by server-sent events: the inbox's waiting calls, and a run's story as it happens.

Each stream polls on the server, every POLL seconds, and is bounded: at most MAX_STREAMS open at
once, each at most LIFETIME seconds (the browser's EventSource then reconnects by itself). A
call decided anywhere (here, the CLI, a signal) leaves every open page at the next poll. A run's
stream is asked only for a run that exists (else 404 at once); it ends (`end`) as soon as the run
has ended or is gone, so it holds its slot no longer than the run is open.

A run's stream follows it as `client.py watch` does (the client's `RunHandle.follow` and
`TextTracker`: its events, and the streamed text of the model call in flight, with the same
handling of retried calls), and re-renders the parts of the page that changed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.events import TextDelta, TextTracker
from durable_agent_runner.client.follow import Closed, Gap
from durable_agent_runner.console import data, views, views_run
from durable_agent_runner.workflows import types as t

POLL = 0.5  # seconds between reads
LIFETIME = 1800.0  # seconds a stream stays open
KEEPALIVE = 15.0  # seconds between comments on a quiet stream
FINAL_VIEW_TRIES = 10  # an ended run's last view read again (a poll apart) before the stream ends without it
MAX_STREAMS = 64
LIVE_CHARS = 64 * 1024  # of a model call's streamed text shown live (the conversation has it whole)


def frame(event: str, payload: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False, default=str)}\n\n"


def calls_update(calls: list[data.Asking], shown: set[str], with_run: bool) -> dict[str, Any]:
    return {
        "keys": [w.key for w in calls],
        "rows": {w.key: views.call_row(w, with_run=with_run) for w in calls if w.key not in shown},
    }


async def inbox_stream(client: AgentClient, inbox: data.Inbox) -> AsyncIterator[str]:
    shown: list[str] | None = None
    clock = asyncio.get_running_loop().time
    began = quiet = clock()
    while clock() - began < LIFETIME:
        try:
            calls = await inbox.read(client)
        except Exception:  # Temporal restarting: keep the page as it is and ask again
            calls = None
        calls = calls[: views.INBOX_CALLS] if calls is not None else None  # the page's bound
        if calls is not None and [w.key for w in calls] != shown:
            yield frame("calls", calls_update(calls, set(shown or []), with_run=True))
            shown, quiet = [w.key for w in calls], clock()
        elif clock() - quiet > KEEPALIVE:
            yield ": still here\n\n"
            quiet = clock()
        await asyncio.sleep(POLL)


async def run_stream(client: AgentClient, run_id: str, since: int) -> AsyncIterator[str]:
    """The run page's updates from event `since` on, until the run ends (then `end`)."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)

    async def pump() -> None:
        async for item in client.get(run_id).follow(since):
            await queue.put(item)

    follower = asyncio.create_task(pump())
    text = TextTracker()
    clock = asyncio.get_running_loop().time
    began = polled = clock()
    dirty, ended = False, False
    shown_calls: list[str] = []  # the keys on the page (views_run.visible)
    known_calls: list[str] = []  # every waiting call's key, when last read
    live_chars = 0  # of the model call in flight, sent
    shown_controls = None
    last: tuple[Any, ...] | None = None
    final_misses, again = 0, False  # reads of the ended run's last view that failed; read it again
    try:
        yield ": following\n\n"  # the answer starts at once, before the first read
        while clock() - began < LIFETIME and (again or not ended):
            again = False
            try:
                item = await asyncio.wait_for(queue.get(), POLL)
            except TimeoutError:
                item = None
            if isinstance(item, t.ModelProgress):
                for piece in text.take(item):
                    text.note(piece)
                    chunk = piece.text if isinstance(piece, TextDelta) else ""
                    if piece.type == "discard":
                        live_chars = 0
                    elif live_chars >= LIVE_CHARS:
                        continue
                    elif live_chars + len(chunk) >= LIVE_CHARS:  # the rest comes whole, in the conversation
                        chunk = chunk[: LIVE_CHARS - live_chars] + "\n… (the rest shows in the conversation)"
                    live_chars += len(chunk)
                    yield frame(piece.type, {"text": chunk})
            elif isinstance(item, t.RunEvent):
                if item.kind in (t.EventKind.MODEL_FINISHED, t.EventKind.MODEL_DROPPED):  # the next call streams afresh
                    text.reset(item.turn + (item.kind == t.EventKind.MODEL_DROPPED))
                dirty = True
                if item.kind == t.EventKind.MODEL_FINISHED:
                    live_chars = 0
                    yield frame("discard", {})
                # A session goes on after "final" (its answer); a plain run ends with it.
                ended = item.kind in (t.SESSION_END_KINDS if _session(last) else t.END_KINDS)
            elif isinstance(item, Closed):
                dirty = ended = True
            elif isinstance(item, Gap):
                pass  # a failed read: the status read below says whether the run is still there
            if clock() - polled < POLL and not ended:
                continue
            polled = clock()
            status = await data._status(client, run_id)
            if status is None:  # no worker answers: has the run closed, or gone?
                try:
                    dirty = dirty or not await data.run_is_live(client, run_id)  # closed: its last view, then end
                except data.NotFound:
                    ended = True
                    break
                except Exception:  # Temporal restarting: ask again at the next poll
                    pass
            now = (
                (status.status, status.phase, status.turn, bool(status.paused), status.session is not None)
                if status
                else None
            )
            if now != last:
                dirty, last = True, now
            if not dirty:
                keys = data.call_keys(run_id, status)
                if keys is not None and keys != known_calls:
                    calls = await data.waiting_in(client, run_id, status)
                    known_calls, calls = [w.key for w in calls], views_run.visible(calls)
                    yield frame("calls", calls_update(calls, set(shown_calls), with_run=False))
                    shown_calls = [w.key for w in calls]
                continue
            dirty = False
            try:
                view = await data.run_view(client, run_id)
            except data.NotFound:  # gone (deleted, past retention): nothing more to follow
                ended = True
                break
            except Exception:  # a read that failed: the next poll tries again
                dirty = True
                # The run's last view is what the page ends on: read it again first, within a bound.
                again = ended and (final_misses := final_misses + 1) <= FINAL_VIEW_TRIES
                continue
            known_calls, calls = [w.key for w in view.waiting], views_run.visible(view.waiting)
            yield frame("calls", calls_update(calls, set(shown_calls), with_run=False))
            shown_calls = [w.key for w in calls]
            yield frame("section", {"id": "facts", "html": views_run.facts(view)})
            yield frame("section", {"id": "story", "html": views_run.story(view)})
            controls = views_run.controls(view)
            if controls != shown_controls:  # only when they change: a half-typed edit stays
                yield frame("section", {"id": "controls", "html": controls})
                shown_controls = controls
            ended = ended or view.status["status"] in t.ENDED_STATUSES
            # A worker answered, but a read of the ended run's story failed (a closed run's query
            # can be slow): the page shows what was read, and its story once a read succeeds.
            if ended and not view.live and status is not None:
                dirty = again = (final_misses := final_misses + 1) <= FINAL_VIEW_TRIES
        if ended:
            yield frame("end", {})
    finally:
        follower.cancel()
        with contextlib.suppress(BaseException):
            await follower


def _session(last: tuple[Any, ...] | None) -> bool:
    return bool(last and last[4])
