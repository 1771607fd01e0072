"""anthropic_wire and fake_llm's Anthropic side against Anthropic's own Python SDK (a test
dependency only): the requests the runner builds are the SDK's `MessageCreateParams`, with no key
the SDK's types lack; the fake's messages, streams and errors are read by the SDK's client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, get_type_hints

import anthropic
import pytest
from anthropic.types import (
    AssistantMessageParam,
    CacheControlEphemeralParam,
    OutputConfigParam,
    RedactedThinkingBlockParam,
    TextBlockParam,
    ThinkingBlockParam,
    ThinkingConfigAdaptiveParam,
    ThinkingConfigEnabledParam,
    ToolChoiceAnyParam,
    ToolChoiceAutoParam,
    ToolChoiceNoneParam,
    ToolChoiceToolParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
from pydantic import TypeAdapter

from durable_agent_runner.activities import anthropic_wire as aw
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows.types import AgentSpec, HandoffSpec, Message, ModelSettings, UserMessage
from tests.test_anthropic_wire import TOOL_TURN
from tests.test_responses_wire import WEATHER_AGENT

BLOCKS: dict[str, type] = {
    "text": TextBlockParam,
    "tool_use": ToolUseBlockParam,
    "tool_result": ToolResultBlockParam,
    "thinking": ThinkingBlockParam,
    "redacted_thinking": RedactedThinkingBlockParam,
}
THINKING_CONFIGS: dict[str, type] = {"enabled": ThinkingConfigEnabledParam, "adaptive": ThinkingConfigAdaptiveParam}
# Fields of API version 2023-06-01, the one the wire speaks (aw.API_VERSION), that the SDK's 2.x
# types dropped with version 2026-10-21 (which refuses them): sent only when an agent sets them.
SAMPLING = {"temperature", "top_p"}
CHOICES: dict[str, type] = {
    "auto": ToolChoiceAutoParam,
    "any": ToolChoiceAnyParam,
    "tool": ToolChoiceToolParam,
    "none": ToolChoiceNoneParam,
}


def consumed(value: Any) -> Any:
    """A validated value with the SDK's lazy iterables (pydantic validates `Iterable[...]` items
    as they are read) read to their end, so every nested block is validated."""
    if isinstance(value, dict):
        return {k: consumed(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    return [consumed(v) for v in value]


def no_extra(value: dict[str, Any], typed: type, where: str, allowed: set[str] | None = None) -> None:
    extra = set(value) - set(get_type_hints(typed)) - (allowed or set())
    assert not extra, f"{where}: keys the SDK's {typed.__name__} lacks: {sorted(extra)}"
    if "cache_control" in value:
        no_extra(value["cache_control"], CacheControlEphemeralParam, f"{where}.cache_control")


# Kept for the whole module: a lazy iterable it returned must not outlive its adapter.
ADAPTERS = {
    False: TypeAdapter(MessageCreateParamsNonStreaming),
    True: TypeAdapter(MessageCreateParamsStreaming),
}


def assert_sdk_request(body: dict[str, Any]) -> None:
    """`body` validates as the SDK's request type, and no object in it has a key its type lacks."""
    top = MessageCreateParamsStreaming if body.get("stream") else MessageCreateParamsNonStreaming
    consumed(ADAPTERS[body.get("stream") is True].validate_python({k: v for k, v in body.items() if k not in SAMPLING}))
    no_extra(body, top, "body", SAMPLING)
    for i, message in enumerate(body["messages"]):
        no_extra(message, UserMessageParam if message["role"] == "user" else AssistantMessageParam, f"messages.{i}")
        for j, block in enumerate(message["content"]):
            no_extra(block, BLOCKS[block["type"]], f"messages.{i}.content.{j}")
    for i, block in enumerate(body["system"] if isinstance(body.get("system"), list) else []):
        no_extra(block, TextBlockParam, f"system.{i}")
    for i, tool in enumerate(body.get("tools", [])):
        no_extra(tool, ToolParam, f"tools.{i}")
    if "tool_choice" in body:
        no_extra(body["tool_choice"], CHOICES[body["tool_choice"]["type"]], "tool_choice")
    if "thinking" in body:
        no_extra(body["thinking"], THINKING_CONFIGS[body["thinking"]["type"]], "thinking")
    if "output_config" in body:
        no_extra(body["output_config"], OutputConfigParam, "output_config")


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
AGENTS = {
    "plain": WEATHER_AGENT,
    "uncached": WEATHER_AGENT.model_copy(update={"prompt_cache": "off"}),
    "hour": WEATHER_AGENT.model_copy(update={"prompt_cache": "1h"}),
    "settings": WEATHER_AGENT.model_copy(
        update={
            "settings": ModelSettings(
                temperature=0.2, top_p=0.9, max_output_tokens=300, stop=["END"], tool_choice="required"
            ),
            "handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
        }
    ),
    "thinking": WEATHER_AGENT.model_copy(update={"settings": ModelSettings(thinking_tokens=2048)}),
    "adaptive": WEATHER_AGENT.model_copy(update={"settings": ModelSettings(reasoning_effort="medium", top_p=0.97)}),
    "typed": WEATHER_AGENT.model_copy(update={"output_schema": SCHEMA, "output_name": "City"}),
    "list": AgentSpec(name="l", output_schema={"type": "array", "items": SCHEMA}, output_name="list[City]"),
    "named": WEATHER_AGENT.model_copy(
        update={"settings": ModelSettings(tool_choice="get_weather", parallel_tool_calls=False)}
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", list(AGENTS))
def test_every_request_the_runner_builds_is_the_sdks_request_type(name: str, stream: bool):
    for messages in ([UserMessage(content="Tokyo?")], TOOL_TURN):
        assert_sdk_request(aw.build_request(AGENTS[name], messages, "claude-sonnet-4-5", stream))


def test_only_the_sampling_settings_are_beyond_the_sdks_types_and_only_when_set():
    assert not SAMPLING & set(aw.build_request(WEATHER_AGENT, TOOL_TURN, "m", stream=False))
    sampled = aw.build_request(AGENTS["settings"], TOOL_TURN, "m", stream=False)
    assert SAMPLING <= set(sampled) and aw.API_VERSION == "2023-06-01"


def test_the_check_catches_a_key_the_sdk_lacks():
    body = aw.build_request(WEATHER_AGENT, TOOL_TURN, "m", stream=False)
    body["messages"][1]["content"][0]["signature_v2"] = "x"
    with pytest.raises(AssertionError, match="signature_v2"):
        assert_sdk_request(body)


# ------------------------------------------------------------------ the SDK's client on the fake


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def client(server: FakeLLMServer) -> Iterator[anthropic.Anthropic]:
    server.reset()
    with anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0, timeout=10) as sdk:
        yield sdk


TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}


