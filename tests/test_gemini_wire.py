"""Gemini's generateContent mapping both ways, streamed and not, and its hostile cases: pure."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.activities import errors, wire
from durable_agent_runner.activities import gemini_wire as gw
from durable_agent_runner.machine import bounds
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    HandoffSpec,
    ModelSettings,
    Thinking,
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
HI = [UserMessage(content="hi")]
KEY = "AIzaSyD-live-0123456789abcdef0123"


def with_settings(agent: AgentSpec = AGENT, **fields: Any) -> AgentSpec:
    return agent.model_copy(update={"settings": ModelSettings(**fields)})


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Oslo"}', pid: str = "") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments=arguments, provider_id=pid)


def signed(signature: str, call_id: str = "", provider: str = "gemini") -> Thinking:
    return Thinking(provider=provider, kind="signature", signature=signature, call_id=call_id)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ the request


def test_the_transcript_becomes_contents_with_the_runs_pairs_and_the_providers_ids():
    messages = [
        UserMessage(content="Weather in Oslo and Rome?"),
        AssistantMessage(
            content="Looking.",
            tool_calls=[call("c1", pid="g1"), call("c2", arguments='{"city": "Rome"}', pid="g2")],
            thinking=[signed("SIG1", "c1")],
        ),
        ToolMessage(call_id="c1", name="get_weather", content="rain"),
        ToolMessage(call_id="c2", name="get_weather", content="no such city", is_error=True),
    ]
    body = gw.build_request(AGENT, messages, "gemini-x", stream=False)
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Oslo and Rome?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Looking."},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}, "id": "g1"},
                    "thoughtSignature": "SIG1",
                },
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}, "id": "g2"}},
            ],
        },
        {
            "role": "user",  # both results of the step in one content
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "rain"}, "id": "g1"}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "no such city"}, "id": "g2"}},
            ],
        },
    ]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "get_weather", "description": "Weather.", "parametersJsonSchema": {"type": "object"}}
            ]
        }
    ]
    assert body["generationConfig"] == {"temperature": 0.2}
    # The model and the stream are the URL's: the body is the same either way and names neither.
    assert gw.build_request(AGENT, messages, "other", stream=True) == body
    assert not {"model", "stream"} & set(body)


def test_a_request_without_tools_instructions_or_settings_is_contents_alone():
    assert gw.build_request(AgentSpec(name="b"), HI, "m", stream=False) == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
    }


def test_ids_go_back_only_when_the_provider_gave_each_call_its_own():
    for pids in (["", ""], ["same", "same"], ["g1", ""]):
        message = AssistantMessage(tool_calls=[call("c1", pid=pids[0]), call("c2", pid=pids[1])])
        results = [ToolMessage(call_id=c, name="get_weather", content="x") for c in ("c1", "c2")]
        contents = gw.build_request(AGENT, [*HI, message, *results], "m", stream=False)["contents"]
        assert all("id" not in p["functionCall"] for p in contents[1]["parts"])
        assert all("id" not in p["functionResponse"] for p in contents[2]["parts"])


@pytest.mark.parametrize("arguments", ['{"a": 1,', "[1, 2]", '"text"', bounds.refused("nested deeper than 64 levels")])
def test_arguments_that_are_not_a_json_object_go_back_as_an_empty_object(arguments):
    message = AssistantMessage(tool_calls=[call("c1", arguments=arguments)])
    contents = gw.build_request(AGENT, [*HI, message], "m", stream=False)["contents"]
    assert contents[1]["parts"][0]["functionCall"]["args"] == {}


def test_an_empty_assistant_message_is_left_out_and_same_role_contents_merge():
    messages = [
        UserMessage(content="one"),
        AssistantMessage(content=None),  # an empty reply: Gemini refuses a content without parts
        UserMessage(content="two"),
        AssistantMessage(tool_calls=[call("c1")]),
        ToolMessage(call_id="c1", name="get_weather", content="rain"),
        UserMessage(content="and tomorrow?"),  # said while the tool ran (a session's steer)
    ]
    contents = gw.build_request(AGENT, messages, "m", stream=False)["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[0]["parts"] == [{"text": "one"}, {"text": "two"}]
    assert [next(iter(p)) for p in contents[2]["parts"]] == ["functionResponse", "text"]


def test_a_transcript_that_begins_with_the_model_gets_a_user_turn_first():
    """An edit that dropped the prompt leaves the model's call first, which Gemini refuses (a
    function call turn must follow a user turn): the wire opens with one."""
    messages = [AssistantMessage(tool_calls=[call("c1")]), ToolMessage(call_id="c1", name="w", content="rain")]
    contents = gw.build_request(AGENT, messages, "m", stream=False)["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": wire.OPENING}]}
    assert [c["role"] for c in contents] == ["user", "model", "user"]


def test_signatures_ride_back_on_their_parts_and_other_providers_thinking_is_dropped():
    message = AssistantMessage(
        content="Done.",
        thinking=[
            Thinking(provider="anthropic", kind="thinking", text="hmm", signature="ANT"),
            signed("FIRST"),
            signed("LAST"),
        ],
    )
    parts = gw.build_request(AGENT, [*HI, message, UserMessage(content="ok")], "m", stream=False)["contents"][1][
        "parts"
    ]
    assert parts == [{"text": "Done.", "thoughtSignature": "LAST"}]
    # A signature Gemini put on an empty text part goes back on one.
    bare = AssistantMessage(content=None, thinking=[signed("S")])
    parts = gw.build_request(AGENT, [*HI, bare, UserMessage(content="ok")], "m", stream=False)["contents"][1]["parts"]
    assert parts == [{"text": "", "thoughtSignature": "S"}]


def test_a_step_of_the_current_turn_without_a_signature_gets_googles_placeholder():
    """After a fallback from another provider, Gemini 3 would refuse the turn's unsigned calls."""
    earlier = AssistantMessage(tool_calls=[call("c0")])
    mine = AssistantMessage(tool_calls=[call("c1"), call("c2")], thinking=[signed("ANT", "c1", "anthropic")])
    messages = [
        UserMessage(content="first"),
        earlier,
        ToolMessage(call_id="c0", name="get_weather", content="x"),
        UserMessage(content="second"),
        mine,
        ToolMessage(call_id="c1", name="get_weather", content="x"),
        ToolMessage(call_id="c2", name="get_weather", content="x"),
    ]
    contents = gw.build_request(AGENT, messages, "m", stream=False)["contents"]
    assert "thoughtSignature" not in contents[1]["parts"][0]  # an earlier turn: not checked, not touched
    assert contents[3]["parts"][0]["thoughtSignature"] == gw.SKIP_SIGNATURE == "skip_thought_signature_validator"
    assert "thoughtSignature" not in contents[3]["parts"][1]  # only a step's first call needs one


