"""The threads sync tools run in: a bounded pool of their own.

Not the event loop's default executor, which DNS lookups and the model client need: a hung sync
tool then uses up one slot of this pool and nothing else. A thread cannot be interrupted, so when
a call is cancelled (its timeout, the worker stopping) the activity returns at once while the
thread runs on, its result discarded, holding its slot. With every slot taken, further sync calls
queue, each bounded by its own activity timeout; model calls and async tools go on as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from durable_agent_runner.config.env import WorkerSettings

log = logging.getLogger(__name__)
R = TypeVar("R")

DEFAULT_TOOL_THREADS = 16


class ToolThreads:
    """A bounded thread pool for sync tools; `shutdown()` never waits for a hung one."""

    def __init__(self, size: int = DEFAULT_TOOL_THREADS) -> None:
        if size < 1:
            raise ValueError(f"tool threads must be at least 1, got {size}")
        self.size = size
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="tool")
        self._lock = threading.Lock()
        self._busy = 0

    @property
    def busy(self) -> int:
        return self._busy

    async def run(self, fn: Callable[..., R], /, **kwargs: Any) -> R:
        """`fn(**kwargs)` in a pool thread. Cancelling the await drops a queued call and
        abandons a running one (see the module docstring)."""
        if self._busy >= self.size:
            name = getattr(fn, "__qualname__", repr(fn))
            log.warning("all %d tool threads are busy (a hung sync tool?); %s waits for one", self.size, name)
        # As asyncio.to_thread does: the tool sees the activity's context (activity.info()).
        call = functools.partial(contextvars.copy_context().run, self._counted, fn, kwargs)
        return await asyncio.wrap_future(self._pool.submit(call))

    def _counted(self, fn: Callable[..., R], kwargs: dict[str, Any]) -> R:
        with self._lock:
            self._busy += 1
        try:
            return fn(**kwargs)
        finally:
            with self._lock:
                self._busy -= 1

    def shutdown(self) -> None:
        """Drop queued calls and return at once: a hung thread must not keep the worker alive
        (worker.py ends with os._exit, which does not join pool threads)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def size_from_env(env: Mapping[str, str] | None = None) -> int:
    """$TOOL_THREADS as the settings parse and bound it (config/env.py); SettingsError if bad."""
    return int(WorkerSettings.load(env).tool_threads)


@functools.cache
def shared() -> ToolThreads:
    """The pool for tools invoked outside a worker (tests, scripts); a worker brings its own."""
    return ToolThreads()
