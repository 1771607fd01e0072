"""The temporalio Workers of one process, started and stopped as one: the base worker and the
per-agent workers that routing needs (a Worker polls a single task queue)."""

from __future__ import annotations

import asyncio

from temporalio.worker import Worker

from durable_agent_runner.agents.executor import ToolThreads
from durable_agent_runner.agents.lifecycle import HookCaller
from durable_agent_runner.worker.hook_feed import HookFeed
from durable_agent_runner.worker.watchdog import LoopWatchdog


class WorkerGroup:
    """The temporalio Workers of one process, started and stopped as one (a Worker polls a single
    task queue; routing needs several), with the tool threads and the loop watchdog they share,
    and the lifecycle hooks' feed when there is one.
    `async with build_worker(...) as group:` runs them, as with a single Worker."""

    def __init__(
        self,
        workers: list[Worker],
        threads: ToolThreads,
        watchdog: LoopWatchdog,
        hooks: HookCaller | None = None,
        feed: HookFeed | None = None,
    ) -> None:
        self.workers = workers
        self.threads = threads
        self.watchdog = watchdog
        self.hooks = hooks
        self.feed = feed

    @property
    def task_queues(self) -> list[str]:
        return [w.task_queue for w in self.workers]

    async def __aenter__(self) -> WorkerGroup:
        self.watchdog.start()
        for i, w in enumerate(self.workers):
            try:
                await w.__aenter__()
            except BaseException:
                await self._stop(self.workers[:i])
                raise
        if self.feed is not None:
            self.feed.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop(self.workers)
        for w in self.workers:
            await w.__aexit__(None, None, None)  # shut down already: raises a worker's fatal error, if any

    async def _stop(self, started: list[Worker]) -> None:
        """Stop all at once, so the grace period is spent once, not once per worker. Then drop
        queued tool calls and leave hung tool threads behind (see durable_agent_runner/agents/executor.py)."""
        try:
            feed = self.feed.stop() if self.feed is not None else asyncio.sleep(0)
            await asyncio.gather(feed, *(w.shutdown() for w in started))
        finally:
            self.threads.shutdown()
            if self.hooks is not None:
                self.hooks.shutdown()
            self.watchdog.stop()

    async def run(self) -> None:
        """Run until `shutdown()`, as `Worker.run`; a worker's fatal error stops them all and is raised."""
        self.watchdog.start()
        runs = [asyncio.create_task(w.run()) for w in self.workers]
        if self.feed is not None:
            self.feed.start()
        try:
            await asyncio.wait(runs, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            await self._stop(self.workers)
            await asyncio.gather(*runs, return_exceptions=True)
        for task in runs:
            if not task.cancelled() and (err := task.exception()) is not None:
                raise err

    async def shutdown(self) -> None:
        """Stop workers started by `run()` or `async with`, and wait until they have."""
        await self._stop(self.workers)
