"""Agents, loading user modules, and the tool/agent activities (without a Temporal server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.registry import Agent, Registry, RegistryError
from activities.tool_activities import ToolActivities
from activities.tools import ToolRetryableError, tool
from tests.fixtures import sample_tools
from workflows.types import ResolveAgentInput, ToolCallInput

FIXTURE_FILE = Path(__file__).parent / "fixtures" / "sample_tools.py"


def call(tool_name: str, arguments: str = "{}") -> ToolCallInput:
    return ToolCallInput(call_id="c1", tool=tool_name, arguments=arguments, idempotency_key="wf/c1", turn=2)


def test_load_by_module_name_collects_tools_agents_and_agent_only_tools() -> None:
    registry = Registry.from_modules(["tests.fixtures.sample_tools"])
    assert registry.agent_names() == ["notes", "weather"]
    assert registry.tool_names() == ["double", "get_weather", "send_note"]
    assert registry.tool("get_weather") is sample_tools.get_weather
    assert registry.agent("weather") is sample_tools.weather
    assert registry.agent("nope") is None and registry.tool("nope") is None
    assert [t.name for t in registry.tools()] == ["double", "get_weather", "send_note"]


def test_load_by_file_path() -> None:
    registry = Registry.from_modules([str(FIXTURE_FILE)])
    assert registry.agent_names() == ["notes", "weather"]
    # Loaded under its own module name, so these are new objects, not the package's.
    assert registry.tool("get_weather") is not sample_tools.get_weather
    assert Registry.from_modules([str(FIXTURE_FILE)]).tool("double") is registry.tool("double")


def test_same_names_from_different_objects_is_an_error() -> None:
    where = r"\(in 'tests.fixtures.sample_tools' and '.*sample_tools.py'\)"
    with pytest.raises(RegistryError, match="two different tools are named 'get_weather' " + where):
        Registry.from_modules(["tests.fixtures.sample_tools", str(FIXTURE_FILE)])


def test_same_object_twice_is_fine() -> None:
    registry = Registry(tools=[sample_tools.get_weather], agents=[sample_tools.weather])
    assert registry.tool_names() == ["double", "get_weather"]


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("tests.fixtures.no_such_module", "cannot import module 'tests.fixtures.no_such_module': ModuleNotFoundError"),
        ("missing/tools.py", "cannot load 'missing/tools.py': no such file"),
    ],
)
def test_bad_module_error_says_which_and_why(ref: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        Registry.from_modules([ref])


def test_module_raising_on_import(tmp_path: Path) -> None:
    broken = tmp_path / "broken_tools.py"
    broken.write_text("raise RuntimeError('needs API_KEY')\n")
    with pytest.raises(RegistryError, match=r"broken_tools.py': RuntimeError: needs API_KEY"):
        Registry.from_modules([str(broken)])


def test_agent_spec_with_overrides() -> None:
    spec = sample_tools.weather.spec()
    assert (spec.name, spec.max_turns, spec.model) == ("weather", 8, None)
    assert [t.name for t in spec.tools] == ["get_weather", "double"]
    assert spec.tool("get_weather") == sample_tools.get_weather.spec()
    spec = sample_tools.weather.spec(max_turns=3, model="gpt-test")
    assert (spec.max_turns, spec.model) == (3, "gpt-test")
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        sample_tools.weather.spec(max_turns=0)


def test_agent_validation() -> None:
    with pytest.raises(ValueError, match="more than one tool named get_weather"):
        Agent(name="x", tools=[sample_tools.get_weather, sample_tools.get_weather])
    with pytest.raises(ValueError):
        Agent(name="x", max_turns=0)
    with pytest.raises(ValueError):
        Agent(name="x", tools=[print])  # pyright: ignore[reportArgumentType]


# ------------------------------------------------------------------------------ activities

REGISTRY = Registry.from_modules(["tests.fixtures.sample_tools"])


@pytest.mark.asyncio
async def test_call_tool_runs_the_tool_with_context() -> None:
    result = await ActivityEnvironment().run(
        ToolActivities(REGISTRY).call_tool, call("send_note", '{"to": "a", "body": "b"}')
    )
    assert (result.call_id, result.tool, result.is_error) == ("c1", "send_note", False)
    assert result.output == "sent to a with key wf/c1"


@pytest.mark.asyncio
async def test_call_tool_unknown_tool_is_an_error_result() -> None:
    result = await ActivityEnvironment().run(ToolActivities(REGISTRY).call_tool, call("nope"))
    assert result.is_error
    assert result.output == "unknown tool 'nope'; available: double, get_weather, send_note"


@pytest.mark.asyncio
async def test_call_tool_heartbeats_while_the_tool_runs() -> None:
    @tool
    async def slow() -> str:
        """Take a while."""
        await asyncio.sleep(0.2)
        return "done"

    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    result = await env.run(ToolActivities(Registry(tools=[slow]), heartbeat_interval=0.02).call_tool, call("slow"))
    assert result.output == "done"
    assert len(beats) >= 3


@pytest.mark.asyncio
async def test_call_tool_retryable_error_becomes_application_error_with_delay() -> None:
    @tool
    def busy() -> str:
        """Always busy."""
        raise ToolRetryableError("rate limited", retry_after=7)

    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(ToolActivities(Registry(tools=[busy])).call_tool, call("busy"))
    assert (info.value.type, info.value.non_retryable) == ("ToolRetryableError", False)
    assert info.value.next_retry_delay is not None and info.value.next_retry_delay.total_seconds() == 7


@pytest.mark.asyncio
async def test_resolve_agent_applies_overrides() -> None:
    spec = await ActivityEnvironment().run(
        ToolActivities(REGISTRY).resolve_agent, ResolveAgentInput(agent="weather", max_turns=2, model="m")
    )
    assert (spec.name, spec.max_turns, spec.model) == ("weather", 2, "m")


@pytest.mark.asyncio
async def test_resolve_agent_unknown_agent_is_non_retryable() -> None:
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(ToolActivities(REGISTRY).resolve_agent, ResolveAgentInput(agent="nope"))
    assert (info.value.type, info.value.non_retryable) == ("UnknownAgent", True)
    assert info.value.message == "unknown agent 'nope'; this worker knows: notes, weather"


@pytest.mark.asyncio
async def test_resolve_agent_invalid_override_is_non_retryable() -> None:
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(
            ToolActivities(REGISTRY).resolve_agent, ResolveAgentInput(agent="weather", max_turns=0)
        )
    assert (info.value.type, info.value.non_retryable) == ("InvalidRunInput", True)
