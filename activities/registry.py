"""Agents, and the registry of agents and tools a worker serves, loaded from user modules.

A user module defines tools and agents at module level:

    from activities import tool, Agent

    @tool
    def get_weather(city: str) -> dict:
        '''Current weather for a city.

        Args:
            city: City name.
        '''
        ...

    weather = Agent(name="weather", instructions="...", tools=[get_weather], max_turns=8)

and the worker loads it by module name or file path:
`Registry.from_modules(["examples.demo_agent", "path/to/my_tools.py"])`.

Agents' names are unique on a worker; tools' names only within an agent, since two modules may
each bring their own `search` tool: a call finds its tool through its run's agent (`find_tool`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from activities.tools import Tool
from workflows.types import DEFAULT_MODEL_TIMEOUT, AgentSpec


class RegistryError(ValueError):
    """A module could not be loaded, or two different objects claim one name."""


ApprovalPolicy = Literal["never", "always"] | Callable[[Any], bool]


class Agent(BaseModel):
    """An agent as its author writes it; `spec()` freezes it into a run's history."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    instructions: str = ""
    model: str | None = None  # None: the worker's LLM_MODEL
    tools: list[Tool[..., Any]] = Field(default_factory=lambda: list[Tool[..., Any]]())
    max_turns: int = Field(default=10, ge=1)
    temperature: float | None = None
    # Bounds on each model call; None: the worker's LLM_TIMEOUT, LLM_READ_TIMEOUT, LLM_MAX_ATTEMPTS,
    # LLM_RETRY_SECONDS (filled in when a run starts, so the run keeps them).
    model_timeout_seconds: float | None = Field(default=None, gt=0)
    model_read_timeout_seconds: float | None = Field(default=None, gt=0)
    model_max_attempts: int | None = Field(default=None, ge=1)
    model_retry_seconds: float | None = Field(default=None, gt=0)
    api: Literal["chat", "responses"] | None = None  # None: the worker's LLM_API
    # Per tool: "never" (the default), "always", or a predicate over the validated arguments,
    # e.g. {"transfer": lambda args: args.amount > 100}. A predicate that raises asks a person.
    approvals: dict[str, ApprovalPolicy] = Field(default_factory=lambda: dict[str, ApprovalPolicy]())
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    approval_timeout_outcome: Literal["reject", "fail"] = "reject"
    approval_timeout_reason: str = "no one decided on this call in time"
    token_budget: int | None = Field(default=None, ge=1)  # input + output tokens for the whole run
    continue_as_new_after: int = Field(default=200, ge=1)  # turns per execution, at most

    @model_validator(mode="after")
    def _unique_tool_names(self) -> Agent:
        names = [t.name for t in self.tools]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"agent '{self.name}' lists more than one tool named {', '.join(dupes)}")
        if unknown := sorted(set(self.approvals) - set(names)):
            raise ValueError(f"agent '{self.name}' sets approval for tools it does not have: {', '.join(unknown)}")
        return self

    def tool(self, name: str) -> Tool[..., Any] | None:
        return next((t for t in self.tools if t.name == name), None)

    @functools.cached_property
    def version(self) -> str:
        """A digest of the agent as its author wrote it: its tool calls go to workers holding this
        very version (see `agent_task_queue`). Fields left at their defaults are left out, so a
        release that only adds a field to AgentSpec keeps every agent's version."""
        authored = self._spec().model_dump(mode="json", exclude={"version"}, exclude_defaults=True)
        text = json.dumps(authored, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def approval_mode(self, tool: str) -> Literal["never", "always", "conditional"]:
        policy = self.approvals.get(tool, "never")
        return policy if isinstance(policy, str) else "conditional"

    def needs_approval(self, tool: str, args: BaseModel) -> bool:
        policy = self.approvals.get(tool, "never")
        if isinstance(policy, str):
            return policy == "always"
        try:
            return bool(policy(args))
        except Exception:  # a predicate that can't decide must not wave a call through
            return True

    def spec(self, max_turns: int | None = None, model: str | None = None) -> AgentSpec:
        """This agent as data, with its version and a run's overrides. Raises ValueError on a bad
        override. Unset model bounds stay None (model_timeout_seconds: the default) for the
        worker to fill in."""
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        overrides: dict[str, object] = {"version": self.version}
        if max_turns is not None:
            overrides["max_turns"] = max_turns
        if model:
            overrides["model"] = model
        return self._spec().model_copy(update=overrides)

    def _spec(self) -> AgentSpec:
        return AgentSpec(
            name=self.name,
            instructions=self.instructions,
            model=self.model,
            tools=[t.spec().model_copy(update={"approval": self.approval_mode(t.name)}) for t in self.tools],
            max_turns=self.max_turns,
            temperature=self.temperature,
            model_timeout_seconds=self.model_timeout_seconds or DEFAULT_MODEL_TIMEOUT,
            model_read_timeout_seconds=self.model_read_timeout_seconds,
            model_max_attempts=self.model_max_attempts,
            model_retry_seconds=self.model_retry_seconds,
            api=self.api,
            approval_timeout_seconds=self.approval_timeout_seconds,
            approval_timeout_outcome=self.approval_timeout_outcome,
            approval_timeout_reason=self.approval_timeout_reason,
            token_budget=self.token_budget,
            continue_as_new_after=self.continue_as_new_after,
        )


class Registry:
    """The agents one worker serves, by name, and their tools."""

    def __init__(self, tools: Iterable[Tool[..., Any]] = (), agents: Iterable[Agent] = ()) -> None:
        self._tools: dict[str, list[Tool[..., Any]]] = {}  # name -> the distinct tools of that name
        self._agents: dict[str, tuple[Agent, str]] = {}  # name -> (agent, where defined)
        for t in tools:
            self.add_tool(t)
        for a in agents:
            self.add_agent(a)

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> Registry:
        """Import each module (dotted name or `.py` path) and collect its tools and agents."""
        registry = cls()
        for ref in modules:
            module = _import(ref)
            for value in list(vars(module).values()):
                if isinstance(value, Tool):
                    registry.add_tool(cast(Tool[..., Any], value))
                elif isinstance(value, Agent):
                    registry.add_agent(value, origin=ref)
        return registry

    def add_tool(self, tool: Tool[..., Any]) -> None:
        same = self._tools.setdefault(tool.name, [])
        if not any(t is tool for t in same):  # re-exported, or also listed by an agent: one tool
            same.append(tool)

    def add_agent(self, agent: Agent, origin: str = "") -> None:
        """Register an agent and every tool it uses. Two different agents may not share a name."""
        existing = self._agents.get(agent.name)
        if existing is not None and existing[0] is not agent:
            where = " and ".join(repr(o) for o in (existing[1], origin) if o) or "the registry"
            raise RegistryError(f"two different agents are named '{agent.name}' (in {where}); rename one")
        self._agents[agent.name] = (agent, origin)
        for t in agent.tools:
            self.add_tool(t)

    def find_tool(self, agent: str, tool: str) -> Tool[..., Any] | str:
        """The tool a call of `agent`'s run means by `tool`, or what to tell the model instead.
        By name alone only when this worker does not know the agent (runs recorded before
        routing), and only if the name is unambiguous."""
        known = self.agent(agent)
        if known is not None:
            found = known.tool(tool)
            return found or _unknown(tool, [t.name for t in known.tools])
        same = self._tools.get(tool, [])
        if len(same) == 1:
            return same[0]
        if same:
            return f"tool '{tool}' is ambiguous here: {len(same)} agents have one, and agent '{agent}' is unknown"
        return _unknown(tool, self.tool_names())

    def tool(self, name: str) -> Tool[..., Any] | None:
        """The one tool of that name, or None when there is none or more than one."""
        same = self._tools.get(name, [])
        return same[0] if len(same) == 1 else None

    def agent(self, name: str) -> Agent | None:
        entry = self._agents.get(name)
        return entry[0] if entry else None

    def agents(self) -> list[Agent]:
        return [self._agents[name][0] for name in sorted(self._agents)]

    def tools(self) -> list[Tool[..., Any]]:
        return [t for name in sorted(self._tools) for t in self._tools[name]]

    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    def agent_names(self) -> list[str]:
        return sorted(self._agents)


def _unknown(tool: str, available: list[str]) -> str:
    return f"unknown tool '{tool}'; available: {', '.join(available) or 'none'}"


def _import(ref: str) -> ModuleType:
    """A module by dotted name, or a `.py` file by path. Errors say which module and why."""
    if not ref.endswith(".py"):
        try:
            return importlib.import_module(ref)
        except Exception as exc:
            raise RegistryError(f"cannot import module '{ref}': {type(exc).__name__}: {exc}") from exc
    path = Path(ref).resolve()
    if not path.is_file():
        raise RegistryError(f"cannot load '{ref}': no such file")
    # A unique name per path, so two `tools.py` files in different folders do not collide.
    name = f"_agent_module_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    # Its folder goes on sys.path, as for `python my_tools.py`, so `import helpers` beside it works;
    # for good, not just while importing, since a tool may import lazily mid-run. Appended, so a
    # `logging.py` in that folder cannot shadow a module the worker itself needs.
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RegistryError(f"cannot load '{ref}': not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: pydantic and dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise RegistryError(f"cannot load '{ref}': {type(exc).__name__}: {exc}") from exc
    return module
