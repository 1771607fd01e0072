"""Shared by the console's tests: the console served in the test's own event loop, and waiting
for a run's state."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from durable_agent_runner.client import AgentClient
from durable_agent_runner.console.app import build_app
from durable_agent_runner.workflows import types as t
from tests.devserver import free_port


@contextlib.asynccontextmanager
async def serve_console(client: Any, task_queue: str, token: str | None = None) -> AsyncIterator[str]:
    """The console on 127.0.0.1 (a free port), served until the block ends; yields its URL."""
    port = free_port()
    app = build_app(
        AgentClient(client, task_queue=task_queue), by="console-test", task_queue=task_queue, token=token, loopback=True
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        server.force_exit = True  # open SSE streams end with the server
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


async def pending(handle: Any, count: int = 1, timeout: float = 20.0) -> list[t.PendingApproval]:
    deadline = time.monotonic() + timeout
    while True:
        s: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        if len(s.pending_approvals) >= count:
            return s.pending_approvals
        assert time.monotonic() < deadline, f"no pending approval; status: {s}"
        await asyncio.sleep(0.1)
