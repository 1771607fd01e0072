"""One attempt at a model call as the model activity (activities/model.py) holds it, and the
streamed text it shows watchers through heartbeat details: a tail, masked before it is cut, with
no part of a key at either edge. Between snapshots the text is compacted to that tail (and some
slack), so what the worker holds for watchers stays bounded however fast a server streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from durable_agent_runner.activities.wire import MalformedResponse, Wire
from durable_agent_runner.redact import FRAGMENT, Redactor
from durable_agent_runner.workflows.types import ModelProgress

TAIL_CHARS = 64 * 1024  # of streamed text in heartbeat details: watchers only need the tail
SLACK_CHARS = 4096  # kept beyond the tail, so masking sees a key that crosses the tail's start
# A whole stream, framing included: each delta of a few characters comes wrapped in 100-250
# characters of JSON, so a stream is many times its text (fake_llm streams a 3 MB reply as ~40 MB;
# OpenAI's per-token deltas make it ~50 times). Lines are dropped once parsed (unless captured),
# so this bounds time spent rather than memory, far past any model's output limit (128 k tokens
# stream as ~25 MB).
MAX_STREAM_CHARS = 256 * 1024 * 1024


@dataclass
class Call:
    """One attempt at a model call: what is sent, what came back raw (kept only to capture it),
    and the streamed text shown to watchers: a masked tail, and where it starts in the whole
    masked text (`ModelProgress.offset`), so that a watcher keeps up past the tail's size."""

    wire: Wire
    url: httpx.URL
    body: dict[str, Any]
    headers: httpx.Headers
    stream: bool
    turn: int
    timeout: httpx.Timeout
    redactor: Redactor
    progress: ModelProgress
    capture: bool = False  # keep the raw reply, for the wire capture (or a lifecycle hook)
    raw: list[str] = field(default_factory=lambda: list[str]())
    payload: object = None  # the parsed body of a reply that was not streamed
    received: int = 0  # characters of the body so far
    # The streamed text's tail: pieces since the last snapshot, after what is kept of earlier ones.
    _pieces: list[str] = field(default_factory=lambda: list[str]())
    _size: int = 0
    _dropped: int = 0  # characters of the masked text before the kept pieces
    _cut: bool = False  # the kept pieces start inside a key (a forced cut): hide what is left of it
    _fresh: bool = False  # text arrived since the last snapshot

    def delta(self, text: str) -> None:
        self._pieces.append(text)
        self._size += len(text)
        self._fresh = True
        if self._size > 4 * TAIL_CHARS:  # between snapshots, a fast server may send a lot
            self._compact()

    def _compact(self) -> None:
        text = "".join(self._pieces)
        excess = len(text) - (TAIL_CHARS + SLACK_CHARS)
        if excess > 0:
            at, forced = self._cut_at(text, excess)
            # After a forced cut the text starts inside a key; a cut within a key's length of
            # that start may still be inside it, where `leaks` cannot see what is left of it.
            longest = len(self.redactor.secrets[0]) if self.redactor.secrets else 0
            self._cut = forced or (self._cut and at < longest)
            self._dropped += len(self.redactor.text(text[:at]))
            text = text[at:]
        self._pieces, self._size = [text], len(text)

    def _cut_at(self, text: str, at: int) -> tuple[int, bool]:
        """Where to drop the text before: `at`, or a little earlier so that no key is cut or
        touched (masking each side alone then gives what masking the whole gives, and offsets
        in the masked text stay exact). Forced at `at`, and said so, when keys fill the slack."""
        if not self.redactor.secrets:
            return at, False
        for cut in range(at, max(at - SLACK_CHARS, 0), -1):
            if not self.redactor.leaks(text[max(cut - FRAGMENT, 0) : cut + FRAGMENT]):
                return cut, False
        return at, True

    def snapshot(self) -> ModelProgress:
        """The progress to heartbeat: the last TAIL_CHARS of the text, masked first, and with
        no part of a key at either edge (one still streaming in, or one a forced cut split);
        `offset` counts the masked characters before it."""
        if self._fresh:
            self._compact()
            text = self._pieces[0]
            shown = self.redactor.visible(text, cut_before=self._cut, cut_after=True)
            front = 0
            if self._cut:  # after a forced cut, visible() hides what is left of a key: count it as dropped
                front = len(self.redactor.text(text)) - len(self.redactor.visible(text, cut_before=True))
            tail = shown[-TAIL_CHARS:]
            self.progress.text, self.progress.offset = tail, self._dropped + front + len(shown) - len(tail)
            self._fresh = False
        return self.progress

    def reset(self) -> ModelProgress:
        self._pieces, self._size, self._dropped, self._cut, self._fresh = [], 0, 0, False, False
        self.progress.text, self.progress.offset = "", 0
        return self.progress

    async def count(self, chunks: AsyncIterator[str]) -> AsyncIterator[str]:
        async for chunk in chunks:
            self.received += len(chunk)
            if self.received > MAX_STREAM_CHARS:
                raise MalformedResponse(f"stream longer than {MAX_STREAM_CHARS} characters")
            yield chunk

    async def tee(self, lines: AsyncIterator[str]) -> AsyncIterator[str]:
        async for line in lines:
            self.raw.append(line)
            yield line
