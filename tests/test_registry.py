"""Agents, loading user modules, and the tool/agent activities (without a Temporal server)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner import (
    GuardrailContext,
    GuardrailResult,
    McpServer,
    Tool,
    ToolRetryableError,
    handoff,
    input_guardrail,
    output_guardrail,
    tool,
)
from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.agents.agent import AgentToolInput
from durable_agent_runner.agents.registry import Agent, Registry, RegistryError
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows.types import (
    AGENT_NOT_HERE,
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    Message,
    ModelSettings,
    ResolveAgentInput,
    ToolCallInput,
    UserMessage,
    chain_digest,
)
from tests.fixtures import sample_tools

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


def test_two_agents_of_one_name_in_one_module_name_it_once(tmp_path: Path) -> None:
    module = tmp_path / "twins.py"
    module.write_text(
        "from durable_agent_runner import Agent\n"
        "a = Agent(name='twin', instructions='one')\n"
        "b = Agent(name='twin', instructions='two')\n"
    )
    with pytest.raises(RegistryError) as err:
        Registry.from_modules([str(module)])
    assert str(err.value) == f"two different agents are named 'twin' (both in {str(module)!r}); rename one"


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
from durable_agent_runner import Agent, tool
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
    assert registry.find_tool("alpha", "nope") == "error: unknown tool 'nope'; available tools: lookup"


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
        ("tests/fixtures", "^cannot load 'tests/fixtures': a folder: give a .py file, or a module's dotted name$"),
        ("./my_tools", "^cannot load './my_tools': not a .py file: give a .py file, or a module's dotted name$"),
        ("", "^cannot load '': give a .py file, or a module's dotted name$"),  # said: ValueError: Empty module name
        (" ", "^cannot load ' ': give a .py file, or a module's dotted name$"),
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


@pytest.mark.parametrize(("code", "said"), [("3", "sys.exit(3)"), ("'set API_KEY'", "sys.exit('set API_KEY')")])
def test_module_calling_sys_exit_on_import_is_one_error_naming_it(tmp_path: Path, code: str, said: str) -> None:
    """Before: the worker ended with the module's exit code and not a word (SystemExit is no Exception)."""
    quitting = tmp_path / f"quits_{code.strip(chr(39)).replace(' ', '_')}.py"
    quitting.write_text(f"import sys\nsys.exit({code})\n")
    with pytest.raises(RegistryError, match=re.escape(f"{quitting.name}': it called {said} while being imported")):
        Registry.from_modules([str(quitting)])


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "from durable_agent_runner import Agent\nAgent(name='')\n",
            "Agent: name: String should have at least 1 character",
        ),
        ("raise ValueError('first line\\nsecond line')\n", "ValueError: first line second line"),
    ],
)
def test_a_module_whose_error_spans_lines_is_one_line(tmp_path: Path, source: str, said: str) -> None:
    """Before: pydantic's four lines (with its URL), or the error's own line breaks, after `error:`."""
    module = tmp_path / "many_lines.py"
    module.write_text(source)
    with pytest.raises(RegistryError) as err:
        Registry.from_modules([str(module)])
    assert str(err.value).endswith(f"many_lines.py': {said}") and "\n" not in str(err.value), str(err.value)


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
    assert result.output == "error: unknown tool 'nope'; available tools: double, get_weather, send_note"


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


