"""fake_llm's Gemini side: it refuses what the real API refuses, in Google's error shape, and its
replies, streams, faults and blocks read as the runner's wire reads them. The HTTP tests start a
fake of their own (`server`); the parser's own checks are pure."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from durable_agent_runner.activities import gemini_wire as gw
from durable_agent_runner.activities import wire
from durable_agent_runner.redact import Redactor
from durable_agent_runner.testing.fake_llm import gemini
from durable_agent_runner.testing.fake_llm.server import LLMServer
from durable_agent_runner.testing.fake_llm.wire import ApiError
from durable_agent_runner.testing.request import AgentIndex, request_of
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.test_responses_wire import WEATHER_AGENT, run_tool

AGENT = AgentSpec(
    name="weather",
    instructions="Answer with the weather.",
    tools=[ToolSpec(name="get_weather", description="Weather.", parameters={"type": "object"})],
)
THINKING = AGENT.model_copy(update={"settings": ModelSettings(thinking_tokens=1024)})
KEY = "AIzaSy-fake-key-0123456789"
USER = {"role": "user", "parts": [{"text": "hi"}]}
HI: list[Message] = [UserMessage(content="hi")]


def call(call_id: str, pid: str = "", name: str = "get_weather") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments='{"city": "Oslo"}', provider_id=pid)


def contents(*items: dict[str, Any]) -> dict[str, Any]:
    return {"contents": list(items)}


def refused(body: dict[str, Any], match: str, model: str = "m") -> None:
    with pytest.raises(ApiError, match=match) as caught:
        gemini.parse(body, model, False)
    assert caught.value.status == 400


# ------------------------------------------------------------------- what it refuses (pure)


@pytest.mark.parametrize(
    "body, match",
    [
        ({}, "contents is not specified"),
        (contents(), "contents is not specified"),
        ({"contents": {"role": "user"}}, "Invalid value at 'contents'"),
        ({**contents(USER), "stream": True}, 'Unknown name "stream": Cannot find field'),
        ({**contents(USER), "messages": []}, 'Unknown name "messages"'),
        (contents({**USER, "name": "x"}), "Unknown name \"name\" at 'contents\\[0\\]'"),
        (contents({"role": "user", "parts": [{"text": "x", "type": "text"}]}), "at 'contents\\[0\\].parts\\[0\\]'"),
        (contents({"role": "assistant", "parts": [{"text": "x"}]}), "Please use a valid role: user, model"),
        (contents({"parts": [{"text": "x"}]}), "valid role"),
        (contents({"role": "user", "parts": []}), "contents.parts must not be empty"),
        (
            {**contents(USER), "generationConfig": {"max_tokens": 5}},
            "Unknown name \"max_tokens\" at 'generation_config'",
        ),
        (
            {**contents(USER), "generationConfig": {"thinkingConfig": {"thinkingBudget": 5, "thinkingLevel": "LOW"}}},
            "only one of thinking budget and thinking level",
        ),
        ({**contents(USER), "generationConfig": {"responseJsonSchema": {}}}, "response_mime_type must be"),
        ({**contents(USER), "model": "models/other"}, "is not the path's"),
    ],
)
def test_the_fake_refuses_what_the_real_api_refuses(body, match):
    refused(body, match)


def test_either_spelling_of_a_field_is_read_as_the_real_api_reads_it():
    body = {
        "contents": [USER],
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "generation_config": {"max_output_tokens": 5, "thinking_config": {"thinking_budget": 0}},
        "model": "models/m",
    }
    conv = gemini.parse(body, "m", False)
    assert (conv.api, conv.model, conv.instructions, conv.last_user_text) == ("gemini", "m", "Be brief.", "hi")


CALL = {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "get_weather", "args": {"city": "Oslo"}}}]}


def answer(name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"name": name, "response": {"result": "rain"}, **extra}}]}


@pytest.mark.parametrize(
    "items, match",
    [
        ([USER, answer()], "function response turn comes immediately after a function call turn"),
        ([CALL, answer(id="a")], "function call turn comes immediately after a user turn"),
        ([USER, CALL, answer("get_time")], "'get_time' in contents\\[2\\] answers no function call"),
        ([USER, CALL, answer(id="b")], "answers no function call"),
        (
            [USER, CALL, {"role": "user", "parts": answer()["parts"] * 2}],
            "number of function response parts is equal to the number of function call parts",
        ),
    ],
)
def test_each_function_response_answers_a_call_of_the_model_turn_before_it(items, match):
    refused(contents(*items), match)
    assert gemini.parse(contents(USER, CALL, answer(id="a")), "m", False).results_since_user[0].output == "rain"


def test_a_conversation_reads_as_the_chat_one_the_testing_kit_knows():
    body = gw.build_request(
        AGENT,
        [
            UserMessage(content="Weather in Oslo?"),
            AssistantMessage(content="Checking.", tool_calls=[call("c1", pid="g1")]),
            ToolMessage(call_id="c1", name="get_weather", content="rain"),
        ],
        "m",
        stream=False,
    )
    conv = gemini.parse(body, "script:x", True)
    assert (conv.turn, conv.turn_since_user, conv.stream, conv.tool_names) == (1, 1, True, ("get_weather",))
    assert [(r.call_id, r.name, json.loads(r.arguments), r.output) for r in conv.results_since_user] == [
        ("g1", "get_weather", {"city": "Oslo"}, "rain")
    ]
    assert conv.prefix_chars < conv.prompt_chars and conv.fingerprint != gemini.parse(body, "other", True).fingerprint
    seen = request_of(conv, AgentIndex())
    assert [m.role for m in seen.messages] == ["user", "assistant", "tool"]
    assert seen.tool_schemas == {"get_weather": {"type": "object"}} and seen.instructions == AGENT.instructions
    typed = gw.build_request(AGENT.model_copy(update={"output_schema": {"type": "object"}}), HI, "m", False)
    assert request_of(gemini.parse(typed, "m", False), AgentIndex()).output_schema == {"type": "object"}


def signed_turn(signature: str | None, *, thinking: bool = True, user_after: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
    if signature is not None:
        part["thoughtSignature"] = signature
    items = [USER, {"role": "model", "parts": [part]}, answer()]
    if user_after:
        items.append({"role": "user", "parts": [{"text": "thanks"}]})
    config = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}} if thinking else {}
    return {**contents(*items), **config}


def test_a_thought_signature_must_come_back_as_it_was_issued():
    issued = gemini.signature("get_weather", {"city": "Oslo"})
    gemini.parse(signed_turn(issued), "m", False)
    gemini.parse(signed_turn(gemini.SKIP_SIGNATURE), "m", False)  # Google's placeholder passes
    refused(signed_turn(issued[:-4] + "AAAA"), "Corrupted thought signature")
    refused(signed_turn(gemini.signature("get_time", {})), "Corrupted thought signature")  # moved from another call
    refused(signed_turn(None), "Function call `get_weather` in the `1.` content block is missing a `thought_signature`")
    gemini.parse(signed_turn(None, thinking=False), "m", False)  # no thinking asked: none required
    gemini.parse(signed_turn(None, user_after=True), "m", False)  # an earlier turn's calls are not checked


# ------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


@pytest.fixture
def fake(server: LLMServer) -> LLMServer:
    server.reset()
    return server


def url(srv: LLMServer, model: str, stream: bool) -> str:
    verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{srv.url}/v1beta/models/{model}:{verb}"


def post(srv: LLMServer, model: str, body: dict[str, Any], key: str | None = KEY) -> httpx.Response:
    headers = {"x-goog-api-key": key} if key else {}
    return httpx.post(url(srv, model, False), json=body, headers=headers, timeout=10)


async def ask(srv: LLMServer, agent: AgentSpec, messages: list[Message], model: str, stream: bool, turn: int = 1):
    """One model call as the runner makes it: build, send, parse."""
    body = gw.build_request(agent, messages, model, stream)
    async with httpx.AsyncClient(timeout=10) as client:
        if not stream:
            response = await client.post(url(srv, model, False), json=body, headers={"x-goog-api-key": KEY})
            assert response.status_code == 200, response.text
            return gw.parse_response(response.json(), turn)
        async with client.stream("POST", url(srv, model, True), json=body, headers={"x-goog-api-key": KEY}) as r:
            assert r.status_code == 200, await r.aread()
            assert r.headers["content-type"] == "text/event-stream"
            return await gw.parse_stream(_tolerant(r.aiter_lines()), turn)


async def _tolerant(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The lines, until the connection drops (a cut stream): the wire then sees its end."""
    try:
        async for line in lines:
            yield line
    except httpx.HTTPError:
        return


