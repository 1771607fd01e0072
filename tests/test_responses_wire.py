"""Responses API mapping: pure tests, then whole conversations over HTTP against fake_llm."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from durable_agent_runner.activities import responses_wire as rw
from durable_agent_runner.activities import wire
from durable_agent_runner.machine import bounds
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    HandoffSpec,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

AGENT = AgentSpec(
    name="a",
    instructions="Be brief.",
    tools=[ToolSpec(name="get_weather", description="Weather.", parameters={"type": "object"})],
    temperature=0.2,
)


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


def sse(payload: dict[str, Any], *, multiline: bool = False) -> list[str]:
    """One event as the lines a client reads, with a blank line after it."""
    data = json.dumps(payload, indent=1 if multiline else None)
    return [f"event: {payload['type']}\n", *(f"data: {line}\n" for line in data.split("\n")), "\n"]


def response_body(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-x",
        "output": output,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 15,
        },
        **extra,
    }


def text_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": arguments}


def calls(reply: ModelReply) -> list[tuple[str, str, str]]:
    return [(c.call_id, c.name, c.arguments) for c in reply.message.tool_calls]


# ------------------------------------------------------------------------------ requests


def test_request_maps_a_whole_transcript_to_input_items():
    messages: list[Message] = [
        UserMessage(content="Weather in Tokyo and Paris?"),
        AssistantMessage(
            content="Let me look.",
            tool_calls=[
                ToolCall(call_id="c1", name="get_weather", arguments='{"city":"Tokyo"}'),
                ToolCall(call_id="c2", name="get_weather", arguments='{"city":"Paris"}'),
            ],
        ),
        ToolMessage(call_id="c1", name="get_weather", content='{"temp": 22}'),
        ToolMessage(call_id="c2", name="get_weather", content="error: down", is_error=True),
        AssistantMessage(content=None, tool_calls=[ToolCall(call_id="c3", name="get_weather")]),
        ToolMessage(call_id="c3", name="get_weather", content="{}"),
        AssistantMessage(content="Tokyo is 22°C."),
        UserMessage(content="Thanks"),
    ]
    body = rw.build_request(AGENT, messages, "gpt-x", stream=False)
    assert body["model"] == "gpt-x" and body["instructions"] == "Be brief." and body["temperature"] == 0.2
    assert body["store"] is False and "stream" not in body and "previous_response_id" not in body
    assert body["input"] == [
        {"role": "user", "content": "Weather in Tokyo and Paris?"},
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Tokyo"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp": 22}'},
        {"type": "function_call_output", "call_id": "c2", "output": "error: down"},
        # A tool-call-only turn sends no empty assistant message.
        {"type": "function_call", "call_id": "c3", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c3", "output": "{}"},
        {"role": "assistant", "content": "Tokyo is 22°C."},
        {"role": "user", "content": "Thanks"},
    ]
    assert rw.build_request(AGENT, messages, "m", stream=True)["stream"] is True


def test_tools_use_the_flat_responses_form_and_opt_out_of_strict_mode():
    (tool,) = rw.build_request(AGENT, [UserMessage(content="hi")], "m", stream=False)["tools"]
    # No nested "function" key; strict: false keeps optional parameters optional (OpenAI's
    # Responses API would otherwise normalize the schema into strict mode).
    assert tool == {
        "type": "function",
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {"type": "object"},
        "strict": False,
    }


def test_request_without_tools_instructions_or_temperature_omits_them():
    body = rw.build_request(AgentSpec(name="b"), [UserMessage(content="hi")], "m", stream=False)
    assert body == {"model": "m", "input": [{"role": "user", "content": "hi"}], "store": False}


# ------------------------------------------------------------------- settings, handoffs, output

HI: list[Message] = [UserMessage(content="hi")]


def with_settings(agent: AgentSpec = AGENT, **fields: Any) -> AgentSpec:
    return agent.model_copy(update={"settings": ModelSettings(**fields)})


def test_every_model_setting_goes_out_under_its_responses_name_and_seed_and_stop_do_not():
    agent = with_settings(
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=50,
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning_effort="minimal",
        seed=7,  # not a Responses parameter: OpenAI refuses unknown ones
        stop=["END"],  # likewise
    )
    body = rw.build_request(agent, HI, "m", stream=False)
    assert {k: v for k, v in body.items() if k not in ("model", "input", "tools", "instructions", "store")} == {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_output_tokens": 50,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "minimal"},
    }


@pytest.mark.parametrize(
    "choice, sent",
    [("auto", "auto"), ("none", "none"), ("get_weather", {"type": "function", "name": "get_weather"})],
)
def test_a_named_tool_choice_uses_the_flat_responses_form(choice: str, sent: object):
    assert rw.build_request(with_settings(tool_choice=choice), HI, "m", stream=False)["tool_choice"] == sent


def test_tool_settings_go_only_beside_tools_and_extra_body_carries_what_responses_lacks():
    agent = with_settings(AgentSpec(name="b"), tool_choice="auto", parallel_tool_calls=True, extra_body={"seed": 7})
    body = rw.build_request(agent, HI, "m", stream=True)
    assert body == {
        "model": "m",
        "input": [{"role": "user", "content": "hi"}],
        "store": False,
        "stream": True,
        "seed": 7,
    }


@pytest.mark.parametrize("key", ["input", "instructions", "store", "text", "previous_response_id", "stream", "tools"])
def test_extra_body_may_not_set_what_the_runner_owns(key: str):
    with pytest.raises(wire.BadSettings, match=key):
        rw.build_request(with_settings(extra_body={key: None}), HI, "m", stream=False)


def test_handoffs_are_flat_transfer_tools_and_typed_output_a_text_format():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    agent = AGENT.model_copy(
        update={
            "handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
            "output_schema": schema,
            "output_name": "Answer",
        }
    )
    body = rw.build_request(agent, HI, "m", stream=False)
    assert body["tools"][1] == {
        "type": "function",
        "name": "transfer_to_billing",
        "description": "Hand off to the billing agent to handle the request.",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    }
    # strict: false, as for tools: pydantic's schemas are not always strict-mode schemas
    assert body["text"] == {"format": {"type": "json_schema", "name": "Answer", "schema": schema, "strict": False}}


# ----------------------------------------------------------------------------- responses


def test_response_parses_text_calls_and_usage_and_skips_reasoning():
    body = response_body(
        [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            text_item("Checking "),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "now."}]},
            call_item("a", "f", '{"x":1}'),
            {"type": "function_call", "call_id": "a", "name": "g", "arguments": {"y": 2}},
            {"type": "function_call", "name": "h"},
        ]
    )
    reply = rw.parse_response(body, turn=3)
    assert reply.message.content == "Checking now."
    # The run's own ids, whatever the provider sent (a repeated one, none); theirs is kept aside.
    assert calls(reply) == [("call_3_0", "f", '{"x":1}'), ("call_3_1", "g", '{"y": 2}'), ("call_3_2", "h", "{}")]
    assert [c.provider_id for c in reply.message.tool_calls] == ["a", "a", ""]  # an object became JSON text
    assert (reply.finish_reason, reply.model, reply.response_id) == ("completed", "gpt-x", "resp_1")
    u = reply.usage
    assert (u.requests, u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (1, 10, 4, 5, 2)


def test_tool_call_only_reply_has_no_content_and_missing_usage_counts_the_request():
    reply = rw.parse_response({"output": [call_item("c", "f", "")]}, 1)
    assert reply.message.content is None and calls(reply) == [("call_1_0", "f", "{}")]
    assert reply.usage.requests == 1 and reply.usage.total_tokens == 0 and reply.finish_reason == "completed"


def test_incomplete_response_carries_its_reason_and_refusals_are_text():
    body = response_body(
        [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    reply = rw.parse_response(body, 1)
    assert reply.finish_reason == "length"  # cut short by the output limit: as Chat Completions says it
    assert reply.message.content == "I can't help with that."
    assert rw.parse_response({**body, "incomplete_details": None}, 1).finish_reason == "incomplete"
    filtered = {**body, "incomplete_details": {"reason": "content_filter"}}
    assert rw.parse_response(filtered, 1).finish_reason == "content_filter"
    other = {**body, "incomplete_details": {"reason": "something_new"}}
    assert rw.parse_response(other, 1).finish_reason == "incomplete:something_new"


@pytest.mark.parametrize(
    "body, detail",
    [
        ([], "not a JSON object"),
        ({"id": "r"}, "no output"),
        ({"output": {"type": "message"}}, "no output"),
        ({"output": ["text"]}, "output item is not a JSON object"),
        ({"output": [{"type": "function_call", "call_id": "c"}]}, "function call without a name"),
        (
            {"status": "failed", "output": [], "error": {"code": "server_error", "message": "boom"}},
            "server_error: boom",
        ),
        ({"status": "in_progress", "output": []}, "'in_progress'"),
    ],
)
def test_malformed_responses_are_named(body: object, detail: str):
    with pytest.raises(rw.MalformedResponse, match=detail):
        rw.parse_response(body, 1)


# -------------------------------------------------------------------------------- streams

CREATED = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "gpt-x", "output": []}


def stream_events(text: str, call: dict[str, Any], final: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A stream in OpenAI's order: a message in two deltas, then one function call."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": CREATED},
        {"type": "response.in_progress", "response": CREATED},
        {"type": "response.output_item.added", "output_index": 0, "item": {**text_item(""), "content": []}},
        {"type": "response.content_part.added", "output_index": 0, "content_index": 0, "part": {}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text[:3]},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text[3:]},
        {"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": text},
        {"type": "response.output_item.done", "output_index": 0, "item": text_item(text)},
        {"type": "response.output_item.added", "output_index": 1, "item": {**call, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": call["arguments"][:4]},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": call["arguments"][4:]},
        {"type": "response.function_call_arguments.done", "output_index": 1, "arguments": call["arguments"]},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
    ]
    if final is not None:
        events.append({"type": "response.completed", "response": final})
    return events


def render(events: list[dict[str, Any]], *, noisy: bool = False) -> list[str]:
    out: list[str] = []
    for i, event in enumerate(events):
        if noisy:
            out += [": keep-alive\n", "\n"]
        out += sse(event, multiline=noisy and i % 2 == 1)
    return out


async def test_stream_equals_the_plain_response_and_reports_text_deltas():
    call = call_item("t1", "f", '{"city":"Oslo"}')
    final = response_body([text_item("Hello"), call])
    seen: list[str] = []
    reply = await rw.parse_stream(
        lines(*render(stream_events("Hello", call, final), noisy=True)), 1, on_delta=seen.append
    )
    assert reply == rw.parse_response(final, 1)
    assert reply.message.content == "Hello" and calls(reply) == [("call_1_0", "f", '{"city":"Oslo"}')]
    assert reply.message.tool_calls[0].provider_id == "t1"
    assert seen == ["Hel", "lo"]


async def test_stream_whose_terminal_event_lists_no_output_is_rebuilt_from_its_deltas():
    # Some compatible servers send response.completed with usage but without the output items.
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": CREATED},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hi "},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "there"},
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "name": "f"}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"},
        {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 3}}},
    ]
    reply = await rw.parse_stream(lines(*render(events)), 2)
    assert reply.message.content == "Hi there" and calls(reply) == [("call_2_0", "f", '{"a":1}')]
    assert (reply.response_id, reply.model, reply.usage.input_tokens) == ("resp_1", "gpt-x", 3)


async def test_stream_ending_incomplete_is_an_answer_with_its_reason():
    final = response_body([text_item("Trunc")], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    events = stream_events("Trunc", call_item("c", "f", "{}"), None)[:8]
    reply = await rw.parse_stream(lines(*render([*events, {"type": "response.incomplete", "response": final}])), 1)
    assert reply.message.content == "Trunc" and reply.finish_reason == "length"


async def test_a_stream_ending_incomplete_is_truncated_whatever_status_its_events_carried():
    """The terminal event says how the response ended: a `response.incomplete` that carries no
    response, or one still marked in_progress, is a truncated answer, not a malformed one."""
    events = stream_events("Trunc", call_item("c", "f", "{}"), None)[:8]
    bare = await rw.parse_stream(lines(*render([*events, {"type": "response.incomplete"}])), 1)
    assert bare.message.content == "Trunc" and bare.finish_reason == "incomplete"
    cut = {"reason": "max_output_tokens"}
    stale = response_body([text_item("Trunc")], status="in_progress", incomplete_details=cut)
    final = {"type": "response.incomplete", "response": stale}
    assert (await rw.parse_stream(lines(*render([*events, final])), 1)).finish_reason == "length"


async def test_an_argument_delta_for_a_call_already_done_is_malformed():
    events = [*stream_events("Hi", call_item("c", "f", '{"a":1}'), None), {"type": "response.completed"}]
    at = next(i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.done")
    late = {**events[at], "type": "response.function_call_arguments.delta", "delta": ', "b": 2}'}
    assert (await rw.parse_stream(lines(*render(events)), 1)).message.tool_calls[0].arguments == '{"a":1}'
    with pytest.raises(rw.MalformedResponse, match="after it was done"):
        await rw.parse_stream(lines(*render([*events[: at + 1], late, *events[at + 1 :]])), 1)


async def test_a_stream_assembling_more_than_the_limit_is_malformed():
    call = call_item("t1", "f", '{"city":"Oslo"}')
    events = stream_events("Hello", call, response_body([text_item("Hello"), call]))
    assert (await rw.parse_stream(lines(*render(events)), 1, limit=20)).message.content == "Hello"
    with pytest.raises(rw.MalformedResponse, match="reply longer than 19 characters"):
        await rw.parse_stream(lines(*render(events)), 1, limit=19)  # 5 of text and 15 of arguments


async def test_stream_cut_before_completed_is_never_an_answer():
    events = stream_events("Hello", call_item("c", "f", '{"x":1}'), None)
    with pytest.raises(rw.StreamFailed, match=r"before response\.completed"):
        await rw.parse_stream(lines(*render(events)), 1)
    with pytest.raises(rw.StreamFailed):  # "[DONE]" is not a Responses terminal event
        await rw.parse_stream(lines(*render(events[:5]), "data: [DONE]\n", "\n"), 1)


async def test_stream_error_event_fails_the_call():
    events = [
        *stream_events("Hello", call_item("c", "f", "{}"), None)[:5],
        {"type": "error", "code": "server_error", "message": "overloaded", "param": None},
    ]
    with pytest.raises(rw.StreamFailed, match="server_error: overloaded"):
        await rw.parse_stream(lines(*render(events)), 1)


async def test_stream_response_failed_fails_the_call():
    failed = {**CREATED, "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}
    events = [{"type": "response.created", "response": CREATED}, {"type": "response.failed", "response": failed}]
    with pytest.raises(rw.StreamFailed, match="rate_limit_exceeded: slow down"):
        await rw.parse_stream(lines(*render(events)), 1)


async def test_stream_with_broken_json_is_malformed():
    with pytest.raises(rw.MalformedResponse, match="not JSON"):
        await rw.parse_stream(lines("event: response.output_text.delta\n", 'data: {"type": "resp\n', "\n"), 1)


# ------------------------------------------------------------- over HTTP, against fake_llm

WEATHER_AGENT = AgentSpec(
    name="weather",
    instructions="Answer weather questions with the tools.",
    tools=[
        ToolSpec(
            name="get_weather",
            description="Current weather in a city.",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        ),
        ToolSpec(
            name="convert_temperature",
            description="Celsius to another unit.",
            parameters={
                "type": "object",
                "properties": {"celsius": {"type": "number"}, "unit": {"type": "string"}},
                "required": ["celsius"],
            },
        ),
    ],
)
WEATHER = {"Tokyo": ("sunny", 22.0), "Paris": ("cloudy", 15.0)}


def run_tool(call: ToolCall) -> str:
    args = json.loads(call.arguments)
    if call.name == "get_weather":
        condition, temp = WEATHER[args["city"]]
        return json.dumps({"city": args["city"], "condition": condition, "temperature_c": temp})
    return json.dumps({"value": args["celsius"] * 9 / 5 + 32, "unit": args["unit"]})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def srv(server: FakeLLMServer) -> FakeLLMServer:
    server.reset()
    return server


async def call(srv: FakeLLMServer, agent: AgentSpec, messages: list[Message], model: str, stream: bool, turn: int):
    body = rw.build_request(agent, messages, model, stream)
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as http:
        if not stream:
            response = await http.post("/responses", json=body)
            assert response.status_code == 200, response.text
            return rw.parse_response(response.json(), turn)
        async with http.stream("POST", "/responses", json=body) as response:
            assert response.status_code == 200
            return await rw.parse_stream(response.aiter_lines(), turn)


async def weather_conversation(srv: FakeLLMServer, stream: bool) -> list[ModelReply]:
    messages: list[Message] = [UserMessage(content="Is it warmer in Tokyo or Paris?")]
    replies: list[ModelReply] = []
    for turn in range(3):
        reply = await call(srv, WEATHER_AGENT, messages, "weather", stream, turn)
        replies.append(reply)
        messages.append(reply.message)
        messages += [ToolMessage(call_id=c.call_id, name=c.name, content=run_tool(c)) for c in reply.message.tool_calls]
    return replies


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_weather_conversation_turn_by_turn(srv: FakeLLMServer, stream: bool):
    first, second, last = await weather_conversation(srv, stream)
    assert first.message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in first.message.tool_calls] == [
        ("get_weather", {"city": "Tokyo"}),
        ("get_weather", {"city": "Paris"}),
    ]
    assert [(c.name, json.loads(c.arguments)) for c in second.message.tool_calls] == [
        ("convert_temperature", {"celsius": 22.0, "unit": "fahrenheit"})
    ]
    assert last.message.tool_calls == [] and last.finish_reason == "completed"
    assert last.message.content == "Tokyo: sunny, 22.0°C. Paris: cloudy, 15.0°C. Tokyo is warmer at 71.6°F."
    for reply in (first, second, last):
        assert reply.usage.requests == 1 and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
        assert reply.model == "weather" and (reply.response_id or "").startswith("resp_")
    # The server saw the transcript as Responses items, with state kept by us.
    sent = [r["body"] for r in srv.requests()]
    assert all(b["store"] is False and "previous_response_id" not in b for b in sent)
    assert [item.get("type", "message") for item in sent[2]["input"]] == [
        "message",
        *["function_call"] * 2,
        *["function_call_output"] * 2,
        "function_call",
        "function_call_output",
    ]


async def test_weather_conversation_is_the_same_streamed_or_not(srv: FakeLLMServer):
    assert await weather_conversation(srv, stream=True) == await weather_conversation(srv, stream=False)


async def test_keepalives_and_multiline_events_over_http_change_nothing(srv: FakeLLMServer):
    messages: list[Message] = [UserMessage(content="Tokyo?")]
    plain = await call(srv, WEATHER_AGENT, messages, "echo", False, 0)
    srv.add_faults([{"kind": "keepalive", "path": "responses"}])
    noisy = await call(srv, WEATHER_AGENT, messages, "echo", True, 0)
    assert noisy == plain and plain.message.content == "echo: Tokyo?"
    assert srv.requests()[-1]["fault"]["kind"] == "keepalive"


async def test_faults_over_http_never_give_a_half_answer(srv: FakeLLMServer):
    messages: list[Message] = [UserMessage(content="Tokyo and Paris?")]
    srv.add_faults([{"kind": "error_event", "path": "responses", "stream": True, "code": "server_error"}])
    with pytest.raises(rw.StreamFailed, match="server_error"):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    srv.add_faults([{"kind": "malformed", "path": "responses", "stream": True}])
    with pytest.raises(rw.MalformedResponse):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    # A dropped connection surfaces as a transport error (incomplete chunked body) or as a
    # stream that ends before response.completed; either way there is no reply.
    srv.add_faults([{"kind": "cut", "path": "responses", "stream": True, "after_events": 4}])
    with pytest.raises((rw.StreamFailed, httpx.TransportError)):
        await call(srv, WEATHER_AGENT, messages, "weather", True, 0)
    assert srv.pending_faults() == []


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_settings_handoffs_and_typed_output_over_http(srv: FakeLLMServer, stream: bool):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    model = srv.add_script("typed", [{"json": {"city": "Rome"}}])
    agent = WEATHER_AGENT.model_copy(
        update={
            "settings": ModelSettings(max_output_tokens=64, tool_choice="auto", reasoning_effort="low"),
            "handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
            "output_schema": schema,
            "output_name": "City",
        }
    )
    reply = await call(srv, agent, [UserMessage(content="Where?")], model, stream, 0)
    assert json.loads(reply.message.content or "") == {"city": "Rome"}
    body = srv.requests()[-1]["body"]
    assert body["text"]["format"]["name"] == "City" and body["reasoning"] == {"effort": "low"}
    assert [t["name"] for t in body["tools"]] == ["get_weather", "convert_temperature", "transfer_to_billing"]


async def test_scripted_reply_with_usage_details_over_http(srv: FakeLLMServer):
    model = srv.add_script(
        "rw",
        [
            {
                "content": "Done.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
                "usage": {"input_tokens": 2000, "output_tokens": 9, "cached_tokens": 1024, "reasoning_tokens": 3},
            }
        ],
    )
    messages: list[Message] = [UserMessage(content="go")]
    for stream in (False, True):
        reply = await call(srv, WEATHER_AGENT, messages, model, stream, 0)
        assert reply.message.content == "Done." and calls(reply) == [("call_0_0", "get_weather", '{"city": "Rome"}')]
        u = reply.usage
        assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (2000, 1024, 9, 3)


@pytest.mark.parametrize(
    "arguments, why",
    [("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"), ('{"n": ' + "7" * 5000 + "}", "a number longer")],
)
async def test_arguments_past_the_bounds_are_replaced_by_why_streamed_or_not(arguments, why):
    call = call_item("c", "f", arguments)
    plain = rw.parse_response(response_body([call]), 1).message.tool_calls[0].arguments
    final = {"type": "response.completed"}  # no output listed: the deltas are assembled
    events = [e for e in stream_events("Hi", call, None) if not e["type"].endswith(".done") or e["output_index"] == 0]
    streamed = (await rw.parse_stream(lines(*render([*events, final])), 1)).message.tool_calls[0].arguments
    assert plain == streamed and plain.startswith(bounds.REFUSED) and why in plain
