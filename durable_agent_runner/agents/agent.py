"""Agents as their authors write them: tools, handoffs to other agents, agents used as tools.

    from durable_agent_runner import Agent, handoff, tool

    billing = Agent(name="billing", instructions="...", tools=[get_invoice], handoff_description="Invoices.")
    refunds = Agent(name="refunds", instructions="...", tools=[issue_refund], approvals={"issue_refund": "always"})
    researcher = Agent(name="researcher", instructions="Find facts.", tools=[search])
    triage = Agent(
        name="triage",
        instructions="Send the customer to the right agent.",
        handoffs=[billing, handoff(refunds, input_filter="remove_tools")],
        tools=[researcher.as_tool(description="Look a fact up.")],
    )
    billing.handoffs.append(triage)  # handoffs may form cycles: add the way back once both exist

A handoff is a transfer tool (`transfer_to_billing`): calling it hands the run to that agent.
An agent used as a tool runs as a child run on the tool's one argument, `input`, and its final
output is the tool's result. Every agent one reaches that way, transitively, is its `team()`:
a run freezes them all when it starts (`AgentSpec.team`), and the agent's `version` covers them
all, so changing any of them makes a new version.

A spec is data only. What is code (tools, approval predicates, guardrails, the output type,
handoff input filters) stays on workers, found by name through the agent: activities/hooks.py.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from durable_agent_runner.activities import wire
from durable_agent_runner.activities.mcp_tools import McpTool
from durable_agent_runner.agents.breakpoints import BreakpointFn
from durable_agent_runner.agents.guardrails import InputGuardrail, OutputGuardrail
from durable_agent_runner.agents.mcp import McpServer
from durable_agent_runner.agents.scoring import live_specs
from durable_agent_runner.agents.tools import (
    TOOL_NAME,
    Tool,
    parameters_schema,
    refuse_slips,
    refuse_unknown,
    tool_name_for,
    validate_arguments,
)
from durable_agent_runner.machine.memory import HANDOFF_FILTERS
from durable_agent_runner.workflows.types import (
    DEFAULT_MODEL_TIMEOUT,
    AgentOptions,
    AgentSpec,
    HandoffSpec,
    HookResult,
    Message,
    ModelSettings,
    ToolSpec,
    check_models,
)

log = logging.getLogger(__name__)

ApprovalPolicy = Literal["never", "always"] | Callable[[Any], bool]
# What the next agent sees of the conversation: the messages so far in, the ones it gets out.
InputFilter = Callable[[list[Message]], list[Message] | Awaitable[list[Message]]]
# Filters the workflow applies itself, by name (workflows/turn.HANDOFF_FILTERS).
BUILTIN_FILTERS = tuple(HANDOFF_FILTERS)  # applied by the workflow itself; any other filter runs as a hook
HOOK_FILTER = "hook:"  # a frozen filter name that the hook activity runs


class Handoff:
    """A transfer to `agent` the model may make by calling the tool `tool_name`; see `handoff()`."""

    def __init__(self, agent: Agent, tool_name: str, description: str, input_filter: str | InputFilter | None) -> None:
        self.agent = agent
        self.tool_name = tool_name
        self.description = description
        self.input_filter = input_filter

    def __repr__(self) -> str:
        return f"Handoff({self.agent.name!r}, tool_name={self.tool_name!r})"

    @property
    def filter_name(self) -> str | None:
        """A built-in filter's name, a filter function's name, or None (no filter)."""
        if self.input_filter is None or isinstance(self.input_filter, str):
            return self.input_filter
        return str(getattr(self.input_filter, "__name__", "") or type(self.input_filter).__name__)

    def spec(self) -> HandoffSpec:
        name = self.filter_name
        frozen = name if name is None or isinstance(self.input_filter, str) else HOOK_FILTER + name
        return HandoffSpec(
            agent=self.agent.name, tool_name=self.tool_name, description=self.description, input_filter=frozen
        )


def handoff(
    agent: Agent,
    *,
    tool_name: str | None = None,
    description: str | None = None,
    input_filter: str | InputFilter | None = None,
) -> Handoff:
    """A handoff to `agent`. `tool_name`: default `transfer_to_<name>`; `description`: default the
    agent's `handoff_description`; `input_filter`: what the next agent sees of the conversation,
    a built-in filter's name (BUILTIN_FILTERS) or a function from messages to messages, run on a
    worker (default: everything)."""
    name = tool_name or tool_name_for(f"transfer_to_{agent.name}")
    if not TOOL_NAME.match(name):
        raise ValueError(f"handoff tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
    if isinstance(input_filter, str) and input_filter not in BUILTIN_FILTERS:
        known = ", ".join(BUILTIN_FILTERS)
        raise ValueError(f"unknown input filter {input_filter!r}: name a built-in one ({known}) or pass a function")
    if input_filter is not None and not isinstance(input_filter, str) and not callable(input_filter):
        raise TypeError(f"input_filter must be a filter's name or a function, not {type(input_filter).__name__}")
    text = agent.handoff_description if description is None else description
    return Handoff(agent, name, text, input_filter)


class AgentToolInput(BaseModel):
    """The one argument of an agent used as a tool."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(description="The request for the agent, complete: it sees nothing else of this conversation.")