def test_the_sdk_reads_a_message_with_thinking_and_tool_use(client: anthropic.Anthropic):
    asked: Any = [{"role": "user", "content": "Is it warmer in Tokyo or Paris?"}]
    message = client.messages.create(model="weather", max_tokens=4000, thinking=THINKING, tools=TOOLS, messages=asked)
    assert [b.type for b in message.content] == ["thinking", "tool_use", "tool_use"]
    assert message.stop_reason == "tool_use" and message.usage.input_tokens > 0
    calls = [b for b in message.content if b.type == "tool_use"]
    assert [c.input for c in calls] == [{"city": "Tokyo"}, {"city": "Paris"}]
    # The SDK's own blocks go back as they came: the fake checks the thinking block's signature.
    results: Any = [{"type": "tool_result", "tool_use_id": c.id, "content": '{"temperature_c": 20}'} for c in calls]
    then: Any = [*asked, {"role": "assistant", "content": message.content}, {"role": "user", "content": results}]
    second = client.messages.create(model="weather", max_tokens=4000, thinking=THINKING, tools=TOOLS, messages=then)
    assert second.content[0].type == "thinking"


def test_the_sdk_reads_a_stream_to_the_same_message(client: anthropic.Anthropic):
    asked: Any = [{"role": "user", "content": "Is it warmer in Tokyo or Paris?"}]
    plain = client.messages.create(model="weather", max_tokens=4000, thinking=THINKING, tools=TOOLS, messages=asked)
    texts: list[str] = []
    with client.messages.stream(
        model="weather", max_tokens=4000, thinking=THINKING, tools=TOOLS, messages=asked
    ) as stream:
        texts += [e.type for e in stream]
        final = stream.get_final_message()
    assert final.model_dump() == plain.model_dump()  # a retry, streamed or not, gets the same message
    assert "thinking" in texts and "input_json" in texts and "content_block_stop" in texts


def test_the_sdk_reads_text_streamed_through_pings(client: anthropic.Anthropic, server: FakeLLMServer):
    server.add_fault("keepalive", path="anthropic")
    asked: Any = [{"role": "user", "content": "hello"}]
    with client.messages.stream(model="echo", max_tokens=100, messages=asked) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "echo: hello" and final.content[0].type == "text" and final.stop_reason == "end_turn"


def test_the_sdk_reads_the_fakes_errors_as_anthropics(client: anthropic.Anthropic, server: FakeLLMServer):
    asked: Any = [{"role": "user", "content": "hello"}]
    server.add_fault("status", status=529, retry_after=1, path="anthropic")
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        client.messages.create(model="echo", max_tokens=100, messages=asked)
    assert overloaded.value.status_code == 529 and overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    server.add_fault("status", status=429, path="anthropic")
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model="echo", max_tokens=100, messages=asked)
    with pytest.raises(anthropic.BadRequestError, match="messages: at least one message is required"):
        client.messages.create(model="echo", max_tokens=100, messages=[])
    server.add_fault("error_event", path="anthropic", stream=True, message="Overloaded")
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        with client.messages.stream(model="echo", max_tokens=100, messages=asked) as stream:
            stream.get_final_message()


def test_the_sdk_reads_the_runners_typed_output_and_cache_usage(client: anthropic.Anthropic, server: FakeLLMServer):
    model = server.add_script("typed", [{"json": {"city": "Rome"}}])
    agent = WEATHER_AGENT.model_copy(
        update={"output_schema": SCHEMA, "output_name": "City", "instructions": "Weather. " * 2000}
    )
    messages: list[Message] = [UserMessage(content="Where?")]
    body = aw.build_request(agent, messages, model, stream=False)
    params: Any = {k: v for k, v in body.items() if k != "model"}
    first = client.messages.create(model=model, **params)
    again = client.messages.create(model=model, **params)
    output = next(b for b in first.content if b.type == "tool_use")
    assert output.name == aw.OUTPUT_TOOL and output.input == {"city": "Rome"}
    assert first.usage.cache_creation_input_tokens and again.usage.cache_read_input_tokens
    assert again.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    reply = aw.parse_response(json.loads(again.model_dump_json()), 0)
    assert json.loads(reply.message.content or "") == {"city": "Rome"}
    assert reply.usage.cached_tokens == again.usage.cache_read_input_tokens
