"""Everything that touches the world: model calls, tools, and how user code defines them.

User modules import these names from the public package, `durable_agent_runner`; they stay
re-exported here for modules written before it existed.
"""

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
from workflows.types import (
    AssistantMessage,
    Edit,
    MemoryPolicy,
    Message,
    ModelSettings,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "Agent",
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
    "Step",
    "Tool",
    "ToolAttempt",
    "ToolContext",
    "ToolMessage",
    "ToolRetryableError",
    "UserMessage",
    "handoff",
    "input_guardrail",
    "output_guardrail",
    "tool",
]
