"""The registry of agents and tools a worker serves, loaded from user modules.

A user module defines tools and agents at module level:

    from durable_agent_runner import tool, Agent

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

Registering an agent registers every agent it reaches too (handoffs, agents used as tools: its
`team()`), so the worker polls their queues and runs their code. Agents' names are unique on a
worker; tools' names only within an agent, since two modules may each bring their own `search`
tool: a call finds its tool through its run's agent (`find_tool`). Agents themselves are defined
in durable_agent_runner/agents/agent.py.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from pydantic import ValidationError

from durable_agent_runner.agents.agent import Agent, AgentTool
from durable_agent_runner.agents.tools import Tool
from durable_agent_runner.machine.calls import unknown_tool
from durable_agent_runner.machine.texts import said

__all__ = ["Agent", "Registry", "RegistryError"]


class RegistryError(ValueError):
    """A module could not be loaded, or two different objects claim one name."""


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
        """Register an agent, every agent it reaches, and the tools of each. Two different agents
        may not share a name; nothing is registered when the agent or its team is at fault."""
        try:
            members = [agent, *agent.team()]
            for member in members:
                member.check()
        except ValueError as exc:
            raise RegistryError(f"{exc}{f' (in {origin!r})' if origin else ''}") from exc
        for member in members:
            existing = self._agents.get(member.name)
            if existing is not None and existing[0] is not member:
                places = list(dict.fromkeys(o for o in (existing[1], origin) if o))  # one module, said once
                where = f"both in {places[0]!r}" if len(places) == 1 else f"in {' and '.join(map(repr, places))}"
                where = where if places else "in the registry"
                raise RegistryError(f"two different agents are named '{member.name}' ({where}); rename one")
        for member in members:
            self._agents.setdefault(member.name, (member, origin))
            for t in member.function_tools():
                self.add_tool(t)

    def find_tool(self, agent: str, tool: str) -> Tool[..., Any] | str:
        """The tool a call of `agent`'s run means by `tool`, or what to tell the model instead.
        By name alone only when this worker does not know the agent (runs recorded before
        routing), and only if the name is unambiguous."""
        known = self.agent(agent)
        if known is not None:
            found = known.tool(tool)
            if isinstance(found, AgentTool):  # the workflow runs it as a child run, never as a tool call
                return f"tool '{tool}' is agent '{found.agent.name}': it runs as a child run, not as a tool"
            return found or unknown_tool(tool, [t.name for t in known.tools])
        same = self._tools.get(tool, [])
        if len(same) == 1:
            return same[0]
        if same:
            return f"tool '{tool}' is ambiguous here: {len(same)} agents have one, and agent '{agent}' is unknown"
        return unknown_tool(tool, self.tool_names())

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


def _import(ref: str) -> ModuleType:
    """A module by dotted name, or a `.py` file by path. Errors say which module and why."""
    if not ref.strip():
        raise RegistryError(f"cannot load {ref!r}: give a .py file, or a module's dotted name")
    if not ref.endswith(".py") and "/" in ref:  # a path, not a dotted name: say what it is
        what = "a folder" if Path(ref).is_dir() else "not a .py file"
        raise RegistryError(f"cannot load '{ref}': {what}: give a .py file, or a module's dotted name")
    if not ref.endswith(".py"):
        try:
            return importlib.import_module(ref)
        except (Exception, SystemExit) as exc:
            raise RegistryError(f"cannot import module '{ref}': {_why(exc)}") from exc
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
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise RegistryError(f"cannot load '{ref}': {_why(exc)}") from exc
    return module


def _why(exc: BaseException) -> str:
    """Why a user's module did not load, in one line: its error, or the exit it called (which would
    otherwise end the worker or the CLI without a word)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    if isinstance(exc, ValidationError):  # an Agent(...) or a model of the module's refused: pydantic's lines, as one
        errors = exc.errors(include_url=False)
        where = ".".join(str(x) for x in errors[0]["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{exc.title}: {where + ': ' if where else ''}{said(errors[0])}{more}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
