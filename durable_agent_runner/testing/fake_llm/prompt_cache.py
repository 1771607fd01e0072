"""Prompt caching as Anthropic counts it, for the fake's `cache_control` requests.

A request is a sequence of blocks (tools, then system, then each message's content blocks); a
prefix is everything up to the end of one block. The cache remembers the prefixes earlier
requests marked with `cache_control` (within their TTL, at least MIN_CHARS long, the most recent
MAX_ENTRIES). A request reads the longest remembered prefix it starts with, up to its own last
mark (a request that marks nothing reads nothing), and writes the rest up to that mark; the
remainder is plain input. Sizes are characters of canonical JSON:
the fake's token estimate divides them by 4, as for the whole prompt.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

MIN_CHARS = 1024 * 4  # the API caches no prefix under 1,024 tokens (more for some models)
MAX_ENTRIES = 4096
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True)
class Prefixes:
    """A request's prompt as its block ends: (digest of everything up to it, its characters),
    and the ends marked with cache_control, each with its TTL in seconds."""

    ends: tuple[tuple[str, int], ...]
    marks: tuple[tuple[int, float], ...] = ()

    @property
    def long(self) -> bool:
        """Its last mark asks for the 1-hour TTL."""
        return bool(self.marks) and max(self.marks)[1] > TTL_SECONDS["5m"]


class PromptCache:
    """The prefixes marked so far, shared by the server's threads."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, float] = OrderedDict()  # digest -> when it expires
        self._max = max_entries

    def account(self, prefixes: Prefixes, now: float | None = None) -> tuple[int, int]:
        """(characters read from the cache, characters written to it) for this request; the
        request's marked prefixes are remembered."""
        now = time.monotonic() if now is None else now
        read = 0
        if not prefixes.marks:
            return 0, 0
        reach = max(index for index, _ in prefixes.marks) + 1
        with self._lock:
            for digest, chars in reversed(prefixes.ends[:reach]):
                expires = self._entries.get(digest)
                if expires is not None and expires > now:
                    read = chars
                    break
            last = 0
            for index, ttl in prefixes.marks:
                digest, chars = prefixes.ends[index]
                if chars < MIN_CHARS:
                    continue
                last = max(last, chars)
                # A hit refreshes the entry's lifetime, as the API's does.
                self._entries[digest] = max(self._entries.get(digest, 0.0), now + ttl)
                self._entries.move_to_end(digest)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return read, max(0, last - read)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
