"""A server-sent events parser that follows the spec's framing, not just the happy path.

Handles `event:` and `data:` fields, multi-line data (joined with "\\n"), comment lines
(`: keep-alive`), CRLF line ends and a final event without a trailing blank line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


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