ALL = ModelSettings(temperature=0.3, top_p=0.9, max_output_tokens=50, seed=7, stop=["END"], thinking_tokens=2048)


def test_every_setting_goes_to_generation_config_under_geminis_name():
    body = gw.build_request(AGENT.model_copy(update={"settings": ALL}), HI, "m", stream=False)
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "topP": 0.9,
        "maxOutputTokens": 50,
        "seed": 7,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 2048},
    }
    levels = gw.build_request(with_settings(reasoning_effort="minimal"), HI, "m", stream=False)["generationConfig"]
    assert levels == {"temperature": 0.2, "thinkingConfig": {"thinkingLevel": "MINIMAL"}}
    assert "parallel" not in json.dumps(gw.build_request(with_settings(parallel_tool_calls=True), HI, "m", False))


@pytest.mark.parametrize(
    "fields, line",
    [
        ({"parallel_tool_calls": False}, "parallel_tool_calls: Gemini's API has no switch"),
        ({"thinking_tokens": 2048, "reasoning_effort": "high"}, "thinking_tokens and reasoning_effort: Gemini takes"),
    ],
)
def test_settings_gemini_cannot_honour_are_named_and_refused(fields, line):
    assert [p[: len(line)] for p in gw.check_settings(ModelSettings(**fields))] == [line]
    with pytest.raises(wire.BadSettings, match=line.split(":")[0]):
        gw.build_request(with_settings(**fields), HI, "m", stream=False)
    assert gw.check_settings(ALL) == []


