"""Chat Completions mapping, SSE framing and error classification: pure, no server."""

import json
from datetime import timedelta

import httpx
import pytest

from durable_agent_runner.activities import chat_wire, errors, wire
from durable_agent_runner.activities.sse import LineTooLong, iter_events, iter_lines
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine import bounds
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    AgentSpec,
    AssistantMessage,
    HandoffSpec,
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


async def lines(*items: str):
    for item in items:
        yield item


def test_request_maps_the_transcript_to_chat_messages():
    messages = [
        UserMessage(content="Weather in Tokyo?"),
        AssistantMessage(
            content=None, tool_calls=[ToolCall(call_id="c1", name="get_weather", arguments='{"city":"Tokyo"}')]
        ),
        ToolMessage(call_id="c1", name="get_weather", content='{"temp": 22}'),
    ]
    body = chat_wire.build_request(AGENT, messages, "gpt-x", stream=False)
    assert body["model"] == "gpt-x" and body["temperature"] == 0.2 and "stream" not in body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1] == {"role": "user", "content": "Weather in Tokyo?"}
    assistant = body["messages"][2]
    # llama.cpp's server rejects content: null next to tool_calls.
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 22}'}
    assert body["tools"][0] == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}},
    }
    streamed = chat_wire.build_request(AGENT, messages, "m", stream=True)
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}


def test_request_without_tools_or_instructions_omits_them():
    body = chat_wire.build_request(AgentSpec(name="b"), [UserMessage(content="hi")], "m", stream=False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


# ------------------------------------------------------------------- settings, handoffs, output

HI = [UserMessage(content="hi")]
HI_WIRE = [{"role": "user", "content": "hi"}]
ALL_SETTINGS = ModelSettings(
    temperature=0.3,
    top_p=0.9,
    max_output_tokens=50,
    tool_choice="required",
    parallel_tool_calls=False,
    reasoning_effort="low",
    seed=7,
    stop=["END", "\n\n"],
)


def with_settings(agent: AgentSpec = AGENT, **fields) -> AgentSpec:
    return agent.model_copy(update={"settings": ModelSettings(**fields)})


def test_every_model_setting_goes_out_under_its_chat_completions_name():
    body = chat_wire.build_request(AGENT.model_copy(update={"settings": ALL_SETTINGS}), HI, "m", stream=False)
    sent = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
    assert sent == {
        "temperature": 0.3,  # the settings' own, over the agent's older `temperature` field
        "top_p": 0.9,
        # OpenAI's name; `max_tokens` as well would be a 400 there ("at the same time is not supported")
        "max_completion_tokens": 50,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "reasoning_effort": "low",
        "seed": 7,
        "stop": ["END", "\n\n"],
    }


def test_unset_settings_are_not_sent_and_the_older_temperature_still_is():
    body = chat_wire.build_request(AGENT, HI, "m", stream=False)
    assert body["temperature"] == 0.2 and not {"top_p", "max_completion_tokens", "tool_choice", "seed"} & set(body)
    assert "temperature" not in chat_wire.build_request(AgentSpec(name="b"), HI, "m", stream=False)


@pytest.mark.parametrize(
    "choice, sent",
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_is_a_mode_or_names_one_tool(choice, sent):
    assert chat_wire.build_request(with_settings(tool_choice=choice), HI, "m", stream=False)["tool_choice"] == sent


def test_a_tool_choice_that_names_no_tool_of_the_agent_is_refused_on_every_wire():
    """Before: sent as it was; OpenAI answers 400, and llama.cpp or the test double ran the turn
    unforced, so the run went on as if no choice were made."""
    from durable_agent_runner.activities import anthropic_wire, gemini_wire, responses_wire

    named = r"tool_choice names 'get_wether', which is no tool of this agent's \(get_weather\)"
    bare = with_settings(AgentSpec(name="b"), tool_choice="get_weather")
    for way in (chat_wire, responses_wire, anthropic_wire, gemini_wire):
        with pytest.raises(wire.BadSettings, match=named):
            way.build_request(with_settings(tool_choice="get_wether"), HI, "m", stream=False)
        with pytest.raises(wire.BadSettings, match=r"which is no tool of this agent's \(it has none\)"):
            way.build_request(bare, HI, "m", stream=False)


def test_tool_choice_and_parallel_tool_calls_go_only_beside_tools():
    # OpenAI refuses both without tools; without tools they mean nothing anyway.
    agent = with_settings(AgentSpec(name="b"), tool_choice="required", parallel_tool_calls=True, seed=1)
    assert chat_wire.build_request(agent, HI, "m", stream=False) == {"model": "m", "messages": HI_WIRE, "seed": 1}


def test_extra_body_is_merged_last_and_may_add_max_tokens_for_servers_that_read_only_that():
    agent = with_settings(
        temperature=0.3, max_output_tokens=50, extra_body={"max_tokens": 50, "temperature": 1.0, "top_k": 5}
    )
    body = chat_wire.build_request(agent, HI, "m", stream=True)
    assert (body["max_tokens"], body["max_completion_tokens"], body["top_k"]) == (50, 50, 5)
    assert body["temperature"] == 1.0  # a provider's own option wins over ours


@pytest.mark.parametrize("key", sorted(wire.OWNED))
def test_extra_body_may_not_set_what_the_runner_owns(key):
    with pytest.raises(wire.BadSettings, match=f"extra_body may not set {key}:"):
        chat_wire.build_request(with_settings(extra_body={key: "x", "top_k": 5}), HI, "m", stream=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"deep": [float("-inf")]}, {1, 2}])