def test_errors_are_in_googles_shape_and_the_key_is_required(fake: LLMServer):
    missing = post(fake, "m", contents(USER), key=None)
    assert missing.status_code == 403
    assert missing.json()["error"]["status"] == "PERMISSION_DENIED" and missing.json()["error"]["code"] == 403
    unknown = post(fake, "m", {**contents(USER), "temperature": 1})
    assert unknown.status_code == 400
    assert unknown.json() == {
        "error": {
            "code": 400,
            "message": 'Invalid JSON payload received. Unknown name "temperature": Cannot find field.',
            "status": "INVALID_ARGUMENT",
        }
    }
    nobody = post(fake, "script:none", contents(USER))
    assert nobody.status_code == 404 and nobody.json()["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_multi_turn_run_with_thinking_and_tools_goes_through_the_wire(fake: LLMServer, stream: bool):
    model = fake.add_script(
        "w",
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
            {"content": "Rain in Oslo, all day.", "usage": {"prompt_tokens": 900, "cached_tokens": 512}},
        ],
    )
    messages: list[Message] = [UserMessage(content="Weather in Oslo?")]
    first = await ask(fake, THINKING, messages, model, stream, turn=1)
    assert first.finish_reason == "tool_calls" and first.message.tool_calls[0].name == "get_weather"
    assert [t.call_id for t in first.message.thinking] == ["call_1_0"]  # the call carries its signature
    messages += [first.message, ToolMessage(call_id="call_1_0", name="get_weather", content="rain")]
    second = await ask(fake, THINKING, messages, model, stream, turn=2)
    assert (second.message.content, second.finish_reason) == ("Rain in Oslo, all day.", "stop")
    assert (second.usage.input_tokens, second.usage.cached_tokens) == (900, 512)
    sent = fake.requests()[-1]["body"]["contents"][1]["parts"][0]
    assert sent["thoughtSignature"] == first.message.thinking[0].signature and sent["functionCall"]["id"] == "call_0_0"
    # A changed signature is refused, as Gemini 3 refuses it.
    bent = first.message.model_copy(
        update={"thinking": [first.message.thinking[0].model_copy(update={"signature": "AAAA"})]}
    )
    body = gw.build_request(THINKING, [messages[0], bent, messages[2]], model, False)
    assert "Corrupted thought signature" in post(fake, model, body).json()["error"]["message"]