class AgentTool:
    """An agent offered to another as a tool (`Agent.as_tool`). Listed in `tools=[...]` like a
    tool, and approvals name it like one; a call runs the agent as a child run, never here."""

    def __init__(self, agent: Agent, name: str, description: str) -> None:
        if not TOOL_NAME.match(name):
            raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
        self.agent = agent
        self.name = name
        self.description = description

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r}, agent={self.agent.name!r})"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=parameters_schema(AgentToolInput),
            agent=self.agent.name,
        )

    def validate(self, arguments_json: str) -> BaseModel | str:
        """The validated arguments, or a message saying what is wrong with them."""
        return validate_arguments(self.name, AgentToolInput, arguments_json)


class Agent(AgentOptions):
    """An agent as its author writes it; `spec()` freezes it into a run's history. Agents are
    compared by identity (`is`): handoffs may make them refer to each other in a cycle."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    # name, instructions, model, max_turns, …, evaluators: the options AgentSpec keeps as they
    # are, declared once in workflows.types.AgentOptions (evaluators made specs: agents/scoring.py).
    # One model string, or several in the order to try them: the rest become `fallback_models`
    # (turned into a string before the agent exists, so `agent.model` is one model or None).
    model: str | list[str] | None = None  # type: ignore[assignment]
    tools: list[Tool[..., Any] | AgentTool] = Field(default_factory=lambda: list[Tool[..., Any] | AgentTool]())
    model_settings: ModelSettings | None = None  # a run's model_settings go on top of these
    model_timeout_seconds: float | None = Field(default=None, gt=0)  # None: the worker's LLM_TIMEOUT
    # Per tool: "never" (the default), "always", or a predicate over the validated arguments,
    # e.g. {"transfer": lambda args: args.amount > 100}. A predicate that raises asks a person.
    approvals: dict[str, ApprovalPolicy] = Field(default_factory=lambda: dict[str, ApprovalPolicy]())
    handoffs: list[Agent | Handoff] = Field(default_factory=lambda: list[Agent | Handoff]())
    # The final output's type: a pydantic model, or any type pydantic's TypeAdapter handles. Sent
    # to the model as a JSON schema, validated on a worker; an invalid output goes back to the
    # model, at most `output_retries` times.
    output_type: Any = None
    input_guardrails: list[InputGuardrail] = Field(default_factory=lambda: list[InputGuardrail]())
    output_guardrails: list[OutputGuardrail] = Field(default_factory=lambda: list[OutputGuardrail]())
    # Called before each model call with the run's state; may edit it or pause the run
    # (durable_agent_runner/agents/breakpoints.py). Runs on a worker, as the hook activity.
    breakpoint: BreakpointFn | None = None
    # MCP servers whose tools this agent has too, listed and frozen when a run starts
    # (activities/mcp_tools.py); they are named `<server>_<tool>` unless a server sets its prefix.
    mcp_servers: list[McpServer] = Field(default_factory=lambda: list[McpServer]())

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:  # pydantic's would follow a cycle of handoffs forever
        return f"Agent({self.name!r})"

    __str__ = __repr__
    _evaluators = field_validator("evaluators", mode="before")(live_specs)

    @model_validator(mode="before")
    @classmethod
    def _known_options(cls, data: Any) -> Any:
        # AgentOptions ignores unknown fields (older code reads newer specs); an author's typo
        # (`max_turn=5`, `modle=`) would then be dropped silently and the default used.
        if isinstance(data, dict):
            known = {*cls.model_fields} | {f.alias for f in cls.model_fields.values() if f.alias}
            refuse_unknown("agent option", (k for k in data if isinstance(k, str)), known)
            refuse_slips(data.get("name"), data)
            models = data.get("model")
            if isinstance(models, list | tuple):  # model=["anthropic:…", "openai:…"]: the rest are fallbacks
                if not models:
                    raise ValueError("model=[] names no model: give one, or a list in the order to try them")
                more = data.get("fallback_models") or []
                data = {**data, "model": models[0], "fallback_models": [*models[1:], *more]}
        return data

    @field_validator("output_type")
    @classmethod
    def _output_type_has_a_schema(cls, value: Any) -> Any:
        if value is not None:
            try:
                TypeAdapter(value).json_schema()
            except Exception as exc:
                raise ValueError(f"output_type {value!r}: pydantic cannot make a JSON schema of it: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Agent:
        self.check()
        return self

    def check(self) -> None:
        """Raises ValueError where the agent contradicts itself. Run when it is made, and again
        when a worker registers it (handoffs may have been appended since)."""
        tools = [t.name for t in self.tools]
        names = tools + [h.tool_name for h in self.handoff_list()]
        if dupes := _repeated(names):
            raise ValueError(f"agent '{self.name}' lists more than one tool named {', '.join(dupes)}")
        if dupes := _repeated([s.name for s in self.mcp_servers]):
            raise ValueError(f"agent '{self.name}' lists more than one MCP server named {', '.join(dupes)}")
        # An MCP tool's name is known once a run lists its server: until then, any name one of
        # the servers' prefixes starts could be one (resolve refuses those none of them lists).
        prefixes = [s.tool_prefix for s in self.mcp_servers]
        unknown = sorted(n for n in set(self.approvals) - set(tools) if not any(n.startswith(p) for p in prefixes))
        if unknown:
            raise ValueError(f"agent '{self.name}' sets approval for tools it does not have: {', '.join(unknown)}")
        try:
            check_models(self.model if isinstance(self.model, str) else None, self.fallback_models)
        except ValueError as exc:
            raise ValueError(f"agent '{self.name}': {exc}") from None
        if self.model_settings is not None:
            try:
                wire.check_sendable(self.model_settings)
            except wire.BadSettings as exc:
                raise ValueError(f"agent '{self.name}': {exc}") from None
        for kind, guards in (("input", self.input_guardrails), ("output", self.output_guardrails)):
            if dupes := _repeated([g.name for g in guards]):
                raise ValueError(f"agent '{self.name}' has more than one {kind} guardrail named {', '.join(dupes)}")
        filters: dict[str, object] = {}
        for h in self.handoff_list():
            if h.input_filter is None or isinstance(h.input_filter, str):
                continue
            name = h.filter_name or ""
            if filters.setdefault(name, h.input_filter) is not h.input_filter:
                raise ValueError(
                    f"agent '{self.name}' has two different handoff input filters named '{name}': "
                    "filters are found by name on workers, so give each function its own name"
                )

    # ------------------------------------------------------------------------------- parts

    def handoff_list(self) -> list[Handoff]:
        """Every handoff, an agent listed bare as `handoff(agent)` with its defaults."""
        return [h if isinstance(h, Handoff) else handoff(h) for h in self.handoffs]

    def tool(self, name: str) -> Tool[..., Any] | AgentTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def function_tools(self) -> list[Tool[..., Any]]:
        """The tools that run as tool activities (agents used as tools run as child runs)."""
        return [t for t in self.tools if isinstance(t, Tool)]

    def input_filter(self, name: str) -> InputFilter | None:
        """The filter function of one of this agent's handoffs, by its frozen name."""
        for h in self.handoff_list():
            if h.input_filter is not None and not isinstance(h.input_filter, str) and h.filter_name == name:
                return h.input_filter
        return None

    @functools.cached_property
    def output_adapter(self) -> TypeAdapter[Any] | None:
        return None if self.output_type is None else TypeAdapter(self.output_type)

    @property
    def output_name(self) -> str:
        if self.output_type is None:
            return ""
        return str(getattr(self.output_type, "__name__", "") or self.output_type)

    def as_tool(self, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool another agent may call with one argument, `input`: a child run
        of this agent answers it. `name`: default the agent's name; `description`: default its
        `handoff_description`."""
        text = (
            description or self.handoff_description or f"Ask the {self.name} agent; it answers with its final output."
        )
        return AgentTool(self, name or tool_name_for(self.name), text)

    def team(self) -> list[Agent]:
        """Every other agent this one reaches through handoffs and agents used as tools,
        transitively (cycles included), by name. Raises ValueError if two of them share a name."""
        seen: dict[str, Agent] = {self.name: self}
        todo = [self]
        while todo:
            for other in todo.pop().reaches():
                known = seen.get(other.name)
                if known is None:
                    seen[other.name] = other
                    todo.append(other)
                elif known is not other:
                    raise ValueError(f"agent '{self.name}' reaches two different agents named '{other.name}'")
        return [seen[n] for n in sorted(seen) if n != self.name]

    def reaches(self) -> list[Agent]:
        """The agents this one hands off to or uses as tools, directly."""
        return [h.agent for h in self.handoff_list()] + [t.agent for t in self.tools if isinstance(t, AgentTool)]

    # ------------------------------------------------------------------------------ approval

    def approval_mode(self, tool: str) -> Literal["never", "always", "conditional"]:
        policy = self.approvals.get(tool, "never")
        return policy if isinstance(policy, str) else "conditional"

    def needs_approval(self, tool: str, args: BaseModel | dict[str, Any]) -> bool:
        """`args`: a function tool's validated arguments; an MCP tool's, as a dict."""
        policy = self.approvals.get(tool, "never")
        if isinstance(policy, str):
            return policy == "always"
        try:
            return bool(policy(args))
        except Exception:  # a predicate that can't decide must not wave a call through
            return True
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # SystemExit and the like: never let them stop the worker
            log.warning("approval predicate of %s.%s raised %s; a person decides", self.name, tool, type(exc).__name__)
            return True

    # -------------------------------------------------------------------------------- specs

    @property
    def version(self) -> str:
        """A digest of the agent as its author wrote it, and of its team: its tool calls and
        hooks go to workers holding this very version (see `agent_task_queue`). Fields left at
        their defaults are left out, so a release that only adds a field to AgentSpec keeps
        every agent's version."""
        team = self.team()
        spec = self._spec().model_copy(update={"team": [a._spec() for a in team]})
        authored = spec.model_dump(mode="json", exclude={"version"}, exclude_defaults=True)
        # MCP servers are not in the spec (their tools are, once a run lists them): added here,
        # and only when there are some, so that agents without any keep their versions.
        for where, agent in [(authored, self), *zip(authored.get("team", []), team, strict=True)]:
            if agent.mcp_servers:
                where["mcp_servers"] = [s.authored() for s in agent.mcp_servers]
        text = json.dumps(authored, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def spec(self, max_turns: int | None = None, model: str | None = None) -> AgentSpec:
        """This agent as data, with its version and a run's overrides, and no team (see
        `team()`). Raises ValueError on a bad override. Unset model bounds stay None
        (model_timeout_seconds: the default) for the worker to fill in."""
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        overrides: dict[str, object] = {"version": self.version}
        if max_turns is not None:
            overrides["max_turns"] = max_turns
        if model:  # the run's model, tried first: not once more as a fallback after it failed
            overrides |= {"model": model, "fallback_models": [m for m in self.fallback_models if m != model]}
        return self._spec().model_copy(update=overrides)

    def _spec(self) -> AgentSpec:
        adapter = self.output_adapter
        return AgentSpec(
            **self.model_dump(include=set(AgentOptions.model_fields)),
            tools=[t.spec().model_copy(update={"approval": self.approval_mode(t.name)}) for t in self.tools],
            settings=self.model_settings or ModelSettings(),
            model_timeout_seconds=self.model_timeout_seconds or DEFAULT_MODEL_TIMEOUT,
            handoffs=[h.spec() for h in self.handoff_list()],
            output_schema=adapter.json_schema() if adapter is not None else None,
            output_name=self.output_name,
            input_guardrails=[g.name for g in self.input_guardrails],
            output_guardrails=[g.name for g in self.output_guardrails],
            breakpoint=self.breakpoint_name,
        )

    @property
    def breakpoint_name(self) -> str | None:
        fn = self.breakpoint
        return None if fn is None else str(getattr(fn, "__name__", "") or type(fn).__name__)


def approval_check(agent: Agent | None, tool: Tool[..., Any] | AgentTool | McpTool, arguments_json: str) -> HookResult:
    """A call's arguments checked by its tool, then the agent's approval policy asked about them
    (the hook activity's "approval"). An agent this worker no longer has (a run recorded before
    routing) keeps its frozen "needs approval": a person is asked, to be safe."""
    args = tool.validate(arguments_json)
    if isinstance(args, str):
        return HookResult(invalid=args)
    needs = agent is None or agent.needs_approval(tool.name, args)
    shown = args.model_dump(mode="json", by_alias=True) if isinstance(args, BaseModel) else args
    return HookResult(needs_approval=needs, arguments=shown)


def _repeated(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})
