"""What `RunHandle.events()` yields: the run's steps (`RunEvent`), the text of the reply being
streamed (`TextDelta`, withdrawn by `TextDiscarded` when its model call failed half-way and is
retried), `Retrying` while reads fail (a server restart, a worker gap), and `RunClosed` when the run
closed with no event saying how (terminated, timed out). `client.py watch` prints exactly these.

A heartbeat holds only the tail of the text streamed so far, with its `offset` in the whole:
`TextTracker` turns heartbeats into deltas of what lies past what was shown, and says how many
characters streamed by unseen between two reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel
from temporalio.client import Client

from durable_agent_runner.client.errors import EventsUnavailable
from durable_agent_runner.client.follow import GIVE_UP_AFTER, Closed, Gap, follow, is_session
from durable_agent_runner.machine.texts import EVENT_TEXT
from durable_agent_runner.workflows import types as t

# events only a session has
SESSION_KINDS = frozenset({t.EventKind.MESSAGE, t.EventKind.WAITING, t.EventKind.ANSWERED, t.EventKind.ENDED})


class TextDelta(BaseModel):
    """New text of the reply being streamed in `turn`: `text` starts at `offset` in the reply;
    `skipped` characters before it streamed by between two reads and were never seen."""

    type: Literal["delta"] = "delta"
    turn: int
    attempt: int
    offset: int
    text: str
    skipped: int = 0


class TextDiscarded(BaseModel):
    """Model call `attempt` of `turn` failed mid-stream: the text its deltas showed is void."""

    type: Literal["discard"] = "discard"
    turn: int
    attempt: int


class Retrying(BaseModel):
    """A read failed (`error`, `in_a_row` times so far); the stream keeps its place and retries."""

    type: Literal["retrying"] = "retrying"
    error: str
    in_a_row: int


class RunClosed(BaseModel):
    """The run closed without an event saying how: `status` is terminated, timed_out, ..."""

    type: Literal["closed"] = "closed"
    status: str


Event = t.AnyRunEvent | TextDelta | TextDiscarded | Retrying | RunClosed


@dataclass
class Live:
    """The streamed text shown so far for the model call in flight."""

    turn: int = 0
    attempt: int = 0
    end: int = 0  # where the text shown so far ends in the reply
    head: str = ""  # the reply's first characters as shown, without gaps: the event is checked against it
    skipped: int = 0  # characters that streamed by between two polls, never shown


class TextTracker:
    """Turns the model call's heartbeats into deltas, and remembers what they showed."""

    def __init__(self) -> None:
        self.live = Live()

    def take(self, progress: t.ModelProgress) -> list[TextDelta | TextDiscarded]:
        """What this heartbeat adds to what was shown (not yet noted: `note` each item shown)."""
        out: list[TextDelta | TextDiscarded] = []
        live = self.live
        if (progress.turn, progress.attempt) != (live.turn, live.attempt):
            if live.end and progress.turn == live.turn:
                out.append(TextDiscarded(turn=live.turn, attempt=live.attempt))
            live = Live(progress.turn, progress.attempt)
        start, end = progress.offset, progress.offset + len(progress.text)
        if end <= live.end:
            return out  # nothing new: an older heartbeat, or the same one again
        skipped = max(start - live.end, 0)
        new = progress.text[max(live.end - start, 0) :]
        out.append(
            TextDelta(turn=progress.turn, attempt=progress.attempt, offset=end - len(new), text=new, skipped=skipped)
        )
        return out

    def note(self, item: TextDelta | TextDiscarded) -> None:
        """Remember that `item` was shown."""
        if isinstance(item, TextDiscarded):
            self.live = Live(item.turn)
            return
        live = self.live
        if (item.turn, item.attempt) != (live.turn, live.attempt):
            self.live = live = Live(item.turn, item.attempt)
        if not live.skipped and not item.skipped and len(live.head) < EVENT_TEXT:
            live.head += item.text[: EVENT_TEXT - len(live.head)]
        live.end, live.skipped = item.offset + len(item.text), live.skipped + item.skipped

    def reset(self, turn: int) -> Live:
        """The reply of `turn` has finished: start afresh, and return what was shown of it."""
        live, self.live = self.live, Live(turn)
        return live


async def stream(
    client: Client, run_id: str, since: int = 0, give_up_after: int = GIVE_UP_AFTER
) -> AsyncIterator[Event]:
    """The run's story from event `since` on, until it ends: a plain run at its answer, failure or
    cancellation; a session when it ends. EventsUnavailable after `give_up_after` failed reads in
    a row."""
    tracker = TextTracker()
    # A session's first event is a message or a wait for one; asking first covers one being resumed.
    session = await is_session(client, run_id)
    async with aclosing(follow(client, run_id, since)) as story:
        async for item in story:
            if isinstance(item, t.ModelProgress):
                for piece in tracker.take(item):
                    tracker.note(piece)
                    yield piece
            elif isinstance(item, Gap):
                if item.errors >= give_up_after:
                    raise EventsUnavailable(since, item.error, item.errors)
                yield Retrying(error=item.error, in_a_row=item.errors)
            elif isinstance(item, Closed):
                yield RunClosed(status=item.status)
                return
            else:
                if item.kind in (t.EventKind.MODEL_FINISHED, t.EventKind.MODEL_DROPPED):
                    tracker.reset(item.turn + (item.kind == t.EventKind.MODEL_DROPPED))
                since = item.seq + 1
                yield item
                session = session or item.kind in SESSION_KINDS
                if item.kind in (t.SESSION_END_KINDS if session else t.RUN_END_KINDS):
                    return
