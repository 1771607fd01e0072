"""Shared by the console's tests: the console served in the test's own event loop, and waiting
for a run's state."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from durable_agent_runner.client import AgentClient
from durable_agent_runner.console.app import build_app
from durable_agent_runner.workflows import types as t


@contextlib.asynccontextmanager
async def serve_console(
    client: Any, task_queue: str, token: str | None = None, keep: list[Any] | None = None, datasets: Any = None
) -> AsyncIterator[str]:
    """The console on 127.0.0.1 (a free port), served until the block ends; yields its URL.
    `keep`: a list the console's state (app.Console: its open streams) is put in. The socket is
    bound here and handed to the server: a port merely found free could be taken by another test
    process before the server bound it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    agents = AgentClient(client, task_queue=task_queue)
    more = {"datasets": datasets} if datasets is not None else {}
    app = build_app(agents, by="console-test", task_queue=task_queue, token=token, loopback=True, **more)
    if keep is not None:
        keep.append(app.app.state.console)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
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
        sock.close()


async def pending(handle: Any, count: int = 1, timeout: float = 20.0) -> list[t.PendingApproval]:
    deadline = time.monotonic() + timeout
    while True:
        s: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        if len(s.pending_approvals) >= count:
            return s.pending_approvals
        assert time.monotonic() < deadline, f"no pending approval; status: {s}"
        await asyncio.sleep(0.1)
