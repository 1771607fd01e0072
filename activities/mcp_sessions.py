"""One session with an MCP server, opened for one call or one listing and closed after it: a stdio
server's process (its stderr relayed to the worker's log, bounded) or a streamable HTTP connection,
each within its bound, its failures unwrapped from anyio's exception groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TextIO, TypeVar

import anyio

from durable_agent_runner.activities.errors import excerpt
from durable_agent_runner.agents.mcp import CLEANUP_SECONDS, McpServer
from durable_agent_runner.agents.tools import ToolRetryableError, describe_exception

if TYPE_CHECKING:
    from mcp import Client

T = TypeVar("T")
log = logging.getLogger("durable_agent_runner.activities.mcp_tools")

STDERR_LINES = 200  # of a stdio server's stderr logged per session; the rest are counted
STDERR_LINE_BYTES = 2000  # a longer line is cut


@contextlib.asynccontextmanager
async def connect(server: McpServer) -> AsyncIterator[Client]:
    """One session with the server; a stdio server's process is stopped when it closes."""
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if server.command is not None:
        params = StdioServerParameters(
            command=server.command[0], args=server.command[1:], env=server.env or None, cwd=server.cwd
        )
        with stderr_logged(server) as errlog:
            async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
                yield client
        return
    assert server.url is not None
    timeout = httpx2.Timeout(server.timeout_seconds, connect=server.connect_timeout_seconds)
    async with (
        httpx2.AsyncClient(headers=server.headers, timeout=timeout) as http,
        Client(streamable_http_client(server.url, http_client=http), cache=None) as client,
    ):
        yield client


@contextlib.contextmanager
def stderr_logged(server: McpServer) -> Iterator[TextIO]:
    """A pipe for a stdio server's stderr, relayed to this worker's log by a thread of its own,
    line by line, masked with the server's secrets (a server may print its env) and then cut.
    The thread ends with the pipe: once the server, and whatever it started, has exited."""
    read_fd, write_fd = os.pipe()
    threading.Thread(target=relay, args=(read_fd, server), name=f"mcp-stderr-{server.name}", daemon=True).start()
    with os.fdopen(write_fd, "w") as errlog:  # the server holds its own copy once started
        yield errlog


def relay(read_fd: int, server: McpServer) -> None:
    logged = dropped = 0
    with open(read_fd, "rb") as pipe:
        while line := pipe.readline(STDERR_LINE_BYTES):
            cut = not line.endswith(b"\n") and len(line) == STDERR_LINE_BYTES
            while cut and (rest := pipe.readline(STDERR_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass  # the rest of a long line, dropped
            if logged == STDERR_LINES:
                dropped += 1
                continue
            text = server.redactor.visible(line.decode(errors="replace").rstrip(), cut_after=cut)
            log.info("MCP server '%s' stderr: %s%s", server.name, text, " [cut]" if cut else "")
            logged += 1
    if dropped:
        log.info("MCP server '%s' stderr: %d more lines not logged", server.name, dropped)


async def in_session(server: McpServer, work: Callable[[Client], Awaitable[T]], seconds: float, what: str) -> T:
    """`work` in a session with the server: starting it bounded by the server's connect timeout,
    `work` by `seconds`. Any failure to reach or hear from the server is a ToolRetryableError."""
    phase = "start"
    try:
        with anyio.CancelScope(deadline=anyio.current_time() + server.connect_timeout_seconds) as deadline:
            async with connect(server) as client:
                phase = what
                deadline.deadline = anyio.current_time() + seconds
                return await work(client)
    except Exception as exc:
        why = excerpt(describe_exception(leaf(exc)), server.redactor)
        doing = "starting or reaching it" if phase == "start" else f"to {what}"
        raise ToolRetryableError(f"MCP server '{server.name}' failed {doing}: {why}") from None
    if phase == "start":
        bound = f"did not start or answer within {server.connect_timeout_seconds:g}s"
    else:
        bound = f"did not {what} within {seconds:g}s"
    raise ToolRetryableError(f"MCP server '{server.name}' {bound}")


def leaf(exc: BaseException) -> BaseException:
    """The first real error inside task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def isolated(work: Callable[[], Awaitable[T]]) -> T:
    """Runs `work` in a task of its own. An activity is cancelled with a plain `task.cancel()`,
    which can cut the shielded shutdown of a stdio server short and leave the process behind;
    here the cancel reaches `work` as anyio's own, and the shutdown finishes (bounded)."""
    scope = anyio.CancelScope()

    async def run() -> T:
        with scope:
            return await work()
        raise asyncio.CancelledError  # reached only when this scope was cancelled, below

    task = asyncio.create_task(run())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        scope.cancel()
        await asyncio.wait({task}, timeout=CLEANUP_SECONDS)
        raise
