"""A watchdog that names whatever blocks the worker's event loop.

An async tool that blocks (time.sleep, a sync HTTP client) stalls every model call, heartbeat and
workflow task of the worker, and nothing else would say why. A daemon thread pings the loop; when
a ping goes unanswered for longer than the threshold, it walks the loop thread's stack and logs
one WARNING per stall naming the innermost registered tool on it, or else the frame that blocks.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
import time
from collections.abc import Iterable
from types import CodeType, FrameType
from typing import Any

from durable_agent_runner.agents.tools import Tool

log = logging.getLogger(__name__)

DEFAULT_STALL_SECONDS = 2.0


def tool_codes(tools: Iterable[Tool[..., Any]]) -> dict[CodeType, str]:
    """Each tool's code object -> its name, to recognise the tool on a stack."""
    codes: dict[CodeType, str] = {}
    for t in tools:
        fn = inspect.unwrap(t.fn)  # a decorated function: its own body is what blocks
        if code := getattr(fn, "__code__", None):
            codes[code] = t.name
    return codes


class LoopWatchdog:
    """`start()` from the loop's thread; `stop()` when done. Costs one wake-up per `interval`."""

    def __init__(
        self,
        codes: dict[CodeType, str],
        threshold: float = DEFAULT_STALL_SECONDS,
        interval: float = 0.5,
    ) -> None:
        self.codes = codes
        self.threshold = threshold
        self.interval = min(interval, threshold / 2)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sent_at: float | None = None  # an unanswered ping's time; written by both threads
        self._reported = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, args=(loop, loop_thread), name="loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _pong(self) -> None:
        self._sent_at = None
        self._reported = False

    def _watch(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        while not self._stop.wait(self.interval):
            sent = self._sent_at
            if sent is None:
                self._sent_at = time.monotonic()
                try:
                    loop.call_soon_threadsafe(self._pong)
                except RuntimeError:  # the loop is closed: nothing left to watch
                    return
            elif not self._reported and (stalled := time.monotonic() - sent) > self.threshold:
                self._reported = True
                culprit = self.blame(sys._current_frames().get(loop_thread))
                log.warning("event loop blocked for %.1fs %s", stalled, culprit)

    def blame(self, frame: FrameType | None) -> str:
        """Who is blocking, from the innermost frame of the loop's thread outwards."""
        innermost = frame
        while frame is not None:
            if name := self.codes.get(frame.f_code):
                where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
                return (
                    f"by async tool '{name}' ({where}): an async tool must not block; "
                    "await instead, or make it a sync tool (those run in threads)"
                )
            frame = frame.f_back
        if innermost is None:
            return "(the loop's thread has no Python frame)"
        code = innermost.f_code
        return f"in {code.co_qualname} ({code.co_filename}:{innermost.f_lineno}), not a tool"