def local_resolve(run: str = "run-1") -> ActivityEnvironment:
    """An environment for the resolve as a local activity, on the run's own worker (`run`: its
    workflow id)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, is_local=True, workflow_id=run)
    return env


@pytest.mark.asyncio
async def test_a_local_resolve_of_an_agent_this_worker_does_not_serve_says_so() -> None:
    # the run then resolves routed, on a worker that polls the agent's queue
    with pytest.raises(ApplicationError) as info:
        await local_resolve().run(ToolActivities(REGISTRY).resolve_agent, ResolveAgentInput(agent="nope"))
    assert (info.value.type, info.value.non_retryable) == (AGENT_NOT_HERE, True)
    assert "this worker does not serve it" in info.value.message


@pytest.mark.asyncio
async def test_a_local_resolve_never_reaches_mcp_servers(tmp_path: Path) -> None:
    never = McpServer(name="fx", command=[str(tmp_path / "would-fail-if-started")])
    agents = Registry(agents=[Agent(name="lead", instructions="-", handoffs=[Agent(name="mcp", mcp_servers=[never])])])
    with pytest.raises(ApplicationError) as info:
        await local_resolve().run(ToolActivities(agents).resolve_agent, ResolveAgentInput(agent="lead"))
    assert info.value.type == AGENT_NOT_HERE and "would have to reach its MCP servers" in info.value.message


@pytest.mark.asyncio
async def test_a_local_resolve_leaves_the_first_calls_context_in_the_cache() -> None:
    cache = ContextCache()
    activities = ToolActivities(REGISTRY, cache=cache)
    spec = await local_resolve("run-1").run(activities.resolve_agent, ResolveAgentInput(agent="weather", prompt="hi"))
    first = [UserMessage(content="hi")]
    assert cache.lookup("run-1", 1, chain_digest("", first[0])) == (spec, first)
    await ActivityEnvironment().run(activities.resolve_agent, ResolveAgentInput(agent="weather", prompt="hi"))
    assert len(cache._runs) == 1  # routed, on another worker maybe: nothing to leave


def test_versions_of_agents_without_the_new_fields_stay_as_released() -> None:
    # Pinned: runs in flight route their tool calls by these; a release that only adds fields
    # to Agent or AgentSpec must not move them.
    assert (sample_tools.weather.version, sample_tools.notes.version) == ("2fc45ba029b0", "7e174320961b")


# ----------------------------------------------------------------------- handoffs and teams


class Refund(BaseModel):
    amount: int
    reason: str = ""


def keep_users(messages: list[Message]) -> list[Message]:
    return [m for m in messages if isinstance(m, UserMessage)]


def make_team(billing_instructions: str = "Bills.", output_type: object = Refund) -> tuple[Agent, Agent, Agent, Agent]:
    """triage → billing → triage (a cycle), triage → refunds, researcher as triage's tool;
    researcher hands off to refunds."""
    refunds = Agent(name="refunds", output_type=output_type, handoff_description="Refunds.")
    billing = Agent(name="billing", instructions=billing_instructions, model="billing-model")
    researcher = Agent(name="research desk", handoffs=[refunds], model_settings=ModelSettings(top_p=0.5))
    triage = Agent(
        name="triage",
        handoffs=[billing, handoff(refunds, input_filter=keep_users)],
        tools=[sample_tools.get_weather, researcher.as_tool()],
        approvals={"research_desk": "always"},
    )
    billing.handoffs.append(handoff(triage, input_filter="remove_tools"))
    return triage, billing, refunds, researcher


def test_handoff_specs_and_tool_names() -> None:
    target = Agent(name="Billing & Payments", handoff_description="Invoices and payments.")
    spec = handoff(target).spec()
    assert (spec.agent, spec.tool_name, spec.description, spec.input_filter) == (
        "Billing & Payments",
        "transfer_to_Billing___Payments",
        "Invoices and payments.",
        None,
    )
    assert len(handoff(Agent(name="x" * 100)).tool_name) == 64
    custom = handoff(target, tool_name="to_billing", description="Money.", input_filter="last_user_message").spec()
    assert (custom.tool_name, custom.description, custom.input_filter) == ("to_billing", "Money.", "last_user_message")
    assert handoff(target, input_filter=keep_users).spec().input_filter == "hook:keep_users"
    # A bare agent in `handoffs` is handoff(agent) with its defaults.
    source = Agent(name="triage", handoffs=[target])
    assert source.spec().handoffs == [spec]
    with pytest.raises(ValueError, match="unknown input filter 'everything'"):
        handoff(target, input_filter="everything")
    with pytest.raises(ValueError, match="handoff tool name 'no spaces'"):
        handoff(target, tool_name="no spaces")


def test_agent_rejects_clashing_names_among_tools_handoffs_guardrails_and_filters() -> None:
    billing = Agent(name="billing")
    with pytest.raises(ValueError, match="more than one tool named transfer_to_billing"):
        Agent(name="x", handoffs=[billing, handoff(billing)])
    with pytest.raises(ValueError, match="more than one tool named billing"):
        Agent(name="x", tools=[billing.as_tool(), billing.as_tool()])

    def one(messages: list[Message]) -> list[Message]:
        return messages

    def two(messages: list[Message]) -> list[Message]:
        return messages[-1:]

    two.__name__ = "one"
    with pytest.raises(ValueError, match="two different handoff input filters named 'one'"):
        Agent(name="x", handoffs=[handoff(billing, input_filter=one), handoff(Agent(name="y"), input_filter=two)])
    shared = Agent(name="x", handoffs=[handoff(billing, input_filter=one), handoff(Agent(name="y"), input_filter=one)])
    assert shared.input_filter("one") is one

    @input_guardrail
    def check(ctx: GuardrailContext, text: str) -> bool:
        return False

    with pytest.raises(ValueError, match="more than one input guardrail named check"):
        Agent(name="x", input_guardrails=[check, input_guardrail(check.fn)])
    with pytest.raises(ValueError, match="agent 'x': extra_body may not set tools"):
        Agent(name="x", model_settings=ModelSettings(extra_body={"tools": []}))
    with pytest.raises(ValueError):  # an input guardrail is not an output guardrail
        Agent(name="x", output_guardrails=[check])  # pyright: ignore[reportArgumentType]


def test_as_tool_spec() -> None:
    researcher = Agent(name="research desk", handoff_description="Finds facts.")
    spec = researcher.as_tool().spec()
    assert (spec.name, spec.description, spec.agent) == ("research_desk", "Finds facts.", "research desk")
    assert spec.parameters == {
        "type": "object",
        "properties": {"input": {"type": "string", "description": AgentToolInput.model_fields["input"].description}},
        "required": ["input"],
        "additionalProperties": False,
    }
    named = researcher.as_tool(name="lookup", description="Look it up.").spec()
    assert (named.name, named.description) == ("lookup", "Look it up.")
    boss = Agent(name="boss", tools=[researcher.as_tool(name="lookup")], approvals={"lookup": lambda a: True})
    assert boss.spec().tool("lookup") == named.model_copy(
        update={"description": "Finds facts.", "approval": "conditional"}
    )
    with pytest.raises(ValueError, match="tool name 'a b'"):
        researcher.as_tool(name="a b")


def test_output_type_and_guardrails_freeze_as_data() -> None:
    @output_guardrail(name="tone")
    async def polite(ctx: GuardrailContext, text: str) -> GuardrailResult:
        return GuardrailResult(tripwire_triggered=False)

    agent = Agent(name="typed", output_type=Refund, output_retries=4, output_guardrails=[polite])
    spec = agent.spec()
    assert (spec.output_name, spec.output_retries, spec.output_guardrails) == ("Refund", 4, ["tone"])
    assert spec.output_schema == Refund.model_json_schema()
    listed = Agent(name="listed", output_type=list[int]).spec()
    assert (listed.output_name, listed.output_schema) == ("list", {"type": "array", "items": {"type": "integer"}})
    with pytest.raises(ValueError, match="output_type"):
        Agent(name="bad", output_type=threading.Lock())


def test_team_is_every_agent_reached_transitively_and_cycles_are_fine() -> None:
    triage, billing, refunds, researcher = make_team()
    assert triage.team() == [billing, refunds, researcher]
    assert billing.team() == [refunds, researcher, triage]
    assert researcher.team() == [refunds] and refunds.team() == []
    assert triage.handoffs[0] is billing  # agents are kept, not copied
    registry = Registry(agents=[triage])
    assert registry.agent_names() == ["billing", "refunds", "research desk", "triage"]
    assert registry.agent("billing") is billing
    # Only real tools are tools: an agent used as a tool is not found as one.
    assert registry.tool_names() == ["get_weather"]
    assert registry.find_tool("triage", "research_desk") == (
        "tool 'research_desk' is agent 'research desk': it runs as a child run, not as a tool"
    )


def test_two_different_agents_of_one_name_in_a_team_is_an_error() -> None:
    triage = Agent(name="triage", handoffs=[Agent(name="billing")], tools=[Agent(name="billing").as_tool("ask")])
    with pytest.raises(ValueError, match="reaches two different agents named 'billing'"):
        triage.team()
    with pytest.raises(RegistryError, match="reaches two different agents named 'billing'"):
        Registry(agents=[triage])
    registry = Registry(agents=[Agent(name="billing")])
    with pytest.raises(RegistryError, match="two different agents are named 'billing'"):
        registry.add_agent(Agent(name="triage", handoffs=[Agent(name="billing")]))
    assert registry.agent_names() == ["billing"]  # nothing of the refused agent was registered


def test_registry_checks_handoffs_appended_after_the_agent_was_made() -> None:
    billing = Agent(name="billing")
    triage = Agent(name="triage", handoffs=[billing])
    triage.handoffs.append(handoff(billing))
    with pytest.raises(RegistryError, match="more than one tool named transfer_to_billing"):
        Registry(agents=[triage])


def test_version_covers_the_team() -> None:
    triage, billing, refunds, researcher = make_team()
    same = make_team()
    assert [a.version for a in same] == [a.version for a in (triage, billing, refunds, researcher)]
    assert len({a.version for a in (triage, billing, refunds, researcher)}) == 4
    # A handoff target changes (billing's instructions): the agents that reach it change, the others not.
    other = make_team(billing_instructions="Invoices only.")
    assert (other[0].version, other[1].version) != (triage.version, billing.version)
    assert (other[2].version, other[3].version) == (refunds.version, researcher.version)
    # An output type changes: refunds, and every agent that reaches refunds.
    retyped = make_team(output_type=list[Refund])
    assert all(a.version != b.version for a, b in zip(retyped, (triage, billing, refunds, researcher), strict=True))
    # Handoffs, filters and guardrails as written.
    plain = Agent(name="x", handoffs=[Agent(name="y")])
    filtered = Agent(name="x", handoffs=[handoff(Agent(name="y"), input_filter="remove_tools")])
    guarded = Agent(name="x", handoffs=[Agent(name="y")], input_guardrails=[input_guardrail(lambda c, t: False)])
    assert len({plain.version, filtered.version, guarded.version}) == 3


# ------------------------------------------------------------------------------- freezing


@pytest.mark.asyncio
async def test_resolve_freezes_the_team_with_the_runs_overrides() -> None:
    triage, billing, refunds, researcher = make_team()
    settings = LLMSettings(model="worker-model", timeout=70, read_timeout=30, max_attempts=4, retry_seconds=60)
    worker = ToolActivities(Registry(agents=[triage]), settings=settings)
    run_settings = ModelSettings(temperature=0.3, extra_body={"user": "run"})
    spec = await ActivityEnvironment().run(
        worker.resolve_agent,
        ResolveAgentInput(agent="triage", max_turns=3, model="run-model", model_settings=run_settings),
    )
    assert (spec.name, spec.version, spec.max_turns, spec.model) == ("triage", triage.version, 3, "run-model")
    assert [m.name for m in spec.team] == ["billing", "refunds", "research desk"]
    assert [m.version for m in spec.team] == [billing.version, refunds.version, researcher.version]
    for member in [spec, *spec.team]:
        assert member.team == [] or member is spec
        assert member.settings.temperature == 0.3 and member.settings.extra_body == {"user": "run"}
        bounds = (member.model_timeout_seconds, member.model_read_timeout_seconds, member.model_max_attempts)
        assert (*bounds, member.model_retry_seconds) == (70, 30, 4, 60)
    by_name = {m.name: m for m in spec.team}
    # max_turns is the run's (its first agent's); the run's model is every member's, as in the Agents SDK
    assert (by_name["billing"].max_turns, by_name["billing"].model) == (10, "run-model")
    assert by_name["refunds"].model == "run-model"
    assert by_name["research desk"].settings.top_p == 0.5  # its own, under the run's
    assert spec.member("refunds") == by_name["refunds"] and spec.member("nobody") is None
    plain = await ActivityEnvironment().run(worker.resolve_agent, ResolveAgentInput(agent="triage"))
    models = {m.name: m.model for m in plain.team}  # no run override: their own, or the worker's
    assert (models["billing"], models["refunds"]) == ("billing-model", "worker-model")
    assert by_name["refunds"].output_schema == Refund.model_json_schema()
    research = spec.tool("research_desk")
    assert research is not None and (research.agent, research.approval) == ("research desk", "always")


@pytest.mark.asyncio
async def test_resolve_refuses_model_settings_no_wire_may_send() -> None:
    worker = ToolActivities(Registry(agents=[make_team()[0]]))
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(
            worker.resolve_agent,
            ResolveAgentInput(agent="triage", model_settings=ModelSettings(extra_body={"messages": []})),
        )
    assert (info.value.type, info.value.non_retryable) == ("InvalidRunInput", True)
    assert "agent 'triage': extra_body may not set messages" in info.value.message


def test_the_workers_log_level_is_taken_in_any_case() -> None:
    """`worker.py --log-level debug` was refused (invalid choice: 'debug'); any case is taken."""
    from durable_agent_runner.worker.main import parse_args

    assert parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    assert parse_args([]).log_level == "INFO"
    with pytest.raises(SystemExit):
        parse_args(["--log-level", "verbose"])