@pytest.mark.parametrize(
    "choice, sent",
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("get_weather", {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_tool_choice_is_a_function_calling_mode(choice, sent):
    body = gw.build_request(with_settings(tool_choice=choice), HI, "m", stream=False)
    assert body["toolConfig"] == {"functionCallingConfig": sent}


def test_a_forced_tool_choice_ends_once_a_tool_answered_and_goes_only_beside_tools():
    answered = [
        *HI,
        AssistantMessage(tool_calls=[call("c1")]),
        ToolMessage(call_id="c1", name="get_weather", content="x"),
    ]
    assert "toolConfig" not in gw.build_request(with_settings(tool_choice="required"), answered, "m", stream=False)
    bare = with_settings(AgentSpec(name="b"), tool_choice="required")
    assert "toolConfig" not in gw.build_request(bare, HI, "m", stream=False)


def test_extra_body_is_merged_last_and_its_generation_config_key_by_key():
    agent = with_settings(temperature=0.3, extra_body={"generationConfig": {"topK": 40, "temperature": 1.0}, "x": 1})
    body = gw.build_request(agent, HI, "m", stream=False)
    assert body["generationConfig"] == {"temperature": 1.0, "topK": 40} and body["x"] == 1


@pytest.mark.parametrize("key", ["contents", "systemInstruction", "system_instruction", "cachedContent", "tools"])
def test_extra_body_may_not_set_geminis_transcript_or_server_side_context(key):
    with pytest.raises(wire.BadSettings, match=f"extra_body may not set {key}:"):
        gw.build_request(with_settings(extra_body={key: "x"}), HI, "m", stream=False)


PYDANTIC_SCHEMA = {
    "$defs": {"City": {"properties": {"name": {"title": "Name", "type": "string"}}, "title": "City", "type": "object"}},
    "properties": {
        "cities": {"items": {"$ref": "#/$defs/City"}, "type": "array"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "additionalProperties": False,
    "title": "Report",
    "type": "object",
}


def test_typed_output_and_tools_go_as_json_schema_unchanged():
    agent = AGENT.model_copy(
        update={
            "output_schema": PYDANTIC_SCHEMA,
            "output_name": "Report",
            "tools": [ToolSpec(name="plan", parameters=PYDANTIC_SCHEMA)],
            "handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
        }
    )
    body = gw.build_request(agent, HI, "m", stream=False)
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseJsonSchema"] == PYDANTIC_SCHEMA  # $defs, $ref, anyOf, titles kept
    declarations = body["tools"][0]["functionDeclarations"]
    assert declarations[0]["parametersJsonSchema"] == PYDANTIC_SCHEMA
    assert declarations[1] == {
        "name": "transfer_to_billing",
        "description": "Hand off to the billing agent to handle the request.",
        "parametersJsonSchema": {"type": "object", "properties": {}},
    }


# -------------------------------------------------------------------------------- the reply


def reply_body(parts: list[dict[str, Any]] | None, finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": 100,
            "toolUsePromptTokenCount": 10,
            "cachedContentTokenCount": 64,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 160,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
        **extra,
    }


PARTS = [
    {"text": "I should check the weather.", "thought": True, "thoughtSignature": "THOUGHT"},
    {"text": "Checking "},
    {"text": "both."},
    {"functionCall": {"id": "g1", "name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "SIG"},
    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
    {"executableCode": {"code": "print(1)"}},
]


def test_a_reply_reads_text_calls_signatures_and_usage_but_never_thoughts_as_text():
    reply = gw.parse_response(reply_body(PARTS), turn=4)
    assert reply.message.content == "Checking both."
    assert [(c.call_id, c.provider_id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_4_0", "g1", "get_weather", '{"city": "Oslo"}'),
        ("call_4_1", "", "get_weather", '{"city": "Rome"}'),
    ]
    assert [(t.provider, t.kind, t.signature, t.call_id) for t in reply.message.thinking] == [
        ("gemini", "signature", "THOUGHT", ""),
        ("gemini", "signature", "SIG", "call_4_0"),
    ]
    u = reply.usage
    # input: the prompt and the tool-use prompt; output: the candidates and the thoughts, billed alike
    assert (u.requests, u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (1, 110, 64, 50, 30)
    assert (reply.finish_reason, reply.model, reply.response_id) == ("tool_calls", "gemini-2.5-flash", "resp-1")


def test_what_a_reply_sends_back_is_what_came():
    """Parsed, then built again: the signature on its call, the provider's ids, the text."""
    reply = gw.parse_response(reply_body(PARTS), turn=1)
    results = [ToolMessage(call_id=c.call_id, name=c.name, content="x") for c in reply.message.tool_calls]
    contents = gw.build_request(AGENT, [*HI, reply.message, *results], "m", stream=False)["contents"]
    assert contents[1]["parts"][0] == {"text": "Checking both.", "thoughtSignature": "THOUGHT"}
    assert contents[1]["parts"][1]["thoughtSignature"] == "SIG"
    assert "id" not in contents[1]["parts"][1]["functionCall"]  # one of the two calls had no id
    assert "thoughtSignature" not in contents[1]["parts"][2]


@pytest.mark.parametrize(
    "finish, expected",
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("LANGUAGE", "language"),
        ("OTHER", "other"),
        ("UNEXPECTED_TOOL_CALL", "unexpected_tool_call"),
        (None, None),
    ],
)
def test_finish_reasons_are_said_in_chats_words(finish, expected):
    assert gw.parse_response(reply_body([{"text": "partial"}], finish), 1).finish_reason == expected


@pytest.mark.parametrize("finish", ["MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"])
def test_a_call_the_model_failed_to_write_is_malformed_so_it_is_tried_again(finish):
    body = reply_body(None, finish)
    body["candidates"][0]["finishMessage"] = "Malformed function call: print(default_api.get_weather(city=Oslo"
    with pytest.raises(wire.MalformedResponse, match=f"Gemini stopped with {finish}: Malformed function call"):
        gw.parse_response(body, 1)


def test_a_withheld_reply_and_a_blocked_prompt_say_so_as_a_content_filter_reply():
    withheld = gw.parse_response(reply_body(None, "SAFETY"), 1)
    assert (withheld.message.content, withheld.finish_reason) == (
        "[Gemini withheld the reply: SAFETY]",
        "content_filter",
    )
    partial = gw.parse_response(reply_body([{"text": "Here is how to"}], "SAFETY"), 1)
    assert (partial.message.content, partial.finish_reason) == ("Here is how to", "content_filter")
    blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "The prompt was blocked."},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": "gemini-x",
    }
    reply = gw.parse_response(blocked, 1)
    assert reply.message.content == "[Gemini blocked the prompt: PROHIBITED_CONTENT: The prompt was blocked.]"
    assert (reply.finish_reason, reply.message.tool_calls, reply.usage.input_tokens) == ("content_filter", [], 12)


@pytest.mark.parametrize(
    "body, detail",
    [
        ([], "not a JSON object"),
        ({}, "no candidates"),
        ({"candidates": []}, "no candidates"),
        ({"candidates": [], "promptFeedback": {}}, "no candidates"),
        ({"candidates": ["x"]}, "candidates\\[0\\] is not a JSON object"),
        ({"candidates": [{"content": {"parts": {"text": "x"}}}]}, "content.parts is not a list"),
        ({"candidates": [{"content": {"parts": ["x"]}}]}, "a content part is not a JSON object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": "f"}]}}]}, "functionCall is not an object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}, "without a function name"),
        ({"error": {"code": 500, "message": "oops", "status": "INTERNAL"}}, "an error in a 200 body: INTERNAL: oops"),
    ],
)
def test_malformed_replies_are_named(body, detail):
    with pytest.raises(wire.MalformedResponse, match=detail):
        gw.parse_response(body, 1)


def test_odd_counts_missing_fields_and_lone_surrogates_are_taken_in_safely():
    body = reply_body([{"text": "Tok\ud800yo"}, {"functionCall": {"name": 7}}], "STOP")
    body["usageMetadata"] = {
        "promptTokenCount": float("nan"),
        "candidatesTokenCount": 10**30,
        "thoughtsTokenCount": -5,
        "cachedContentTokenCount": "12",
        "toolUsePromptTokenCount": True,
    }
    body["modelVersion"], body["responseId"] = "m" * 10_000, ["not", "a", "label"]
    reply = gw.parse_response(body, 1)
    assert reply.message.content == "Tok\ufffdyo"
    assert [(c.name, c.arguments) for c in reply.message.tool_calls] == [("7", "{}")]
    u = reply.usage
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (0, 0, wire.MAX_COUNT, 0)
    assert reply.model == "m" * wire.MAX_LABEL and reply.response_id is None
    assert gw.parse_response(reply_body([{"text": "x"}], usageMetadata=None), 1).usage.input_tokens == 0


def test_a_key_echoed_anywhere_is_masked_signatures_included():
    mask = Redactor(KEY).text
    body = reply_body([{"text": f"key {KEY}", "thoughtSignature": f"S{KEY}"}], f"{KEY}_REASON")
    body["modelVersion"] = KEY
    reply = gw.parse_response(body, 1, mask=mask)
    assert KEY not in reply.model_dump_json()
    assert reply.message.content == "key ***" and reply.finish_reason == "***_reason" and reply.model == "***"


def body_with(arguments: object) -> dict[str, Any]:
    return reply_body([{"functionCall": {"name": "f", "args": arguments}}])


@pytest.mark.parametrize(
    "arguments, why",
    [
        (json.loads("[" * 100 + "]" * 100), "nested deeper than 64 levels"),
        ({"s": "x" * (bounds.MAX_CHARS + 1)}, "longer than 1,048,576 characters"),
    ],
)
async def test_arguments_past_the_bounds_are_replaced_by_why_streamed_or_not(arguments, why):
    plain = gw.parse_response(body_with(arguments), 1).message.tool_calls[0].arguments
    streamed = (await gw.parse_stream(lines(*chunks(body_with(arguments))), 1)).message.tool_calls[0].arguments
    assert plain == streamed == bounds.refused(why)


async def test_arguments_as_text_pass_as_they_are_and_a_lone_surrogate_is_written_again_clean():
    assert gw.parse_response(body_with('{"a": 1,'), 1).message.tool_calls[0].arguments == '{"a": 1,'
    clean = gw.parse_response(body_with({"city": "Tok\ud800yo"}), 1).message.tool_calls[0].arguments
    assert json.loads(clean) == {"city": "Tok\ufffdyo"}


def test_googles_error_bodies_give_the_providers_message_and_the_usual_retry_rules():
    def google(status: int, name: str, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.Response(
            status, json={"error": {"code": status, "message": message, "status": name}}, headers=headers
        )

    bad = errors.from_status(google(400, "INVALID_ARGUMENT", 'Invalid JSON payload received. Unknown name "x"'))
    assert bad.non_retryable and 'Unknown name "x"' in bad.message and bad.type == "ModelHTTP400"
    busy = errors.from_status(google(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted", {"Retry-After": "3"}))
    assert not busy.non_retryable and "Resource has been exhausted" in busy.message
    assert busy.next_retry_delay is not None and busy.next_retry_delay.total_seconds() == 3
    down = errors.from_status(google(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
    assert not down.non_retryable and "overloaded" in down.message
    echoed = errors.from_status(google(400, "INVALID_ARGUMENT", f"API key not valid: {KEY}"), redactor=Redactor(KEY))
    assert KEY not in echoed.message and "API key not valid" in echoed.message


# ------------------------------------------------------------------------------- the stream


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


def event(payload: object) -> list[str]:
    return [f"data: {json.dumps(payload)}\r\n", "\r\n"]


def chunks(body: dict[str, Any], size: int = 1) -> list[str]:
    """`body` streamed as Gemini streams it: its parts `size` at a time, text cut in two, the
    finishReason and the whole usage on the last chunk only."""
    candidate = body["candidates"][0]
    parts: list[dict[str, Any]] = []
    for part in candidate.get("content", {}).get("parts", []):
        text = part.get("text")
        if isinstance(text, str) and len(text) > 1 and "thoughtSignature" not in part and not part.get("thought"):
            parts += [{**part, "text": text[: len(text) // 2]}, {**part, "text": text[len(text) // 2 :]}]
        else:
            parts.append(part)
    head = {k: v for k, v in body.items() if k in ("modelVersion", "responseId")}
    out: list[str] = []
    for i in range(0, len(parts), size):
        piece = {"content": {"role": "model", "parts": parts[i : i + size]}, "index": 0}
        out += event({"candidates": [piece], "usageMetadata": {"promptTokenCount": 1}, **head})
    last = {k: v for k, v in candidate.items() if k != "content"}
    return [*out, *event({"candidates": [last], "usageMetadata": body.get("usageMetadata"), **head})]


async def test_a_stream_assembles_the_same_reply_as_the_whole_body_and_shows_answer_text_only():
    seen: list[str] = []
    streamed = await gw.parse_stream(lines(": keep-alive\n", "\n", *chunks(reply_body(PARTS))), 4, on_delta=seen.append)
    assert streamed == gw.parse_response(reply_body(PARTS), 4)
    assert seen == ["Chec", "king ", "bo", "th."]  # never the thought


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6),
    st.integers(1, 4),
    st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY"]),
)
async def test_any_chunking_of_a_reply_parses_as_the_whole_reply(texts, size, finish):
    parts: list[dict[str, Any]] = [{"text": t} for t in texts]
    parts.insert(len(parts) // 2, {"functionCall": {"name": "f", "args": {"n": len(texts)}}, "thoughtSignature": "S"})
    body = reply_body(parts, finish)
    assert await gw.parse_stream(lines(*chunks(body, size)), 2) == gw.parse_response(body, 2)


async def test_a_stream_without_its_finish_reason_is_never_an_answer():
    cut = chunks(reply_body([{"text": "half an answer"}]))[:-2]
    with pytest.raises(wire.StreamFailed, match="stream ended before its finishReason"):
        await gw.parse_stream(lines(*cut), 1)
    with pytest.raises(wire.StreamFailed, match="before its finishReason"):
        await gw.parse_stream(lines(), 1)


async def test_an_error_object_mid_stream_fails_the_call():
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    stream = [*chunks(reply_body([{"text": "half"}]))[:-2], *event(error)]
    with pytest.raises(wire.StreamFailed, match="error event mid-stream: UNAVAILABLE: The model is overloaded"):
        await gw.parse_stream(lines(*stream), 1)


async def test_content_after_the_finish_reason_is_malformed():
    late = event({"candidates": [{"content": {"parts": [{"text": "more"}]}}]})
    with pytest.raises(wire.MalformedResponse, match="content after the finishReason"):
        await gw.parse_stream(lines(*chunks(reply_body([{"text": "done"}])), *late), 1)
    usage_only = event({"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}})
    reply = await gw.parse_stream(lines(*chunks(reply_body([{"text": "done"}])), *usage_only), 1)
    assert reply.usage.input_tokens == 5  # the last usage wins


async def test_a_blocked_prompt_streams_as_one_chunk_and_is_an_answer():
    blocked = event({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    reply = await gw.parse_stream(lines(*blocked), 1)
    assert (reply.message.content, reply.finish_reason) == ("[Gemini blocked the prompt: SAFETY]", "content_filter")


async def test_a_stream_past_the_limit_or_with_too_many_calls_is_malformed():
    body = reply_body([{"text": "x" * 30}, {"functionCall": {"name": "f", "args": {"a": "yy"}}}])
    assert (await gw.parse_stream(lines(*chunks(body)), 1, limit=41)).message.content == "x" * 30
    with pytest.raises(wire.MalformedResponse, match="reply longer than 40 characters"):
        await gw.parse_stream(lines(*chunks(body)), 1, limit=40)
    many = reply_body([{"functionCall": {"name": "f"}}] * (wire.MAX_TOOL_CALLS + 1))
    with pytest.raises(wire.MalformedResponse, match=f"more than {wire.MAX_TOOL_CALLS} tool calls"):
        await gw.parse_stream(lines(*chunks(many, size=200)), 1)
    with pytest.raises(wire.MalformedResponse, match="tool calls in one reply"):
        gw.parse_response(many, 1)


@pytest.mark.parametrize("text", ["[" * 5000, '{"n": ' + "1" * 5000 + "}", '{"a": NaN}', "[1]"])
async def test_events_past_the_bounds_or_not_objects_are_malformed(text):
    with pytest.raises(wire.MalformedResponse, match="stream event is not"):
        await gw.parse_stream(lines(f"data: {text}\n", "\n"), 1)
