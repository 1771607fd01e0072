"""An agent's or a tool's options are checked as they are written: a typo is refused, naming it
and the option it most likely meant, never dropped for the default."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from pydantic import AfterValidator, ValidationError

from durable_agent_runner import Agent, McpServer, tool


def test_a_mistyped_agent_option_is_refused_with_the_close_match() -> None:
    """Before: accepted, the run got 10 turns and the worker's default model."""
    with pytest.raises(TypeError) as caught:
        Agent(name="a", max_turn=5, modle="gpt")  # type: ignore[call-arg]
    assert str(caught.value) == (
        "unknown agent option(s): max_turn (did you mean max_turns?), modle (did you mean model?)"
    )


def test_an_option_like_no_other_lists_those_known() -> None:
    with pytest.raises(TypeError, match=r"unknown agent option\(s\): zzz; known: .*\bmax_turns\b.*\bmodel\b"):
        Agent(name="a", zzz=1)  # type: ignore[call-arg]


def test_known_options_still_pass() -> None:
    agent = Agent(name="a", max_turns=5, model="gpt", model_settings={"temperature": 0.5})  # type: ignore[arg-type]
    assert (agent.max_turns, agent.model) == (5, "gpt")


def test_a_mistyped_tool_option_is_refused_with_the_close_match() -> None:
    with pytest.raises(TypeError, match=re.escape("unknown tool option(s): nmae (did you mean name?)")):

        @tool(nmae="lookup")  # type: ignore[call-overload]
        def look_up(city: str) -> str:
            """Look a city up."""
            return city


@pytest.mark.parametrize(
    "options, words",
    [
        ({"model": ["gpt", "claude", "gpt"]}, "agent 'a': fallback model 'gpt' is the model itself"),
        ({"model": "gpt", "fallback_models": ["gpt"]}, "fallback model 'gpt' is the model itself"),
        ({"fallback_models": ["x", "y", "x"]}, "fallback model 'x' is listed twice"),
        ({"model_settings": {"stop": [""]}}, "agent 'a': stop: a stop sequence may not be empty"),
    ],
)
def test_models_that_repeat_and_an_empty_stop_sequence_are_refused_as_written(options: dict, words: str) -> None:
    """Before: accepted; a failed model call went on to the same model, and an empty stop
    sequence reached the server (Anthropic refuses it; others may end every reply at once)."""
    with pytest.raises(ValueError, match=re.escape(words)):
        Agent(name="a", **options)


def test_models_in_order_without_repeats_pass() -> None:
    agent = Agent(name="a", model=["gpt", "anthropic:claude"], fallback_models=["gemini:flash"])
    assert (agent.model, agent.fallback_models) == ("gpt", ["anthropic:claude", "gemini:flash"])


def lookup(city: str) -> str:
    """Look a city up."""
    return city


def test_a_plain_function_among_the_tools_is_refused_with_its_fix() -> None:
    """Before: pydantic's ten lines, 'Input should be an instance of Tool' and of AgentTool."""
    with pytest.raises(TypeError) as caught:
        Agent(name="a", tools=[tool(lookup, name="first"), lookup])  # type: ignore[list-item]
    assert str(caught.value) == "agent 'a': tools[1] is the plain function lookup: decorate it with @tool"


def test_an_agent_s_name_among_the_handoffs_is_refused_with_its_fix() -> None:
    with pytest.raises(TypeError) as caught:
        Agent(name="triage", handoffs=["billing"])  # type: ignore[list-item]
    assert str(caught.value) == "agent 'triage': handoffs[0] is the name 'billing': give the Agent itself"


def test_one_item_where_a_list_belongs_is_refused_with_its_fix() -> None:
    """Before: `mcp_servers=McpServer(...)` was ten of pydantic's errors (a model iterates as its
    fields), `tools=tool` and `handoffs=agent` pydantic's own several lines."""
    server = McpServer(name="files", command=["mcp-files"])
    for key, one, cls in (("mcp_servers", server, "McpServer"), ("tools", tool(lookup), "Tool")):
        with pytest.raises(TypeError) as caught:
            Agent(name="a", **{key: one})
        assert str(caught.value) == f"agent 'a': {key} is a list: {key}=[{cls}(...)], not the one item"
    with pytest.raises(TypeError, match=r"^agent 'a': handoffs is a list: handoffs=\[Agent\(...\)\]"):
        Agent(name="a", handoffs=Agent(name="b"))  # type: ignore[arg-type]
    assert Agent(name="a", tools=(tool(lookup),)).tools[0].name == "lookup"  # a tuple is a list, as before


def test_an_mcp_servers_command_line_in_one_string_is_refused_without_echoing_it() -> None:
    """Before: `command: Input should be a valid list`; a command line may hold a token."""
    with pytest.raises(ValueError, match=r"command is a list, the program and its arguments \(shlex.split") as caught:
        McpServer(name="files", command="mcp-files --token s3cr3t-value")  # type: ignore[arg-type]
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_generator_is_not_a_tool(kind: str) -> None:
    """Before: accepted, and the model was sent '<async_generator object …>'."""

    def cities(n: int):  # type: ignore[no-untyped-def]
        yield from ["Paris"] * n

    async def cities_async(n: int):  # type: ignore[no-untyped-def]
        yield "Paris"

    with pytest.raises(TypeError, match=r"^tool 'cities' is a generator: a tool returns one value"):
        tool(cities if kind == "sync" else cities_async, name="cities")


def served(city: str) -> str:
    if city != "Paris":
        raise ValueError("not a city we serve")
    return city


@tool
def weather(city: Annotated[str, AfterValidator(served)]) -> str:
    """The weather."""
    return city


def test_a_tool_s_own_validator_is_said_to_the_model_in_its_own_words() -> None:
    """Before: `city: Value error, not a city we serve` (pydantic's prefix reached the model)."""
    said = "invalid arguments for tool 'weather': city: not a city we serve (parameters: city)"
    assert weather.validate('{"city": "Rome"}') == said


@pytest.mark.parametrize("given", [{"tools": 5}, {"handoffs": "billing"}])
def test_lists_that_are_not_lists_are_pydantic_s_to_say(given: dict) -> None:
    """The slips' check reads lists only: `handoffs="billing"` was read letter by letter."""
    with pytest.raises(ValidationError, match=r"validation error for Agent"):
        Agent(name="a", **given)
