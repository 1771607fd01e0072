"""Durable Agent Runner: LLM agents as Temporal workflows that cannot lose their place.

The one package a user imports: agents and tools in the user's own modules, and the plugin that
runs them in a worker (see `durable_agent_runner.plugin` for a complete worker)::

    from durable_agent_runner import Agent, AgentPlugin, ToolContext, tool

What sits behind these names (`workflows/`, `activities/`) is free to move.
"""

from importlib.metadata import PackageNotFoundError, version

from activities.agents import Agent, AgentTool, Handoff, handoff
from activities.breakpoints import BreakpointState, Pause
from activities.guardrails import (
    GuardrailContext,
    GuardrailResult,
    InputGuardrail,
    OutputGuardrail,
    input_guardrail,
    output_guardrail,
)
from activities.lifecycle import ModelAttempt, ModelResponse, RunHooks, Step, ToolAttempt
from activities.mcp_tools import McpServer
from activities.registry import Registry
from activities.tools import Tool, ToolContext, ToolRetryableError, tool
from durable_agent_runner.plugin import AgentPlugin
from workflows.types import (
    WORKFLOW_NAME,
    AssistantMessage,
    Edit,
    MemoryPolicy,
    Message,
    ModelSettings,
    RunInput,
    RunResult,
    ToolMessage,
    UserMessage,
)

try:
    __version__ = version("durable-agent-runner")  # pyproject.toml's, the one place it is set
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "WORKFLOW_NAME",
    "Agent",
    "AgentPlugin",
    "AgentTool",
    "AssistantMessage",
    "BreakpointState",
    "Edit",
    "GuardrailContext",
    "GuardrailResult",
    "Handoff",
    "InputGuardrail",
    "McpServer",
    "MemoryPolicy",
    "Message",
    "ModelAttempt",
    "ModelResponse",
    "ModelSettings",
    "OutputGuardrail",
    "Pause",
    "Registry",
    "RunHooks",
    "RunInput",
    "RunResult",
    "Step",
    "Tool",
    "ToolAttempt",
    "ToolContext",
    "ToolMessage",
    "ToolRetryableError",
    "UserMessage",
    "__version__",
    "handoff",
    "input_guardrail",
    "output_guardrail",
    "tool",
]
