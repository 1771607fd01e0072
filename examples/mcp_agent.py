"""An agent whose tools come from an MCP server: examples/mcp_server.py, started over stdio.

    bash scripts/demo.sh --example mcp_agent ["PROMPT"]
    # or, with a worker of your own:
    python worker.py --tools examples.mcp_agent
    python client.py run --agent mcp_weather --follow "What's the weather in Tokyo and Paris?"

When a run starts, the worker lists the server's tools and freezes them into the run's history;
each call then starts the server, calls the tool and closes it (docs/production.md: "MCP tools").
`prefix=""` keeps the server's own tool names, so the offline model (fake_llm's weather scenario,
which calls `get_weather`, `convert_temperature` and `send_report` by name) can drive it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from durable_agent_runner import Agent, McpServer

SERVER = Path(__file__).with_name("mcp_server.py")

mcp_weather = Agent(
    name="mcp_weather",
    instructions=(
        "You are a concise weather assistant. Use the tools to look up real figures; "
        "never guess a temperature. Answer in one or two sentences."
    ),
    mcp_servers=[McpServer(name="weather", command=[sys.executable, str(SERVER)], prefix="")],
    approvals={"send_report": "always"},  # an MCP tool's approval, as a function tool's
    max_turns=8,
)