def test_extra_body_must_be_plain_json(value):
    # The body goes out through a Rust encoder that would write NaN as a bare word no server parses.
    with pytest.raises(wire.BadSettings, match="extra_body must be plain JSON"):
        chat_wire.build_request(with_settings(extra_body={"top_k": value}), HI, "m", stream=False)


def test_each_handoff_is_a_transfer_tool_without_arguments_after_the_agents_tools():
    agent = AGENT.model_copy(
        update={
            "handoffs": [
                HandoffSpec(agent="billing", tool_name="transfer_to_billing"),
                HandoffSpec(agent="refunds", tool_name="transfer_to_refunds", description="Refund questions."),
            ]
        }
    )
    tools = chat_wire.build_request(agent, HI, "m", stream=False)["tools"]
    assert [t["function"]["name"] for t in tools] == ["get_weather", "transfer_to_billing", "transfer_to_refunds"]
    assert tools[1] == {
        "type": "function",
        "function": {
            "name": "transfer_to_billing",
            "description": "Hand off to the billing agent to handle the request.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert tools[2]["function"]["description"] == "Refund questions."
    # an agent with handoffs only still gets its tool settings
    only = with_settings(AgentSpec(name="triage", handoffs=agent.handoffs), tool_choice="transfer_to_billing")
    body = chat_wire.build_request(only, HI, "m", stream=False)
    assert len(body["tools"]) == 2 and body["tool_choice"]["function"] == {"name": "transfer_to_billing"}


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    "name, sent", [("WeatherReport", "WeatherReport"), ("", "output"), ("list[app.Report]", "list_app_Report_")]
)
def test_typed_output_is_sent_as_a_json_schema_response_format_not_strict(name, sent):
    agent = AGENT.model_copy(update={"output_schema": SCHEMA, "output_name": name})
    body = chat_wire.build_request(agent, HI, "m", stream=False)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": sent, "schema": SCHEMA, "strict": False},
    }
    assert "response_format" not in chat_wire.build_request(AGENT, HI, "m", stream=False)