def test_replies_have_geminis_shape(fake: LLMServer):
    model = fake.add_script(
        "s",
        [
            {
                "content": "Hello there.",
                "usage": {"prompt_tokens": 20, "completion_tokens": 9, "reasoning_tokens": 4, "cached_tokens": 8},
            }
        ],
    )
    body = gw.build_request(
        THINKING.model_copy(
            update={
                "settings": ModelSettings(
                    thinking_tokens=1024,
                    extra_body={
                        "generationConfig": {"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}
                    },
                )
            }
        ),
        HI,
        model,
        False,
    )
    got = post(fake, model, body).json()
    candidate = got["candidates"][0]
    assert candidate["finishReason"] == "STOP" and candidate["content"]["role"] == "model"
    assert candidate["content"]["parts"][0] == {"text": gemini.THOUGHT_SUMMARY, "thought": True}
    assert (
        candidate["content"]["parts"][1]["text"] == "Hello there."
        and "thoughtSignature" in candidate["content"]["parts"][1]
    )
    assert got["usageMetadata"] == {
        "promptTokenCount": 20,
        "candidatesTokenCount": 5,
        "thoughtsTokenCount": 4,
        "cachedContentTokenCount": 8,
        "totalTokenCount": 29,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 20}],
    }
    assert got["modelVersion"] == model and got["responseId"] == post(fake, model, body).json()["responseId"]
    reply = gw.parse_response(got, 1)
    assert reply.message.content == "Hello there." and (reply.usage.output_tokens, reply.usage.reasoning_tokens) == (
        9,
        4,
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_script_can_make_gemini_withhold_a_reply_or_block_the_prompt(fake: LLMServer, stream: bool):
    safety = fake.add_script("safety", [{"finish": "SAFETY"}])
    reply = await ask(fake, AGENT, list(HI), safety, stream)
    assert (reply.message.content, reply.finish_reason) == ("[Gemini withheld the reply: SAFETY]", "content_filter")
    long = fake.add_script("long", [{"content": "It was a dark and", "finish": "MAX_TOKENS"}])
    reply = await ask(fake, AGENT, list(HI), long, stream)
    assert (reply.message.content, reply.finish_reason) == ("It was a dark and", "length")
    blocked = fake.add_script("blocked", [{"blocked": "PROHIBITED_CONTENT"}])
    reply = await ask(fake, AGENT, list(HI), blocked, stream)
    assert (reply.message.content, reply.finish_reason) == (
        "[Gemini blocked the prompt: PROHIBITED_CONTENT]",
        "content_filter",
    )
    with pytest.raises(ValueError, match="finish must be a non-empty string"):
        fake.add_script("bad", [{"finish": 3}])


def test_status_faults_answer_in_googles_shape_with_retry_after(fake: LLMServer):
    fake.add_faults(
        [
            {"kind": "status", "status": 429, "retry_after": 2, "path": "gemini"},
            {"kind": "status", "status": 503},
            {"kind": "status", "status": 401, "echo_key": True},
            {"kind": "error_event", "stream": False},
        ]
    )
    model = fake.add_script("ok", [{"content": "fine"}])
    busy = post(fake, model, contents(USER))
    assert busy.status_code == 429 and busy.headers["retry-after"] == "2"
    assert busy.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert busy.json()["error"]["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}
    ]
    assert post(fake, model, contents(USER)).json()["error"]["status"] == "UNAVAILABLE"
    echoed = post(fake, model, contents(USER))
    assert echoed.status_code == 401 and KEY in echoed.json()["error"]["message"]
    assert echoed.json()["error"]["status"] == "UNAUTHENTICATED"
    assert post(fake, model, contents(USER)).json()["error"]["status"] == "INTERNAL"
    assert post(fake, model, contents(USER)).status_code == 200
    with pytest.raises(ValueError, match="fault path must be one of"):
        fake.add_fault("status", path="vertex")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_malformed_reply_is_malformed_to_the_wire(fake: LLMServer, stream: bool):
    fake.add_fault("malformed")
    model = fake.add_script("m", [{"content": "fine"}])
    with pytest.raises(wire.MalformedResponse):
        if stream:
            await ask(fake, AGENT, list(HI), model, True)
        else:
            wire.parse_body(post(fake, model, gw.build_request(AGENT, HI, model, False)).text)


@pytest.mark.parametrize("after", [0, 1, 3, 50])
async def test_a_cut_or_stalled_stream_always_lacks_its_finish_reason(fake: LLMServer, after: int):
    """Gemini's stream ends with its body, so however many chunks get through, never the last."""
    model = fake.add_script("short", [{"content": "Hi."}])
    fake.add_fault("cut", after_events=after)
    with pytest.raises(wire.StreamFailed, match="stream ended before its finishReason"):
        await ask(fake, AGENT, list(HI), model, True)
    fake.add_fault("stall", after_events=after, ms=100)
    with pytest.raises(wire.StreamFailed, match="before its finishReason"):
        await ask(fake, AGENT, list(HI), model, True)


async def test_an_error_event_mid_stream_and_keepalives(fake: LLMServer):
    model = fake.add_script("e", [{"content": "A long enough answer to stream in several chunks."}])
    fake.add_fault("error_event", message="The model is overloaded.")
    with pytest.raises(wire.StreamFailed, match="error event mid-stream: INTERNAL: The model is overloaded"):
        await ask(fake, AGENT, list(HI), model, True)
    fake.add_fault("keepalive")
    reply: ModelReply = await ask(fake, AGENT, list(HI), model, True)
    assert reply.message.content == "A long enough answer to stream in several chunks."


# --------------------------------------------------- the default scenarios and hostile:echo


async def weather_conversation(srv: LLMServer, stream: bool) -> list[ModelReply]:
    messages: list[Message] = [UserMessage(content="Is it warmer in Tokyo or Paris?")]
    replies: list[ModelReply] = []
    for turn in range(3):
        reply = await ask(srv, WEATHER_AGENT, messages, "weather", stream, turn)
        replies.append(reply)
        messages.append(reply.message)
        messages += [ToolMessage(call_id=c.call_id, name=c.name, content=run_tool(c)) for c in reply.message.tool_calls]
    return replies


async def test_the_weather_demo_runs_on_gemini_through_the_testing_kit(llm: LLMServer):
    """The default scenarios read a Gemini request through as_chat, as they read Chat's."""
    first, second, last = await weather_conversation(llm, stream=False)
    assert [(c.name, json.loads(c.arguments)) for c in first.message.tool_calls] == [
        ("get_weather", {"city": "Tokyo"}),
        ("get_weather", {"city": "Paris"}),
    ]
    assert [c.name for c in second.message.tool_calls] == ["convert_temperature"]
    assert last.message.content == "Tokyo: sunny, 22.0°C. Paris: cloudy, 15.0°C. Tokyo is warmer at 71.6°F."
    assert last.finish_reason == "stop" and all(r.model == "weather" for r in (first, second, last))
    assert await weather_conversation(llm, stream=True) == [first, second, last]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_echoing_the_key_everywhere_leaks_nothing_through_the_wire(llm: LLMServer, stream: bool):
    body = gw.build_request(WEATHER_AGENT, [UserMessage(content="Tokyo?")], "hostile:echo", stream)
    headers = {"x-goog-api-key": KEY}
    mask = Redactor(KEY).text
    async with httpx.AsyncClient(timeout=10) as client:
        if stream:
            async with client.stream("POST", url(llm, "hostile:echo", True), json=body, headers=headers) as r:
                raw = await r.aread()
                reply = await gw.parse_stream(lines(raw.decode()), 1, mask=mask)
        else:
            r = await client.post(url(llm, "hostile:echo", False), json=body, headers=headers)
            raw = r.content
            reply = gw.parse_response(r.json(), 1, mask=mask)
    assert KEY.encode() in raw  # the server did echo it: in ids, the model, the finish reason, usage
    assert KEY not in reply.model_dump_json() and reply.message.tool_calls


async def lines(text: str) -> AsyncIterator[str]:
    for line in text.splitlines():
        yield line
