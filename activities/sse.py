"""A server-sent events parser that follows the spec's framing, not just the happy path.

Handles `event:` and `data:` fields, multi-line data (joined with "\\n"), comment lines
(`: keep-alive`), CR, LF and CRLF line ends (`iter_lines`, also across chunk boundaries) and a
final event without a trailing blank line.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

_EOL = re.compile(r"\r\n|\r|\n")


class LineTooLong(ValueError):
    """A line longer than the reader's bound: the server is not sending events."""


@dataclass(frozen=True)
class ServerSentEvent:
    event: str
    data: str


async def iter_events(lines: AsyncIterator[str]) -> AsyncIterator[ServerSentEvent]:
    event = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment: keep-alives land here
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        # `id` and `retry` are legal and irrelevant here: no reconnects mid-call.
    if data:
        yield ServerSentEvent(event or "message", "\n".join(data))


async def iter_lines(chunks: AsyncIterator[str], limit: int | None = None) -> AsyncIterator[str]:
    """The lines of a text stream, without their ends. Unlike str.splitlines, only CR, LF and
    CRLF end a line (a JSON string may hold a raw U+2028); a line split over many chunks is
    joined once, not once per chunk. A line longer than `limit` characters raises LineTooLong
    as soon as it passes the bound: a server must not make the reader hold one of any size."""
    held: list[str] = []  # the start of a line whose end has not arrived
    size = 0  # characters in `held`
    async for chunk in chunks:
        if not (_EOL.search(chunk) or (held and held[-1].endswith("\r"))):
            held.append(chunk)
            size += len(chunk)
            _check(size, limit)
            continue
        text = "".join(held) + chunk
        start = 0
        for end in _EOL.finditer(text):
            if end.group() == "\r" and end.end() == len(text):
                break  # maybe half of a CRLF: wait for the next chunk
            _check(end.start() - start, limit)
            yield text[start : end.start()]
            start = end.end()
        held = [text[start:]] if start < len(text) else []
        size = len(text) - start
        _check(size, limit)
    if held:
        yield "".join(held).rstrip("\r")


def _check(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise LineTooLong(f"a stream line longer than {limit} characters")
