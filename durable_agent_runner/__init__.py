"""Durable Agent Runner: LLM agents as Temporal workflows that cannot lose their place.

The one package a user imports: agents and tools in the user's own modules, and the plugin that
runs them in a worker (see `durable_agent_runner.worker.plugin` for a complete worker)::

    from durable_agent_runner import Agent, AgentPlugin, ToolContext, tool

and, inside a user's own Temporal workflow, agents as durable steps: `durable_agent_runner.workflow`
(`run_agent`), imported only when asked for, so a client never imports temporalio's workflow API.

and the client that starts and follows runs from Python (durable_agent_runner.client)::

    client = await durable_agent_runner.connect()
    answer = await (await client.start("demo", "Weather in Tokyo?")).result()

What sits behind these names (`workflows/`, `activities/`) is free to move.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors; at run time each name is imported when first used
    from durable_agent_runner.agents.agent import Agent, AgentTool, Handoff, handoff
    from durable_agent_runner.agents.ask import ask_person
    from durable_agent_runner.agents.breakpoints import BreakpointState, Pause
    from durable_agent_runner.agents.guardrails import (
        GuardrailContext,
        GuardrailResult,
        InputGuardrail,
        OutputGuardrail,
        input_guardrail,
        output_guardrail,
    )
    from durable_agent_runner.agents.lifecycle import ModelAttempt, ModelResponse, RunHooks, Step, ToolAttempt
    from durable_agent_runner.agents.mcp import McpServer
    from durable_agent_runner.agents.registry import Registry
    from durable_agent_runner.agents.tools import Tool, ToolContext, ToolRetryableError, tool
    from durable_agent_runner.client import (
        AgentClient,
        AgentRunError,
        BadArgument,
        DecisionRefused,
        EventsUnavailable,
        IdTaken,
        NotThatKind,
        NoWorkerAnswered,
        RunCancelled,
        RunFailed,
        RunHandle,
        RunNotFound,
        SessionHandle,
        StillRunning,
        connect,
        run_script,
    )
    from durable_agent_runner.worker.plugin import AgentPlugin, PluginOptions
    from durable_agent_runner.workflows.types import (
        WORKFLOW_NAME,
        AssistantMessage,
        Budget,
        Edit,
        MemoryPolicy,
        Message,
        ModelSettings,
        NotifyOptions,
        RunInput,
        RunResult,
        ToolMessage,
        UserMessage,
    )

# Where each public name lives. Imported on first use (PEP 562), so importing one part of the
# package (a worker's activities, the CLI) never imports all of it, and no import cycle forms.
_EXPORTS = {
    "Agent": "durable_agent_runner.agents.agent",
    "AgentTool": "durable_agent_runner.agents.agent",
    "Handoff": "durable_agent_runner.agents.agent",
    "handoff": "durable_agent_runner.agents.agent",
    "BreakpointState": "durable_agent_runner.agents.breakpoints",
    "Pause": "durable_agent_runner.agents.breakpoints",
    "GuardrailContext": "durable_agent_runner.agents.guardrails",
    "GuardrailResult": "durable_agent_runner.agents.guardrails",
    "InputGuardrail": "durable_agent_runner.agents.guardrails",
    "OutputGuardrail": "durable_agent_runner.agents.guardrails",
    "input_guardrail": "durable_agent_runner.agents.guardrails",
    "output_guardrail": "durable_agent_runner.agents.guardrails",
    "ModelAttempt": "durable_agent_runner.agents.lifecycle",
    "ModelResponse": "durable_agent_runner.agents.lifecycle",
    "RunHooks": "durable_agent_runner.agents.lifecycle",
    "Step": "durable_agent_runner.agents.lifecycle",
    "ToolAttempt": "durable_agent_runner.agents.lifecycle",
    "McpServer": "durable_agent_runner.agents.mcp",
    "Registry": "durable_agent_runner.agents.registry",
    "Tool": "durable_agent_runner.agents.tools",
    "ask_person": "durable_agent_runner.agents.ask",
    "ToolContext": "durable_agent_runner.agents.tools",
    "ToolRetryableError": "durable_agent_runner.agents.tools",
    "tool": "durable_agent_runner.agents.tools",
    "AgentClient": "durable_agent_runner.client",
    "connect": "durable_agent_runner.client",
    "run_script": "durable_agent_runner.client",
    "AgentRunError": "durable_agent_runner.client",
    "DecisionRefused": "durable_agent_runner.client",
    "EventsUnavailable": "durable_agent_runner.client",
    "NoWorkerAnswered": "durable_agent_runner.client",
    "IdTaken": "durable_agent_runner.client",
    "NotThatKind": "durable_agent_runner.client",
    "RunCancelled": "durable_agent_runner.client",
    "RunFailed": "durable_agent_runner.client",
    "RunNotFound": "durable_agent_runner.client",
    "RunHandle": "durable_agent_runner.client",
    "SessionHandle": "durable_agent_runner.client",
    "StillRunning": "durable_agent_runner.client",
    "BadArgument": "durable_agent_runner.client",
    "AgentPlugin": "durable_agent_runner.worker.plugin",
    "PluginOptions": "durable_agent_runner.worker.plugin",
    "WORKFLOW_NAME": "durable_agent_runner.workflows.types",
    "AssistantMessage": "durable_agent_runner.workflows.types",
    "Edit": "durable_agent_runner.workflows.types",
    "MemoryPolicy": "durable_agent_runner.workflows.types",
    "Message": "durable_agent_runner.workflows.types",
    "ModelSettings": "durable_agent_runner.workflows.types",
    "NotifyOptions": "durable_agent_runner.workflows.types",
    "Budget": "durable_agent_runner.workflows.types",
    "RunInput": "durable_agent_runner.workflows.types",
    "RunResult": "durable_agent_runner.workflows.types",
    "ToolMessage": "durable_agent_runner.workflows.types",
    "UserMessage": "durable_agent_runner.workflows.types",
}


try:
    __version__ = version("durable-agent-runner")  # pyproject.toml's, the one place it is set
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "workflow":  # agents inside a user's workflow; imports temporalio.workflow, so only when asked
        return import_module("durable_agent_runner.workflow")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agent_runner' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "WORKFLOW_NAME",
    "Agent",
    "AgentClient",
    "AgentPlugin",
    "AgentRunError",
    "AgentTool",
    "AssistantMessage",
    "BadArgument",
    "BreakpointState",
    "Budget",
    "DecisionRefused",
    "Edit",
    "EventsUnavailable",
    "GuardrailContext",
    "GuardrailResult",
    "Handoff",
    "IdTaken",
    "InputGuardrail",
    "McpServer",
    "MemoryPolicy",
    "Message",
    "ModelAttempt",
    "ModelResponse",
    "ModelSettings",
    "NoWorkerAnswered",
    "NotThatKind",
    "NotifyOptions",
    "OutputGuardrail",
    "Pause",
    "PluginOptions",
    "Registry",
    "RunCancelled",
    "RunFailed",
    "RunHandle",
    "RunHooks",
    "RunInput",
    "RunNotFound",
    "RunResult",
    "SessionHandle",
    "Step",
    "StillRunning",
    "Tool",
    "ToolAttempt",
    "ToolContext",
    "ToolMessage",
    "ToolRetryableError",
    "UserMessage",
    "__version__",
    "ask_person",
    "connect",
    "handoff",
    "input_guardrail",
    "output_guardrail",
    "run_script",
    "tool",
]
