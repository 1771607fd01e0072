"""MCP servers' tools as an agent's tools (`McpServer`: durable_agent_runner/agents/mcp.py): listed
when a run starts, frozen, then called like any tool.

The resolve activity lists each server's tools (`freeze`) and freezes them into the run as
ordinary `ToolSpec`s with `mcp_server` set: the schema the model sees is the server's
`inputSchema`, and replay never needs the server. A tool is named `<server>_<tool>` (`fs_read`;
`prefix=""` keeps the server's names), so the CLI and the Web UI show which server a call goes
to, and two servers may both have a `search`. A name that is still taken (a function tool, a
handoff, another server's tool) or an approval that names no tool refuses the run at resolve.

A call (`McpTool`) runs in the tool activity: the arguments are checked against the frozen
schema (an invalid call goes back to the model), then one session is opened for the call and
closed after it. Per call, not pooled per worker: each attempt is then self-contained (any
worker, any retry, nothing to keep alive between calls or to clean up when the worker stops, no
session state that a retry could trip on), and cancelling the activity ends exactly its own
server process. The price is a stdio server's start-up (a Python server: ~0.7 s) on every call.

Who hears about a failure:
- Temporal, which retries within the tool's bounds (`ToolRetryableError`): a server that cannot
  be started or reached, that closes the connection, answers HTTP 5xx without a JSON-RPC error,
  or takes longer than `connect_timeout_seconds` to start or `timeout_seconds` to answer;
- the model, as the call's error result: a result with `isError`, any error the server answers
  with (a JSON-RPC error, internal ones included: an answer, not a lost connection, and the same
  call would only get it again), arguments the frozen schema refuses, a tool the server no longer
  lists; and, once retries are spent, the workflow tells it the tool is unavailable.

`headers` and `env` stay on the worker: never frozen, logged or digested (their names are, in
the agent's version), and masked wherever a server echoes them back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from collections import OrderedDict
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from temporalio import activity
from temporalio.client import Client as TemporalClient

from durable_agent_runner.activities.errors import excerpt
from durable_agent_runner.activities.mcp_sessions import in_session, isolated
from durable_agent_runner.agents import executor
from durable_agent_runner.agents.mcp import CLEANUP_SECONDS, LIST_SECONDS, McpServer
from durable_agent_runner.agents.tools import (
    ToolContext,
    ToolRetryableError,
    describe_exception,
    parse_arguments,
)
from durable_agent_runner.machine.schema import check
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import (
    TRANSCRIPT_QUERY,
    AgentSpec,
    ToolResult,
    ToolSpec,
    Transcript,
    TranscriptQuery,
)

if TYPE_CHECKING:  # `mcp` itself is imported where a session needs it: it takes longer to import than
    # all the rest, and every `client.py` command imports this package without ever using it
    from mcp import Client
    from mcp.types import CallToolResult, ContentBlock
    from mcp.types import Tool as ListedTool

    from durable_agent_runner.agents.agent import Agent

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 1_000_000  # of a result's text: a server is not the author's code, so it is bounded
# What a server's listing may put into a run's history and into every model request.
MAX_LISTED_TOOLS = 128  # a server's tools (OpenAI takes at most 128 in a request)
MAX_LIST_PAGES = 100
MAX_DESCRIPTION_CHARS = 1024  # longer descriptions are cut
MAX_SCHEMA_BYTES = 64 * 1024  # of a tool's inputSchema, as JSON
HEARTBEAT_SECONDS = 15.0
# What the mcp package's HTTP client says of a non-2xx reply without a JSON-RPC error in it (a
# proxy's 502, a busy server's 503): the server's trouble, retried as a lost connection is.
HTTP_ERROR_REPLY = "Server returned an error response"
QUERY_TIMEOUT = timedelta(seconds=10)  # reading a run's frozen MCP tools; a busy server is retried


# ------------------------------------------------------------------------------ freezing


async def freeze(agent: Agent, spec: AgentSpec) -> AgentSpec:
    """`spec` with the tools of the agent's MCP servers, listed now. Raises ValueError where the
    agent and its servers contradict each other (the run is refused), ToolRetryableError where a
    server cannot be reached (the resolve activity is retried)."""
    if not agent.mcp_servers:
        return spec
    listed = await asyncio.gather(*(list_tools(s) for s in agent.mcp_servers))
    taken = {t.name: "an agent tool" if t.agent else "a function tool" for t in spec.tools}
    taken |= {h.tool_name: "a handoff" for h in spec.handoffs}
    tools: list[ToolSpec] = []
    for server, found in zip(agent.mcp_servers, listed, strict=True):
        if len(found) > MAX_LISTED_TOOLS:
            raise ValueError(
                f"agent '{agent.name}': MCP server '{server.name}' lists {len(found)} tools, more than the "
                f"{MAX_LISTED_TOOLS} a model can be offered"
            )
        for t in found:
            name = server.tool_name(t.name)
            if name in taken:
                raise ValueError(
                    f"agent '{agent.name}': MCP server '{server.name}' lists tool '{t.name}', named '{name}' here, "
                    f"which is already {taken[name]}'s name: rename one, or set the server's prefix"
                )
            if why := _unusable(t.input_schema):
                raise ValueError(f"agent '{agent.name}': MCP server '{server.name}' tool '{t.name}': {why}")
            taken[name] = f"MCP server '{server.name}' tool '{t.name}'"
            tools.append(
                ToolSpec(
                    name=name,
                    description=(t.description or t.title or "")[:MAX_DESCRIPTION_CHARS],
                    parameters=dict(t.input_schema),
                    timeout_seconds=server.connect_timeout_seconds + server.timeout_seconds + CLEANUP_SECONDS,
                    heartbeat_seconds=HEARTBEAT_SECONDS,
                    max_attempts=server.max_attempts,
                    approval=agent.approval_mode(name),
                    mcp_server=server.name,
                )
            )
    if unknown := sorted(set(agent.approvals) - set(taken)):
        raise ValueError(
            f"agent '{agent.name}' sets approval for tools neither it nor its MCP servers have: {', '.join(unknown)}"
            f" (its MCP tools: {', '.join(t.name for t in tools) or 'none'})"
        )
    return spec.model_copy(update={"tools": [*spec.tools, *tools]})


def _unusable(schema: dict[str, Any]) -> str | None:
    """Why a listed inputSchema cannot be frozen (too big, or no call could be checked against
    it), or None."""
    try:
        if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
            return f"its inputSchema is over {MAX_SCHEMA_BYTES:,} bytes of JSON"
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its inputSchema is not a valid JSON Schema: {exc.message[:200]}"
    except RecursionError:
        return "its inputSchema is nested too deep"
    return None


async def list_tools(server: McpServer) -> list[ListedTool]:
    """Every tool the server lists, page by page."""
    return await isolated(lambda: in_session(server, _listed, LIST_SECONDS, "list its tools"))


async def _listed(client: Client) -> list[ListedTool]:
    found: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):  # a server whose cursor never ends must not hang a run's start
        page = await client.list_tools(cursor=cursor)
        found += page.tools
        cursor = page.next_cursor
        if cursor is None or len(found) > MAX_LISTED_TOOLS:
            return found
    raise RuntimeError(f"its tool list went on past {MAX_LIST_PAGES} pages")


# ------------------------------------------------------------------------------- calling


class McpTool:
    """One MCP tool frozen into a run, called through its server from this worker. Shaped like
    `Tool` (`name`, `validate`, `invoke`), so the tool and hook activities treat it as one."""

    def __init__(self, server: McpServer, spec: ToolSpec) -> None:
        self.server = server
        self.spec = spec
        self.name = spec.name

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.server.name!r})"

    def validate(self, arguments_json: str) -> dict[str, Any] | str:
        """The arguments as an object, or a message for the model saying what is wrong with them
        (checked against the schema frozen into the run)."""
        args = parse_arguments(self.name, arguments_json)
        if isinstance(args, str):
            return args
        if problems := check(args, self.spec.parameters):
            properties = self.spec.parameters.get("properties")
            expected = ", ".join(properties) if isinstance(properties, dict) and properties else "none"
            return f"invalid arguments for tool '{self.name}': {'; '.join(problems)} (parameters: {expected})"
        return args

    async def invoke(
        self, arguments_json: str, ctx: ToolContext, threads: executor.ToolThreads | None = None
    ) -> ToolResult:
        """Call the tool on the model's raw JSON arguments; see the module docstring for errors.
        `threads` is unused: the call is I/O, made on the event loop."""
        args = self.validate(arguments_json)
        if isinstance(args, str):
            return ToolResult(call_id=ctx.call_id, tool=self.name, output=args, is_error=True)
        server, mask = self.server, self.server.redactor

        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

        async def call(client: Client) -> ToolResult:
            listed = await _listed(client)  # the session needs them too: call_tool checks output schemas
            original = next((t.name for t in listed if server.tool_name(t.name) == self.name), None)
            if original is None:
                output = f"error: MCP server '{server.name}' no longer lists the tool '{self.name}'"
                return ToolResult(call_id=ctx.call_id, tool=self.name, output=output, is_error=True)
            try:
                result = await client.call_tool(original, args)
            except MCPError as exc:
                if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):  # the session's own codes: nothing answered
                    raise
                if exc.code == INTERNAL_ERROR and exc.message == HTTP_ERROR_REPLY:  # a 5xx, not an answer
                    raise
                output = f"error: MCP server '{server.name}' refused the call: {excerpt(exc.message, mask)}"
                return ToolResult(call_id=ctx.call_id, tool=self.name, output=output, is_error=True)
            except RuntimeError as exc:  # structured content that breaks the tool's own output schema
                output = f"error: MCP server '{server.name}': {excerpt(str(exc), mask)}"
                return ToolResult(call_id=ctx.call_id, tool=self.name, output=output, is_error=True)
            output = result_text(result, mask)
            return ToolResult(call_id=ctx.call_id, tool=self.name, output=output, is_error=result.is_error)

        what = f"answer {self.name}"
        return await isolated(lambda: in_session(server, call, server.timeout_seconds, what))


def result_text(result: CallToolResult, mask: Redactor) -> str:
    """The result as the model reads it: text parts joined, every other part named with its type
    and size (never its bytes), the structured content when there is nothing else; masked, then cut."""
    parts = [_part_text(p) for p in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    text = mask.text("\n".join(parts))
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… (cut: {len(text) - MAX_RESULT_CHARS:,} more characters)"
    return text


def _part_text(part: ContentBlock) -> str:
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents

    if isinstance(part, TextContent):
        return part.text
    if isinstance(part, ImageContent | AudioContent):
        kind = "image" if isinstance(part, ImageContent) else "audio"
        return f"[{kind}: {part.mime_type}, {_decoded_size(part.data):,} bytes]"
    if isinstance(part, EmbeddedResource):
        r = part.resource
        if isinstance(r, TextResourceContents):
            return f"[resource {r.uri}: {r.mime_type or 'text'}, {len(r.text):,} characters]"
        return f"[resource {r.uri}: {r.mime_type or 'binary'}, {_decoded_size(r.blob):,} bytes]"
    if isinstance(part, ResourceLink):
        return f"[resource link {part.uri}: {part.name}" + (f", {part.mime_type}]" if part.mime_type else "]")
    return f"[{getattr(part, 'type', 'unknown')} content]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)


# ----------------------------------------------------------------------- a run's frozen tools


class FrozenTools:
    """Finds the MCP tool a call of a run means: the spec frozen into that run (read by query, once
    per execution), and the server it names on this worker's agent."""

    def __init__(self, client: TemporalClient | None = None, keep: int = 256) -> None:
        self._client = client  # None: the activity's own (`activity.client()`)
        self._runs: OrderedDict[str, dict[tuple[str, str], ToolSpec]] = OrderedDict()
        self._keep = keep

    async def find(self, agent: Agent | None, tool: str) -> McpTool | None:
        if agent is None or not agent.mcp_servers:
            return None
        spec = (await self._frozen()).get((agent.name, tool))
        server = next((s for s in agent.mcp_servers if spec and s.name == spec.mcp_server), None)
        return McpTool(server, spec) if server is not None and spec is not None else None

    async def _frozen(self) -> dict[tuple[str, str], ToolSpec]:
        info = activity.info()
        run = info.workflow_run_id or ""
        if run in self._runs:
            self._runs.move_to_end(run)
            return self._runs[run]
        client = self._client or activity.client()
        handle = client.get_workflow_handle(info.workflow_id or "", run_id=run)
        try:  # no messages: only the frozen agent and its team
            query = TranscriptQuery(start=sys.maxsize)
            frozen = await handle.query(TRANSCRIPT_QUERY, query, result_type=Transcript, rpc_timeout=QUERY_TIMEOUT)
        except Exception as exc:  # a busy or restarting server: retried like a server that is down
            raise ToolRetryableError(f"could not read the run's frozen MCP tools: {describe_exception(exc)}") from exc
        members: Iterable[AgentSpec] = [frozen.agent, *frozen.agent.team] if frozen.agent else []
        found = {(a.name, t.name): t for a in members for t in a.tools if t.mcp_server}
        self._runs[run] = found
        while len(self._runs) > self._keep:
            self._runs.popitem(last=False)
        return found
