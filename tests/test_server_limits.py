"""Servers this project starts are not rate-limited (tests/devserver.py DYNAMIC_CONFIG): workers
that start together, each polling a queue per agent, are served at once, and the server refuses
none of their requests."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.worker.plugin import build_worker
from tests.helpers import script, start

WORKERS = 8
REFUSALS = ("rate limit exceeded", "Max QPS Reached")


async def test_workers_that_start_together_are_served_at_once(client, temporal_server, registry, settings, llm):
    seen = temporal_server.log.stat().st_size
    queues = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(WORKERS)]
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(new_http_client(settings))
        groups = [build_worker(client, queue, registry, settings, http) for queue in queues]
        await asyncio.gather(*(stack.enter_async_context(group) for group in groups))  # all at once
        handles = [await start(client, queue, "hi", model=script(llm, {"content": "hello"})) for queue in queues]
        results: list[Any] = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    assert [r.output for r in results] == ["hello"] * WORKERS
    with temporal_server.log.open("rb") as log:
        log.seek(seen)
        since = log.read().decode(errors="replace")
    refused = [line for line in since.splitlines() if any(r in line for r in REFUSALS)]
    assert refused == [], f"{len(refused)} refusals, e.g. {refused[0][:300]}"
