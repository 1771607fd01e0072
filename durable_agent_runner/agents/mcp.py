"""An MCP server an agent's tools come from, as the agent's author declares it:

    from durable_agent_runner import Agent, McpServer

    Agent(name="files", instructions="...", mcp_servers=[
        McpServer(name="fs", command=["python", "server.py"]),                       # stdio
        McpServer(name="web", url="http://host/mcp", headers={"Authorization": "Bearer ..."}),  # streamable HTTP
    ])

How its tools are listed, frozen into a run and called: activities/mcp_tools.py.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from durable_agent_runner.agents.tools import TOOL_NAME, tool_name_for
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import RESOLVE_SECONDS

LIST_SECONDS = 10.0  # to list the tools once a session is up
CLEANUP_SECONDS = 10.0  # to stop a stdio server: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL (the mcp package's)
# A run starts by listing its servers' tools in one resolve attempt: start, list and stop fit in it,
# with 10 s to spare (30 s), so a slow server fails with its own bound, not the attempt's timeout.
MAX_CONNECT_SECONDS = RESOLVE_SECONDS - LIST_SECONDS - CLEANUP_SECONDS - 10.0


class McpServer(BaseModel):
    """An MCP server an agent's tools come from: a command run over stdio, or a streamable HTTP URL."""

    # A validation error never quotes the input: its headers and env hold secrets.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    name: str  # in the frozen spec and in tool names; letters, digits, '_' and '-'
    command: list[str] | None = None  # stdio: the program and its arguments
    url: str | None = None  # streamable HTTP, e.g. http://host:8000/mcp
    # Worker-held and secret: sent to an HTTP server / set in a stdio server's environment (which
    # otherwise gets only HOME, PATH, SHELL, TERM, USER, LOGNAME), never frozen, logged or shown.
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None  # stdio: the server's working directory
    prefix: str | None = None  # of its tools' names; None: "<name>_"
    # to start or reach it, handshake included
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=MAX_CONNECT_SECONDS)
    timeout_seconds: float = Field(default=60.0, gt=0)  # to answer one call, once connected
    max_attempts: int = Field(default=3, ge=1)  # per call, as a function tool's

    @field_validator("command", mode="before")
    @classmethod
    def _a_list(cls, value: object) -> object:
        if isinstance(value, str):  # never echoed: a command line may hold a token
            raise ValueError("command is a list, the program and its arguments (shlex.split(line)), not one string")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"MCP server name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server '{self.name}': give either command=[...] (stdio) or url=... (HTTP)")
        if self.command is not None and not (self.command and self.command[0]):
            raise ValueError(f"MCP server '{self.name}': command must name a program")
        if self.url is not None and not re.match(r"^https?://[^/\s]+", self.url):
            raise ValueError(f"MCP server '{self.name}': url must be http:// or https:// and a host")
        if self.url is not None and self.env:
            raise ValueError(f"MCP server '{self.name}': env is for stdio servers; an HTTP one takes headers")
        return self

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix

    def tool_name(self, listed: str) -> str:
        """The name the model calls a tool this server lists as `listed`."""
        return tool_name_for(self.tool_prefix + listed)

    def authored(self) -> dict[str, object]:
        """What the agent's version covers: all but the secrets' values (their names count)."""
        fields = self.model_dump(mode="json", exclude={"headers", "env"}, exclude_defaults=True)
        return fields | {k: sorted(getattr(self, k)) for k in ("headers", "env") if getattr(self, k)}

    @property
    def redactor(self) -> Redactor:
        return Redactor(*self.headers.values(), *self.env.values())
