"""fake_llm's Anthropic side over HTTP: it refuses what the real API refuses, in its shape; it
signs thinking and refuses it changed or missing on a tool-use continuation; it counts the
prompt cache from the prefixes requests marked; faults bend its streams as Anthropic's would."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.activities import anthropic_wire as aw
from durable_agent_runner.activities import wire
from durable_agent_runner.redact import Redactor
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.testing.fake_llm.anthropic import REDACTED_TRIGGER, as_chat, parse, sign
from durable_agent_runner.testing.fake_llm.hostile import CASES
from durable_agent_runner.testing.fake_llm.prompt_cache import MIN_CHARS, Prefixes, PromptCache
from durable_agent_runner.testing.request import AgentIndex, request_of
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelReply,
    ModelSettings,
    Thinking,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.test_responses_wire import WEATHER_AGENT, run_tool

KEY = "sk-ant-fake-0123456789abcdef"
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": KEY}
OK = {"model": "weather", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
TOOL = {"name": "get_weather", "input_schema": {"type": "object"}}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def srv(server: FakeLLMServer) -> FakeLLMServer:
    server.reset()
    return server


def post(srv: FakeLLMServer, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{srv.url}/v1/messages", json=body, headers=HEADERS if headers is None else headers, timeout=10)


async def call(
    srv: FakeLLMServer, agent: AgentSpec, messages: list[Message], model: str, stream: bool, turn: int
) -> ModelReply:
    body = aw.build_request(agent, messages, model, stream)
    async with httpx.AsyncClient(base_url=srv.url, timeout=10, headers=HEADERS) as http:
        if not stream:
            response = await http.post("/v1/messages", json=body)
            assert response.status_code == 200, response.text
            return aw.parse_response(response.json(), turn)
        async with http.stream("POST", "/v1/messages", json=body) as response:
            assert response.status_code == 200, await response.aread()
            return await aw.parse_stream(response.aiter_lines(), turn)


def without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "22"}]}
MARK = {"type": "ephemeral"}
REFUSALS = [
    (without(OK, "model"), "model: Field required"),
    (without(OK, "max_tokens"), "max_tokens: Field required"),
    (without(OK, "messages"), "messages: Field required"),
    ({**OK, "messages": []}, "messages: at least one message is required"),
    ({**OK, "max_tokenz": 5}, "max_tokenz: Extra inputs are not permitted"),
    ({**OK, "messages": [{"role": "assistant", "content": "x"}]}, 'first message must use the "user" role'),
    ({**OK, "messages": [user("a"), user("b")]}, 'found multiple "user" roles in a row'),
    ({**OK, "messages": [user("a"), {"role": "system", "content": "x"}]}, "messages.1.role"),
    ({**OK, "messages": [user("")]}, "text content blocks must be non-empty"),
    ({**OK, "stop_sequences": ["END", ""]}, "each stop sequence must be non-empty"),
    ({**OK, "stop_sequences": ["\n"]}, "each stop sequence must contain non-whitespace"),
    (
        {**OK, "tools": [TOOL], "messages": [user("a"), {"role": "assistant", "content": "b"}, RESULT]},
        "unexpected `tool_use_id` found in `tool_result`",
    ),
    (
        {**OK, "tools": [TOOL], "messages": [user("a"), USE, user("b")]},
        "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
    ),
    (
        {
            **OK,
            "system": [{"type": "text", "text": "s", "cache_control": MARK}],
            "tools": [{**TOOL, "cache_control": MARK}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": t, "cache_control": MARK} for t in "abc"]}
            ],
        },
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    ({**OK, "tools": [{"name": "bad name", "input_schema": {"type": "object"}}]}, "tools.0.custom.name"),
    (
        {**OK, "tools": [{"name": "f", "input_schema": {"type": "array"}}]},
        "input_schema.type: Input should be 'object'",
    ),
    ({**OK, "thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
    ({**OK, "thinking": {"type": "enabled", "budget_tokens": 2000}}, "`max_tokens` must be greater than"),
    (
        {**OK, "max_tokens": 4000, "temperature": 0.5, "thinking": {"type": "enabled", "budget_tokens": 2000}},
        "`temperature` may only be set to 1 when thinking is enabled",
    ),
    (
        {
            **OK,
            "max_tokens": 4000,
            "tools": [TOOL],
            "tool_choice": {"type": "any"},
            "thinking": {"type": "enabled", "budget_tokens": 2000},
        },
        "Thinking may not be enabled when tool_choice forces tool use.",
    ),
]


@pytest.mark.parametrize("body, message", REFUSALS)
def test_the_fake_refuses_what_the_api_refuses_in_its_shape(srv: FakeLLMServer, body: dict[str, Any], message: str):
    response = post(srv, body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert message in error["error"]["message"]


def test_the_version_header_is_required(srv: FakeLLMServer):
    response = post(srv, OK, headers={"x-api-key": KEY})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "anthropic-version: header is required"
    assert post(srv, OK).status_code == 200


# ------------------------------------------------------------------------------------ thinking

THINKING_AGENT = WEATHER_AGENT.model_copy(update={"settings": ModelSettings(thinking_tokens=2000)})


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_thinking_run_with_two_tool_turns_sends_its_signed_thinking_back(srv: FakeLLMServer, stream: bool):
    messages: list[Message] = [UserMessage(content="Is it warmer in Tokyo or Paris?")]
    for turn in range(3):
        reply = await call(srv, THINKING_AGENT, messages, "weather", stream, turn)
        assert [t.kind for t in reply.message.thinking] == ["thinking"]
        assert "Tokyo or Paris" not in (reply.message.content or "")  # thinking is never the answer
        messages.append(reply.message)
        messages += [ToolMessage(call_id=c.call_id, name=c.name, content=run_tool(c)) for c in reply.message.tool_calls]
    assert "Tokyo is warmer" in (reply.message.content or "")
    last = srv.requests()[-1]["body"]
    assert last["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert [m["content"][0]["type"] for m in last["messages"] if m["role"] == "assistant"] == ["thinking"] * 2


def continuation(srv: FakeLLMServer, redacted: bool = False) -> dict[str, Any]:
    """A request continuing a tool turn, its thinking block as the fake sent it."""
    text = f"Weather in Tokyo? {REDACTED_TRIGGER if redacted else ''}"
    first = {
        "model": "weather",
        "max_tokens": 4000,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [user(text)],
    }
    reply = post(srv, first).json()
    assert reply["content"][0]["type"] == ("redacted_thinking" if redacted else "thinking")
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "22"}
        for b in reply["content"]
        if b["type"] == "tool_use"
    ]
    assistant = {"role": "assistant", "content": reply["content"]}
    return {**first, "messages": [user(text), assistant, {"role": "user", "content": results}]}


def test_thinking_changed_or_missing_is_refused_as_the_api_refuses_it(srv: FakeLLMServer):
    body = continuation(srv)
    assert post(srv, body).status_code == 200
    changed = copy.deepcopy(body)
    changed["messages"][1]["content"][0]["thinking"] += " (edited)"
    response = post(srv, changed)
    assert response.status_code == 400 and "Invalid `signature` in `thinking` block" in response.text
    missing = copy.deepcopy(body)
    missing["messages"][1]["content"].pop(0)
    response = post(srv, missing)
    assert response.status_code == 400
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in response.json()["error"]["message"]
    assert post(srv, without(missing, "thinking")).status_code == 200  # without thinking, none is needed


def test_redacted_thinking_round_trips_and_refuses_changed_data(srv: FakeLLMServer):
    body = continuation(srv, redacted=True)
    assert post(srv, body).status_code == 200
    body["messages"][1]["content"][0]["data"] += "x"
    assert "Invalid `data` in `redacted_thinking` block" in post(srv, body).text


async def test_a_scripts_thinking_text_is_the_signed_block(srv: FakeLLMServer):
    model = srv.add_script("think", [{"content": "Done.", "thinking": "Short and sweet."}])
    agent = AgentSpec(name="t", settings=ModelSettings(thinking_tokens=1024))
    for stream in (False, True):
        reply = await call(srv, agent, [UserMessage(content="go")], model, stream, 0)
        assert reply.message.content == "Done."
        assert [(t.text, bool(t.signature)) for t in reply.message.thinking] == [("Short and sweet.", True)]
        assert reply.usage.reasoning_tokens > 0
    plain = await call(srv, AgentSpec(name="t"), [UserMessage(content="go")], model, False, 0)
    assert plain.message.thinking == []  # no thinking asked for, none shown


# ------------------------------------------------------------------------------ prompt caching

BIG_AGENT = WEATHER_AGENT.model_copy(update={"instructions": "Know the weather. " * 2200})  # ~10,000 tokens
LOOP = [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]}]


async def twenty_turns(srv: FakeLLMServer, agent: AgentSpec, stream: bool = False) -> list[ModelReply]:
    model = srv.add_script("loop", LOOP)
    messages: list[Message] = [UserMessage(content="Watch Tokyo's weather.")]
    replies = []
    for turn in range(20):
        reply = await call(srv, agent, messages, model, stream, turn)
        replies.append(reply)
        messages.append(reply.message)
        messages += [ToolMessage(call_id=c.call_id, name=c.name, content=run_tool(c)) for c in reply.message.tool_calls]
    return replies


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_twenty_turn_run_reads_most_of_its_input_from_the_cache(srv: FakeLLMServer, stream: bool):
    replies = await twenty_turns(srv, BIG_AGENT, stream)
    first = replies[0].usage
    assert first.cached_tokens == 0 and first.cache_write_tokens > 9000  # the system prompt and tools, written
    for reply in replies[1:]:
        u = reply.usage
        assert u.cached_tokens >= 0.9 * u.input_tokens, u
        assert u.cached_tokens + u.cache_write_tokens <= u.input_tokens
    reads = sum(r.usage.cached_tokens for r in replies[1:])
    assert reads >= 0.95 * sum(r.usage.input_tokens for r in replies[1:])


async def test_without_cache_control_nothing_is_cached_and_caching_costs_under_a_third(srv: FakeLLMServer):
    uncached = await twenty_turns(srv, BIG_AGENT.model_copy(update={"prompt_cache": "off"}))
    assert all(r.usage.cached_tokens == r.usage.cache_write_tokens == 0 for r in uncached)
    srv.reset()
    cached = await twenty_turns(srv, BIG_AGENT)

    def input_cost(replies: list[ModelReply]) -> float:
        """In base input prices: Anthropic bills a 5-minute cache write 1.25x, a read 0.1x."""
        return sum(
            (u.input_tokens - u.cached_tokens - u.cache_write_tokens)
            + 1.25 * u.cache_write_tokens
            + 0.1 * u.cached_tokens
            for u in (r.usage for r in replies)
        )

    assert input_cost(cached) <= 0.3 * input_cost(uncached)


async def test_a_short_prefix_is_not_cached_and_a_one_hour_write_says_so(srv: FakeLLMServer):
    short = await call(srv, WEATHER_AGENT, [UserMessage(content="Tokyo?")], "weather", False, 0)
    assert short.usage.cache_write_tokens == 0  # under 1,024 tokens: the API caches nothing
    hour = BIG_AGENT.model_copy(update={"prompt_cache": "1h"})
    post_body = aw.build_request(hour, [UserMessage(content="Tokyo?")], "weather", stream=False)
    usage = post(srv, post_body).json()["usage"]
    assert usage["cache_creation"]["ephemeral_1h_input_tokens"] == usage["cache_creation_input_tokens"] > 9000
    again = post(srv, post_body).json()["usage"]
    assert again["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] and again["input_tokens"] < 100


# ------------------------------------------------------------------------------------- faults


def test_a_529_is_an_overloaded_error_with_its_retry_after(srv: FakeLLMServer):
    srv.add_fault("status", status=529, retry_after=2, path="anthropic")
    response = post(srv, OK)
    assert response.status_code == 529 and response.headers["retry-after"] == "2"
    assert response.json()["error"]["type"] == "overloaded_error"
    srv.add_fault("status", status=429, path="anthropic")
    assert post(srv, OK).json()["error"]["type"] == "rate_limit_error"
    srv.add_fault("error_event", stream=False, path="anthropic")
    assert post(srv, OK).json() == {
        "type": "error",
        "error": {"type": "api_error", "message": "The server had an error while processing your request."},
    }


def test_an_echoed_key_lands_in_the_error_body(srv: FakeLLMServer):
    srv.add_fault("status", status=401, echo_key=True, path="anthropic")
    error = post(srv, OK).json()["error"]
    assert error["type"] == "authentication_error" and KEY in error["message"]


async def test_stream_faults_never_give_a_half_answer(srv: FakeLLMServer):
    messages: list[Message] = [UserMessage(content="Tokyo and Paris?")]
    srv.add_fault("error_event", path="anthropic", stream=True, message="Overloaded")
    with pytest.raises(wire.StreamFailed, match="overloaded_error: Overloaded"):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    srv.add_fault("malformed", path="anthropic", stream=True)
    with pytest.raises(wire.MalformedResponse):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    srv.add_fault("cut", path="anthropic", stream=True, after_events=4)
    with pytest.raises((wire.StreamFailed, httpx.TransportError)):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    assert srv.pending_faults() == []


async def test_a_stalled_stream_is_no_answer(srv: FakeLLMServer):
    srv.add_fault("stall", path="anthropic", stream=True, after_events=5, ms=300)
    body = aw.build_request(WEATHER_AGENT, [UserMessage(content="Tokyo?")], "weather", stream=True)
    async with httpx.AsyncClient(base_url=srv.url, timeout=5, headers=HEADERS) as http:
        with pytest.raises((wire.StreamFailed, httpx.TransportError)):
            async with http.stream("POST", "/v1/messages", json=body) as response:
                await aw.parse_stream(response.aiter_lines(), 0)


async def test_keepalive_is_ping_events_and_changes_nothing(srv: FakeLLMServer):
    messages: list[Message] = [UserMessage(content="Tokyo?")]
    plain = await call(srv, WEATHER_AGENT, messages, "echo", False, 0)
    srv.add_fault("keepalive", path="anthropic")
    body = aw.build_request(WEATHER_AGENT, messages, "echo", stream=True)
    raw = httpx.post(f"{srv.url}/v1/messages", json=body, headers=HEADERS, timeout=10).text
    assert raw.count("event: ping") > 5
    srv.add_fault("keepalive", path="anthropic")
    assert await call(srv, WEATHER_AGENT, messages, "echo", True, 0) == plain


# ---------------------------------------------------------------------- typed output and the kit

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_typed_output_goes_through_the_output_tool(srv: FakeLLMServer, stream: bool):
    model = srv.add_script("typed", [{"json": {"city": "Rome"}}])
    agent = WEATHER_AGENT.model_copy(update={"output_schema": SCHEMA, "output_name": "City"})
    reply = await call(srv, agent, [UserMessage(content="Where?")], model, stream, 0)
    assert json.loads(reply.message.content or "") == {"city": "Rome"} and reply.message.tool_calls == []
    assert reply.finish_reason == "stop"
    sent = srv.requests()[-1]["body"]
    assert sent["tool_choice"] == {"type": "any"}


def test_the_testing_kit_reads_an_anthropic_request_as_chat():
    agent = WEATHER_AGENT.model_copy(update={"output_schema": SCHEMA, "output_name": "City", "prompt_cache": "1h"})
    messages: list[Message] = [UserMessage(content="Tokyo?")]
    body = aw.build_request(agent, messages, "m", stream=True)
    chat = as_chat(body)
    assert chat["messages"] == [
        {"role": "system", "content": WEATHER_AGENT.instructions},
        {"role": "user", "content": "Tokyo?"},
    ]
    assert [t["function"]["name"] for t in chat["tools"]] == ["get_weather", "convert_temperature"]
    assert chat["response_format"]["json_schema"]["schema"] == SCHEMA and chat["stream"] is True
    conv = parse(body)
    request = request_of(conv, AgentIndex())
    assert request.tools == ("get_weather", "convert_temperature") and request.output_schema == SCHEMA
    assert request.instructions == WEATHER_AGENT.instructions and request.prompt == "Tokyo?"


def test_tool_results_reach_the_kit_with_the_call_they_answer():
    agent = AgentSpec(name="t", tools=[ToolSpec(name="get_weather")])
    messages: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=[ToolCall(call_id="c1", name="get_weather", arguments='{"city": "Oslo"}')]),
        ToolMessage(call_id="c1", name="get_weather", content="cold"),
    ]
    conv = parse(aw.build_request(agent, messages, "m", stream=False))
    assert conv.turn == 1 and conv.turn_since_user == 1 and conv.tool_names == ("get_weather",)
    assert [(r.call_id, r.name, json.loads(r.arguments), r.output) for r in conv.results_since_user] == [
        ("c1", "get_weather", {"city": "Oslo"}, "cold")
    ]
    request = request_of(conv, AgentIndex())
    assert request.result_of("get_weather") == "cold" and request.call_of("c1") is not None


# --------------------------------------------------------------------------------- hostile mode


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("case", CASES)
async def test_a_hostile_anthropic_server_gives_a_clean_reply_or_a_named_failure(
    srv: FakeLLMServer, case: str, stream: bool
):
    body = aw.build_request(WEATHER_AGENT, [UserMessage(content="Weather in Tokyo?")], f"hostile:{case}", stream)
    mask = Redactor(KEY).text
    async with httpx.AsyncClient(base_url=srv.url, timeout=10, headers=HEADERS) as http:
        try:
            if stream:
                async with http.stream("POST", "/v1/messages", json=body) as response:
                    reply = await aw.parse_stream(response.aiter_lines(), 1, mask=mask, limit=1_000_000)
            else:
                response = await http.post("/v1/messages", json=body)
                reply = aw.parse_response(wire.parse_body(response.text, mask=mask), 1, mask=mask)
        except (wire.MalformedResponse, wire.StreamFailed):
            return
    assert KEY not in reply.model_dump_json() and KEY[:12] not in reply.model_dump_json()
    assert all(c.call_id.startswith("call_1_") for c in reply.message.tool_calls)
    assert all(len(c.provider_id) <= wire.MAX_PROVIDER_ID for c in reply.message.tool_calls)
    assert 0 <= reply.usage.input_tokens <= 3 * wire.MAX_COUNT


def test_version_2026_10_21_refuses_sampling_fields_as_the_api_does(srv: FakeLLMServer):
    sampled = {**OK, "temperature": 1.0}
    assert post(srv, sampled).status_code == 200  # 2023-06-01, the wire's version (aw.API_VERSION)
    newer = {**HEADERS, "anthropic-version": "2026-10-21"}
    response = post(srv, sampled, headers=newer)
    assert (
        response.status_code == 400
        and response.json()["error"]["message"] == "temperature: Extra inputs are not permitted"
    )
    assert post(srv, OK, headers=newer).status_code == 200


def test_a_bearer_key_is_the_key_a_hostile_server_echoes(srv: FakeLLMServer):
    srv.add_fault("status", status=401, echo_key=True, path="anthropic")
    bearer = {"anthropic-version": "2026-10-21", "authorization": f"Bearer {KEY}"}
    assert KEY in post(srv, OK, headers=bearer).json()["error"]["message"]


def test_the_prompt_cache_reads_only_up_to_a_requests_own_marks_within_their_ttl():
    chars = [5000 * (i + 1) for i in range(4)]
    ends = tuple((f"d{i}", c) for i, c in enumerate(chars))
    cache = PromptCache(max_entries=2)
    assert cache.account(Prefixes(ends, ((1, 300.0),)), now=0) == (0, 10000)  # written up to its mark
    assert cache.account(Prefixes(ends), now=1) == (0, 0)  # marks nothing: reads nothing
    assert cache.account(Prefixes(ends, ((3, 300.0),)), now=2) == (10000, 10000)
    assert cache.account(Prefixes(ends, ((0, 300.0),)), now=3) == (0, 5000)  # d1 lies past its mark
    assert cache.account(Prefixes(ends, ((2, 300.0),)), now=1000) == (0, 15000)  # expired
    assert cache.account(Prefixes(ends[:1], ((0, 300.0),)), now=1001) == (0, 5000)  # d0 expired: written again
    assert cache.account(Prefixes(ends, ((3, 300.0),)), now=1002) == (15000, 5000)  # d3 was evicted (2 kept)
    small = ((("s", MIN_CHARS - 1),), ((0, 300.0),))
    assert cache.account(Prefixes(*small), now=1003) == (0, 0)  # too short to cache


_turn = st.tuples(
    st.text(alphabet="ab ", max_size=3),  # the user's text ("" or blank: none)
    st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans(), st.booleans()), max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(turns=st.lists(_turn, min_size=1, max_size=5), thinking=st.booleans(), typed=st.booleans())
def test_every_transcript_the_workflow_writes_is_a_request_the_fake_accepts(turns, thinking, typed):
    """Whatever the shape of the run (parallel calls, steering messages beside results, signed
    thinking, answers without text), the wire's request passes the fake's checks of the API."""
    messages: list[Message] = []
    for text, steps in turns:
        messages.append(UserMessage(content=text or "go"))
        for n, with_text, steer, thought in steps:
            calls = [ToolCall(call_id=f"c{len(messages)}_{i}", name="get_weather", arguments="{}") for i in range(n)]
            block = [Thinking(provider="anthropic", text="hm", signature=sign("hm"))] if thought or thinking else []
            messages.append(AssistantMessage(content="ok" if with_text else None, tool_calls=calls, thinking=block))
            results: list[Message] = [ToolMessage(call_id=c.call_id, name=c.name, content="r") for c in calls]
            messages += [*results[:1], UserMessage(content="also"), *results[1:]] if steer else results
    agent = WEATHER_AGENT.model_copy(
        update={
            "settings": ModelSettings(thinking_tokens=1024) if thinking else ModelSettings(),
            "output_schema": SCHEMA if typed else None,
        }
    )
    body = aw.build_request(agent, messages, "m", stream=False)
    conv = parse(body)
    assert conv.turn == sum(1 for m in body["messages"] if m["role"] == "assistant")