def test_response_parses_text_tool_calls_and_usage():
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-x",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
                        {"id": "a", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
                        {"type": "function", "function": {"name": "h"}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
    reply = chat_wire.parse_response(body, turn=3)
    assert reply.message.content is None and reply.finish_reason == "tool_calls" and reply.model == "gpt-x"
    # The run's own ids, whatever the provider sent (a repeated one, none); theirs is kept aside.
    assert [(c.call_id, c.provider_id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_3_0", "a", "f", '{"x":1}'),
        ("call_3_1", "a", "g", '{"y": 2}'),  # an object becomes JSON text
        ("call_3_2", "", "h", "{}"),
    ]
    u = reply.usage
    assert (u.requests, u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (1, 10, 4, 5, 2)


@pytest.mark.parametrize(
    "body, detail",
    [
        ([], "not a JSON object"),
        ({"choices": []}, "no choices"),
        ({"choices": [{"text": "legacy"}]}, "no message"),
        ({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}, "without a function name"),
        ({"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}, "without a function"),
        ({"choices": [{"message": {"tool_calls": {"function": {"name": "f"}}}}]}, "tool_calls is not a list"),
    ],
)
def test_malformed_responses_are_named(body, detail):
    with pytest.raises(wire.MalformedResponse, match=detail):
        chat_wire.parse_response(body, 1)


async def test_sse_framing_comments_multiline_and_crlf():
    events = [
        e
        async for e in iter_events(
            lines(": keep-alive\r\n", "event: delta\r\n", 'data: {"a":\r\n', "data: 1}\r\n", "\r\n", "data: last")
        )
    ]
    assert [(e.event, e.data) for e in events] == [("delta", '{"a":\n1}'), ("message", "last")]


async def test_lines_end_at_cr_lf_or_crlf_even_across_chunks_and_nowhere_else():
    chunks = ["data: a\r", "\ndata: b\rdata: c\n", "\n", 'data: {"t": "x\u2028y"}\r', "\r", "data: ", "tail"]
    got = [line async for line in iter_lines(lines(*chunks))]
    assert got == ["data: a", "data: b", "data: c", "", 'data: {"t": "x\u2028y"}', "", "data: tail"]


def chunk(**delta) -> str:
    return "data: " + json.dumps({"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}) + "\n"


async def test_stream_assembles_text_and_tool_call_deltas():
    reply = await chat_wire.parse_stream(
        lines(
            chunk(role="assistant", content=""),
            "\n",
            chunk(content="Hel"),
            "\n",
            ": keep-alive\n",
            "\n",
            chunk(content="lo"),
            "\n",
            chunk(
                tool_calls=[{"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}}]
            ),
            "\n",
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"ci'}}]),
            "\n",
            chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]),
            "\n",
            'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n',
            "\n",
            "data: [DONE]\n",
            "\n",
        ),
        turn=1,
    )
    assert reply.message.content == "Hello"
    assert [(c.call_id, c.provider_id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_1_0", "t1", "f", '{"city":"Oslo"}')
    ]
    assert reply.usage.input_tokens == 7 and reply.usage.output_tokens == 3


async def test_a_stream_assembling_more_than_the_limit_is_malformed_whatever_its_framing():
    deltas = [chunk(content="x" * 10), "\n"] * 3
    calls = [chunk(tool_calls=[{"index": 0, "id": "t", "function": {"name": "f", "arguments": "y" * 10}}]), "\n"]
    done = ["data: [DONE]\n", "\n"]
    assert (await chat_wire.parse_stream(lines(*deltas, *calls, *done), 1, limit=40)).message.content == "x" * 30
    with pytest.raises(wire.MalformedResponse, match="reply longer than 39 characters"):
        await chat_wire.parse_stream(lines(*deltas, *calls, *done), 1, limit=39)


async def test_a_line_longer_than_the_limit_is_refused_as_soon_as_it_passes_it():
    async def endless():
        yield "data: ok\n"
        while True:
            yield "x" * 1000

    got: list[str] = []
    with pytest.raises(LineTooLong):
        async for line in iter_lines(endless(), limit=5000):
            got.append(line)
    assert got == ["data: ok"]
    with pytest.raises(LineTooLong):  # also when the line arrives whole in one chunk
        [line async for line in iter_lines(lines("y" * 5001 + "\n"), limit=5000)]
    assert [line async for line in iter_lines(lines("y" * 5000 + "\n", "z"), limit=5000)] == ["y" * 5000, "z"]


async def test_stream_cut_before_done_is_never_an_answer():
    with pytest.raises(wire.StreamFailed, match="before \\[DONE\\]"):
        await chat_wire.parse_stream(lines(chunk(content="half an ans"), "\n"), 1)


async def test_stream_error_event_fails_the_call():
    with pytest.raises(wire.StreamFailed, match="error event"):
        await chat_wire.parse_stream(
            lines(chunk(content="x"), "\n", 'data: {"error": {"message": "overloaded"}}\n', "\n"), 1
        )


def response(status: int, body: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, json=body if body is not None else {"error": {"message": "nope", "code": None}}, headers=headers
    )


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_transient_statuses_retry(status):
    err = errors.from_status(response(status))
    assert not err.non_retryable and f"HTTP {status}" in err.message and "nope" in err.message


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_caller_errors_fail_at_once_with_the_providers_message(status):
    err = errors.from_status(
        response(status, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
    )
    assert err.non_retryable and "Incorrect API key provided" in err.message and err.type == f"ModelHTTP{status}"


def test_quota_exhausted_429_is_not_retried():
    err = errors.from_status(
        response(429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}})
    )
    assert err.non_retryable and err.type == "ModelQuotaExceeded"


def test_retry_after_headers_become_the_next_retry_delay():
    assert errors.from_status(response(429, headers={"Retry-After": "7"})).next_retry_delay == timedelta(seconds=7)
    ms = errors.from_status(response(503, headers={"retry-after-ms": "250", "Retry-After": "9"}))
    assert ms.next_retry_delay == timedelta(milliseconds=250)
    assert errors.from_status(response(500)).next_retry_delay is None
    assert errors.retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


def test_non_json_error_body_keeps_its_text():
    err = errors.from_status(httpx.Response(502, text="<html>Bad Gateway</html>"))
    assert "Bad Gateway" in err.message and not err.non_retryable


def test_an_echoed_key_is_masked_before_the_message_is_cut():
    key = "sk-live-0123456789abcdef0123456789"
    redactor = Redactor(key)
    for at in range(errors.EXCERPT - len(key), errors.EXCERPT + 1):  # keys across the cut
        body = {"error": {"message": "x" * at + key + " " + key, "code": "invalid_api_key"}}
        err = errors.from_status(response(401, body), redactor=redactor)
        assert key[:6] not in err.message and key[-6:] not in err.message
    text = "Bearer " + key + " rejected by proxy"
    assert errors.from_status(httpx.Response(502, text=text), redactor=redactor).message.endswith(
        "*** rejected by proxy"
    )
    # A body read only in part may end in the start of a key: even a piece too short to mask goes.
    assert errors.from_status(httpx.Response(500), "oops: " + key[:20], redactor).message.endswith("oops: ***")
    cut = errors.from_status(httpx.Response(500), "oops: " + key[:6], redactor, cut=True)
    assert cut.message.rstrip().endswith("oops:") and key[:4] not in cut.message


def test_unreadable_retry_after_headers_mean_no_delay():
    for headers in ({"retry-after-ms": "nan"}, {"Retry-After": "nan"}, {"Retry-After": "Mon, 99 Foo 99999"}):
        assert errors.retry_after(httpx.Headers(headers)) is None
    assert errors.retry_after(httpx.Headers({"retry-after-ms": "-5"})) == 0.0
    assert errors.retry_after(httpx.Headers({"Retry-After": "1e300"})) == errors.MAX_RETRY_DELAY


def test_transport_errors_retry_and_name_the_server():
    err = errors.from_transport(httpx.ConnectError("connection refused"), "http://x/v1")
    assert not err.non_retryable and err.type == "ModelConnectionError" and "http://x/v1" in err.message
    assert errors.from_transport(httpx.ReadTimeout("slow"), "u").type == "ModelTimeout"


def test_malformed_responses_retry_a_few_times_then_stop():
    assert not errors.malformed("bad", count=1).non_retryable
    assert errors.malformed("bad", count=errors.MALFORMED_ATTEMPTS).non_retryable


def test_settings_read_the_environment_and_hide_the_key():
    s = LLMSettings.from_env(
        {"LLM_BASE_URL": "https://api.example/v1/", "OPENAI_API_KEY": "sk-secret", "LLM_MODEL": "m"}
    )
    assert s.base_url == "https://api.example/v1" and s.model == "m"
    assert "sk-secret" not in repr(s) and "sk-secret" not in s.model_dump_json()
    assert s.auth_headers() == {"Authorization": "Bearer sk-secret"}
    azure = LLMSettings.from_env({"LLM_API_KEY": "k", "OPENAI_API_KEY": "other", "LLM_API_KEY_HEADER": "api-key"})
    assert azure.auth_headers() == {"api-key": "k"}
    assert LLMSettings.from_env({}).auth_headers() == {}
    with pytest.raises(ValueError, match="LLM_API"):
        LLMSettings.from_env({"LLM_API": "soap"})


def test_settings_read_the_bounds_on_a_model_call():
    s = LLMSettings.from_env(
        {"LLM_READ_TIMEOUT": "1.5", "LLM_TIMEOUT": "30", "LLM_MAX_ATTEMPTS": "3", "LLM_RETRY_SECONDS": "60"}
    )
    assert (s.read_timeout, s.timeout, s.max_attempts, s.retry_seconds) == (1.5, 30.0, 3, 60.0)
    d = LLMSettings.from_env({})
    assert (d.read_timeout, d.timeout, d.max_attempts, d.retry_seconds) == (
        DEFAULT_MODEL_READ_TIMEOUT,
        DEFAULT_MODEL_TIMEOUT,
        DEFAULT_MODEL_MAX_ATTEMPTS,
        DEFAULT_MODEL_RETRY_SECONDS,
    )


@pytest.mark.parametrize(
    "name, value",
    [
        ("LLM_READ_TIMEOUT", "soon"),
        ("LLM_READ_TIMEOUT", "0"),
        ("LLM_TIMEOUT", "-5"),
        ("LLM_TIMEOUT", "inf"),
        ("LLM_RETRY_SECONDS", "nan"),
        ("LLM_MAX_ATTEMPTS", "2.5"),
        ("LLM_MAX_ATTEMPTS", "0"),
        ("LLM_BASE_URL", "localhost:8000/v1"),
        ("LLM_BASE_URL", "ftp://example.com/v1"),
        ("LLM_BASE_URL", "http:///v1"),
        ("LLM_BASE_URL", "http://[::1/v1"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(name: str, value: str):
    with pytest.raises(ValueError, match=name):
        LLMSettings.from_env({name: value})


# ------------------------------------------------------------------- arguments past the bounds

DEEP = "[" * 5000 + "]" * 5000
DIGITS = '{"n": ' + "7" * 5000 + "}"


def body_with(arguments: object) -> dict[str, object]:
    call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}]}


def stream_with(arguments: str) -> list[str]:
    head = {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}
    pieces = [arguments[i : i + 1000] for i in range(0, len(arguments), 1000)]
    deltas = [line for p in pieces for line in (chunk(tool_calls=[{"index": 0, "function": {"arguments": p}}]), "\n")]
    return [chunk(tool_calls=[head]), "\n", *deltas, "data: [DONE]\n", "\n"]


@pytest.mark.parametrize(
    "arguments, why",
    [
        (DEEP, "nested deeper than 64 levels"),
        (DIGITS, "a number longer than 100 characters"),
        ('{"s": "' + "x" * (bounds.MAX_CHARS + 1) + '"}', "longer than 1,048,576 characters"),
        ("[NaN]", "NaN is not JSON"),
    ],
)
async def test_arguments_past_the_bounds_are_replaced_by_why_streamed_or_not(arguments, why):
    """What the workflow gets can never make it recurse, nor any later parse raise: the call
    stays (the model is told why through it), its arguments say why they were refused."""
    plain = chat_wire.parse_response(body_with(arguments), 1).message.tool_calls[0].arguments
    streamed = (await chat_wire.parse_stream(lines(*stream_with(arguments)), 1)).message.tool_calls[0].arguments
    assert plain == streamed == bounds.refused(why)
    with pytest.raises(bounds.OutsideDataError, match=why) as caught:
        bounds.parse_json(plain)
    assert caught.value.bound == "refused"


async def test_arguments_escaping_a_lone_surrogate_are_written_again_clean():
    arguments = '{"city": "Tok\\ud800yo", "face": "\\ud83d\\ude00"}'
    plain = chat_wire.parse_response(body_with(arguments), 1).message.tool_calls[0].arguments
    streamed = (await chat_wire.parse_stream(lines(*stream_with(arguments)), 1)).message.tool_calls[0].arguments
    assert plain == streamed == '{"city": "Tok\ufffdyo", "face": "\U0001f600"}'
    assert json.loads(plain)["city"].encode("utf-8")  # no lone surrogate reaches a payload


async def test_arguments_that_are_only_not_json_pass_as_they_are():
    """Not JSON is not a bound: the tool says what is wrong with them, as it always has."""
    assert chat_wire.parse_response(body_with('{"a": 1,'), 1).message.tool_calls[0].arguments == '{"a": 1,'
    object_args = chat_wire.parse_response(body_with(json.loads(DEEP[4900:5100])), 1)  # 100 deep, as an object
    assert object_args.message.tool_calls[0].arguments == bounds.refused("nested deeper than 64 levels")


async def test_a_stream_with_nothing_in_it_is_malformed_as_a_body_without_choices_is():
    empty = [chunk(role="assistant"), "\n", 'data: {"id":"c","choices":[],"usage":{}}\n', "\n", "data: [DONE]\n"]
    with pytest.raises(wire.MalformedResponse, match="no text, no tool call and no finish_reason"):
        await chat_wire.parse_stream(lines(*empty), 1)
    finished = 'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n'
    reply = await chat_wire.parse_stream(lines(chunk(role="assistant"), "\n", finished, "\n", "data: [DONE]\n"), 1)
    assert reply.message.content is None and reply.finish_reason == "stop"  # an empty answer, said so


async def test_a_tool_call_delta_after_the_finish_reason_is_malformed():
    head = chunk(tool_calls=[{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"a":'}}])
    fin = {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}
    last = "data: " + json.dumps({"id": "c", "choices": [{**fin, "finish_reason": "tool_calls"}]}) + "\n"
    reply = await chat_wire.parse_stream(lines(head, "\n", last, "\n", "data: [DONE]\n"), 1)
    assert reply.message.tool_calls[0].arguments == '{"a":1}'  # the last delta may come with the finish
    late = chunk(tool_calls=[{"index": 0, "function": {"arguments": ', "b": 2'}}])
    with pytest.raises(wire.MalformedResponse, match="tool-call delta after the finish_reason"):
        await chat_wire.parse_stream(lines(head, "\n", last, "\n", late, "\n", "data: [DONE]\n"), 1)


@pytest.mark.parametrize("text", ["[" * 5000, '{"n": ' + "1" * 5000 + "}", '{"a": NaN}'])
async def test_bodies_and_events_past_the_bounds_are_malformed(text):
    with pytest.raises(wire.MalformedResponse, match="is not JSON"):
        wire.parse_body(text)
    with pytest.raises(wire.MalformedResponse, match="stream event is not JSON"):
        await chat_wire.parse_stream(lines(f"data: {text}\n", "\n", "data: [DONE]\n"), 1)
