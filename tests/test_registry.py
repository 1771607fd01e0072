"""Agents, loading user modules, and the tool/agent activities (without a Temporal server)."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.registry import Agent, Registry, RegistryError
from activities.settings import LLMSettings
from activities.tool_activities import ToolActivities
from activities.tools import Tool, ToolRetryableError, tool
from tests.fixtures import sample_tools
from workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    ResolveAgentInput,
    ToolCallInput,
)

FIXTURE_FILE = Path(__file__).parent / "fixtures" / "sample_tools.py"


def call(tool_name: str, arguments: str = "{}", agent: str = "") -> ToolCallInput:
    return ToolCallInput(
        call_id="c1", tool=tool_name, arguments=arguments, idempotency_key="wf/c1", turn=2, agent=agent
    )


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


def test_two_agents_of_one_name_is_an_error() -> None:
    where = r"\(in 'tests.fixtures.sample_tools' and '.*sample_tools.py'\)"
    with pytest.raises(RegistryError, match="two different agents are named 'weather' " + where):
        Registry.from_modules(["tests.fixtures.sample_tools", str(FIXTURE_FILE)])


def write_agent_module(folder: Path, agent: str, answer: str) -> Path:
    """A user's tools file with a `lookup` tool of its own, importing a helper module beside it:
    once at import time, once lazily when the tool runs."""
    folder.mkdir()
    helper = f"helper_{uuid.uuid4().hex[:8]}"  # top-level module names are process-wide
    (folder / f"{helper}.py").write_text(f"ANSWER = {answer!r}\n")
    (folder / f"{helper}_lazy.py").write_text("SUFFIX = '!'\n")
    path = folder / "tools.py"
    path.write_text(
        f"""
from activities import Agent, tool
import {helper}


@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    import {helper}_lazy
    return {helper}.ANSWER + key + {helper}_lazy.SUFFIX


{agent} = Agent(name={agent!r}, tools=[lookup])
"""
    )
    return path


def test_a_file_imports_modules_beside_it_and_two_agents_have_their_own_same_named_tool(tmp_path: Path) -> None:
    a = write_agent_module(tmp_path / "a", "alpha", "from a: ")
    b = write_agent_module(tmp_path / "b", "beta", "from b: ")
    registry = Registry.from_modules([str(a), str(b)])
    assert registry.agent_names() == ["alpha", "beta"] and registry.tool_names() == ["lookup"]
    alpha, beta = registry.find_tool("alpha", "lookup"), registry.find_tool("beta", "lookup")
    assert isinstance(alpha, Tool) and isinstance(beta, Tool) and alpha is not beta
    assert (alpha(key="k"), beta(key="k")) == ("from a: k!", "from b: k!")
    # A call whose agent this worker does not know cannot tell them apart.
    assert registry.tool("lookup") is None
    assert registry.find_tool("gamma", "lookup") == (
        "tool 'lookup' is ambiguous here: 2 agents have one, and agent 'gamma' is unknown"
    )
    assert registry.find_tool("alpha", "nope") == "unknown tool 'nope'; available: lookup"


def test_agent_version_is_a_stable_digest_of_the_agent_as_written() -> None:
    weather = sample_tools.weather
    assert re.fullmatch(r"[0-9a-f]{12}", weather.version)
    same = Agent(name="weather", instructions=weather.instructions, tools=weather.tools, max_turns=8)
    assert same.version == weather.version
    assert weather.spec().version == weather.spec(max_turns=3, model="m").version == weather.version
    changed = [
        Agent(name="weather", instructions="Other.", tools=weather.tools, max_turns=8),
        Agent(name="weather", instructions=weather.instructions, tools=weather.tools[:1], max_turns=8),
        Agent(
            name="weather", instructions=weather.instructions, tools=weather.tools, max_turns=8, model_max_attempts=2
        ),
        Agent(
            name="weather",
            instructions=weather.instructions,
            tools=weather.tools,
            max_turns=8,
            approvals={"double": "always"},
        ),
    ]
    assert len({weather.version, *(a.version for a in changed)}) == 1 + len(changed)


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
    for bound in ("model_timeout_seconds", "model_read_timeout_seconds", "model_max_attempts", "model_retry_seconds"):
        with pytest.raises(ValueError, match=bound):
            Agent.model_validate({"name": "x", bound: 0})


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
async def test_resolve_agent_fills_unset_model_bounds_from_the_worker() -> None:
    spec = await ActivityEnvironment().run(ToolActivities(REGISTRY).resolve_agent, ResolveAgentInput(agent="weather"))
    assert (
        spec.model_timeout_seconds,
        spec.model_read_timeout_seconds,
        spec.model_max_attempts,
        spec.model_retry_seconds,
    ) == (DEFAULT_MODEL_TIMEOUT, DEFAULT_MODEL_READ_TIMEOUT, DEFAULT_MODEL_MAX_ATTEMPTS, DEFAULT_MODEL_RETRY_SECONDS)
    assert spec.version == sample_tools.weather.version

    bounded = Agent(name="bounded", model_timeout_seconds=7, model_read_timeout_seconds=3, model_max_attempts=2)
    settings = LLMSettings(model="m", timeout=70, read_timeout=30, max_attempts=4, retry_seconds=60)
    worker = ToolActivities(Registry(agents=[bounded, Agent(name="open")]), settings=settings)
    spec = await ActivityEnvironment().run(worker.resolve_agent, ResolveAgentInput(agent="bounded"))
    assert spec.model == "m"
    assert (spec.model_timeout_seconds, spec.model_read_timeout_seconds, spec.model_max_attempts) == (7, 3, 2)
    assert spec.model_retry_seconds == 60  # the one bound the agent left open
    spec = await ActivityEnvironment().run(worker.resolve_agent, ResolveAgentInput(agent="open"))
    assert (
        spec.model_timeout_seconds,
        spec.model_read_timeout_seconds,
        spec.model_max_attempts,
        spec.model_retry_seconds,
    ) == (70, 30, 4, 60)


@pytest.mark.asyncio
async def test_call_tool_finds_the_tool_through_the_runs_agent(tmp_path: Path) -> None:
    registry = Registry.from_modules(
        [str(write_agent_module(tmp_path / "a", "alpha", "a:")), str(write_agent_module(tmp_path / "b", "beta", "b:"))]
    )
    activities = ToolActivities(registry)
    for agent, expected in (("alpha", "a:k!"), ("beta", "b:k!")):
        result = await ActivityEnvironment().run(activities.call_tool, call("lookup", '{"key": "k"}', agent=agent))
        assert (result.is_error, result.output) == (False, expected)
    result = await ActivityEnvironment().run(activities.call_tool, call("lookup", '{"key": "k"}', agent="gone"))
    assert result.is_error and "ambiguous" in result.output


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
