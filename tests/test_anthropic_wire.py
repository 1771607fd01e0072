"""Anthropic's Messages API on the wire (activities/anthropic_wire.py): pure, no server."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.activities import anthropic_wire as aw
from durable_agent_runner.activities import errors, wire
from durable_agent_runner.machine import bounds
from durable_agent_runner.redact import Redactor
from durable_agent_runner.testing.fake_llm import anthropic as fake_anthropic
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    HandoffSpec,
    Message,
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
)
HI: list[Message] = [UserMessage(content="hi")]
SIGNED = Thinking(provider="anthropic", text="Tokyo first.", signature="sig==")
TOOL_TURN: list[Message] = [
    UserMessage(content="Weather in Tokyo?"),
    AssistantMessage(
        content="Looking.",
        tool_calls=[
            ToolCall(call_id="call_0_0", name="get_weather", arguments='{"city":"Tokyo"}'),
            ToolCall(call_id="call_0_1", name="get_weather", arguments="not json"),
        ],
        thinking=[SIGNED, Thinking(provider="anthropic", kind="redacted_thinking", data="opaque")],
    ),
    ToolMessage(call_id="call_0_0", name="get_weather", content='{"temp": 22}'),
    ToolMessage(call_id="call_0_1", name="get_weather", content="invalid arguments", is_error=True),
]


def with_settings(agent: AgentSpec = AGENT, **fields: Any) -> AgentSpec:
    return agent.model_copy(update={"settings": ModelSettings(**fields)})


def uncached(agent: AgentSpec = AGENT) -> AgentSpec:
    return agent.model_copy(update={"prompt_cache": "off"})


async def lines(*items: str):
    for item in items:
        yield item


# --------------------------------------------------------------------------------- requests


def test_request_maps_the_transcript_to_alternating_messages_with_paired_blocks():
    body = aw.build_request(uncached(), TOOL_TURN, "claude-x", stream=False)
    assert body["model"] == "claude-x" and body["max_tokens"] == aw.DEFAULT_MAX_TOKENS and "stream" not in body
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Tokyo?"}]},
        {
            "role": "assistant",
            "content": [  # thinking first, exactly as received; then text; then the calls
                {"type": "thinking", "thinking": "Tokyo first.", "signature": "sig=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "call_0_0", "name": "get_weather", "input": {"city": "Tokyo"}},
                {"type": "tool_use", "id": "call_0_1", "name": "get_weather", "input": {}},  # not JSON: {}
            ],
        },
        {
            "role": "user",  # both results in one message
            "content": [
                {"type": "tool_result", "tool_use_id": "call_0_0", "content": '{"temp": 22}'},
                {"type": "tool_result", "tool_use_id": "call_0_1", "content": "invalid arguments", "is_error": True},
            ],
        },
    ]
    assert body["tools"] == [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}}]
    assert aw.build_request(uncached(), TOOL_TURN, "m", stream=True)["stream"] is True


def test_other_providers_thinking_is_dropped_and_empty_messages_are_left_out():
    messages: list[Message] = [
        UserMessage(content="a"),
        AssistantMessage(content="", thinking=[Thinking(provider="gemini", kind="signature", data="g")]),
        UserMessage(content="b"),
        AssistantMessage(content="ok", thinking=[Thinking(provider="gemini", kind="signature", data="g")]),
        UserMessage(content=""),
        UserMessage(content="c"),
    ]
    body = aw.build_request(uncached(AgentSpec(name="b")), messages, "m", stream=False)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [{"type": "text", "text": "c"}]},
    ]
    assert "system" not in body and "tools" not in body


def test_a_transcript_that_begins_with_the_model_gets_a_user_turn_first():
    """An edit that dropped the prompt (`edit --drop 0`) leaves the model's reply first, which
    Anthropic refuses ('first message must use the "user" role'): the wire opens with a user turn."""
    reply = AssistantMessage(content="Looking.", tool_calls=[ToolCall(call_id="c", name="get_weather", arguments="{}")])
    body = aw.build_request(uncached(), [reply, ToolMessage(call_id="c", name="get_weather", content="22")], "m", False)
    assert body["messages"][0] == {"role": "user", "content": [{"type": "text", "text": wire.OPENING}]}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    fake_anthropic.parse(body)  # the test double, as strict as the API, takes it
    assert aw.build_request(uncached(), HI, "m", stream=False)["messages"][0]["content"][0]["text"] == "hi"


def test_a_user_message_beside_tool_results_comes_after_them():
    messages = [*TOOL_TURN[:3], UserMessage(content="also Paris"), TOOL_TURN[3]]
    content = aw.build_request(uncached(), messages, "m", stream=False)["messages"][2]["content"]
    assert [b["type"] for b in content] == ["tool_result", "tool_result", "text"]


def test_every_setting_goes_out_under_its_anthropic_name():
    agent = with_settings(temperature=0.3, top_p=0.9, max_output_tokens=50, stop=["END"], tool_choice="get_weather")
    body = aw.build_request(uncached(agent), HI, "m", stream=False)
    sent = {k: v for k, v in body.items() if k not in ("model", "messages", "tools", "system")}
    assert sent == {
        "max_tokens": 50,
        "temperature": 0.3,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "get_weather"},
    }


@pytest.mark.parametrize(
    "choice, parallel, sent",
    [
        (None, None, None),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("auto", None, {"type": "auto"}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
    ],
)
def test_tool_choice_maps_to_anthropics_objects(choice, parallel, sent):
    body = aw.build_request(with_settings(tool_choice=choice, parallel_tool_calls=parallel), HI, "m", stream=False)
    assert body.get("tool_choice") == sent
    if choice != "get_weather":  # naming a tool the agent lacks is refused (test_chat_wire.py)
        bare = with_settings(AgentSpec(name="b"), tool_choice=choice, parallel_tool_calls=parallel)
        assert "tool_choice" not in aw.build_request(bare, HI, "m", stream=False)  # only beside tools


def test_a_thinking_budget_raises_max_tokens_and_reasoning_effort_is_adaptive_thinking():
    body = aw.build_request(with_settings(thinking_tokens=2000), HI, "m", stream=False)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000} and "output_config" not in body
    assert body["max_tokens"] == aw.DEFAULT_MAX_TOKENS + 2000
    given_cap = aw.build_request(with_settings(thinking_tokens=2000, max_output_tokens=5000), HI, "m", stream=False)
    assert given_cap["max_tokens"] == 5000
    for effort, sent in [("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high")]:
        body = aw.build_request(with_settings(reasoning_effort=effort), HI, "m", stream=False)
        assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": sent}
        assert body["max_tokens"] == aw.ADAPTIVE_MAX_TOKENS


@pytest.mark.parametrize(
    "fields, line",
    [
        ({"seed": 7}, "seed: Anthropic's Messages API has no seed"),
        ({"temperature": 1.5}, "temperature: Anthropic takes 0 to 1"),
        ({"thinking_tokens": 2000, "temperature": 0.5}, "temperature: Anthropic refuses a temperature with thinking"),
        ({"reasoning_effort": "low", "top_p": 0.5}, "top_p: with extended thinking"),
        ({"thinking_tokens": 2000, "tool_choice": "required"}, "tool_choice: Anthropic refuses a forced tool choice"),
        ({"thinking_tokens": 2000, "max_output_tokens": 2000}, "max_output_tokens: must exceed the thinking budget"),
        ({"thinking_tokens": 2000, "reasoning_effort": "low"}, "reasoning_effort: give thinking_tokens (a budget) or"),
        ({"stop": ["  "]}, "stop: Anthropic refuses a stop sequence of only whitespace"),
    ],
)
def test_settings_anthropic_refuses_are_named_and_never_sent(fields, line):
    assert any(found.startswith(line) for found in aw.check_settings(ModelSettings(**fields)))
    with pytest.raises(wire.BadSettings, match=line.split(":")[0]):
        aw.build_request(with_settings(**fields), HI, "m", stream=False)


def test_settings_anthropic_takes_are_not_refused():
    ok = ModelSettings(thinking_tokens=2000, top_p=0.97, tool_choice="auto", max_output_tokens=4000, stop=["END"])
    assert aw.check_settings(ok) == [] and aw.check_settings(ModelSettings(temperature=1.0)) == []


def test_thinking_is_left_out_when_the_last_tool_turn_has_no_signed_block():
    """A transcript another provider wrote (a fallback): the API would refuse thinking here."""
    unsigned = [TOOL_TURN[0], AssistantMessage(tool_calls=TOOL_TURN[1].tool_calls), *TOOL_TURN[2:]]  # type: ignore[union-attr]
    assert "thinking" not in aw.build_request(with_settings(thinking_tokens=2000), unsigned, "m", stream=False)
    assert "thinking" in aw.build_request(with_settings(thinking_tokens=2000), TOOL_TURN, "m", stream=False)


def test_extra_body_is_merged_last_and_may_not_set_the_system_prompt():
    body = aw.build_request(with_settings(extra_body={"top_k": 5, "metadata": {"user_id": "u"}}), HI, "m", False)
    assert body["top_k"] == 5 and body["metadata"] == {"user_id": "u"}
    with pytest.raises(wire.BadSettings, match="extra_body may not set system"):
        aw.build_request(with_settings(extra_body={"system": "x"}), HI, "m", stream=False)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_typed_output_is_an_output_tool_the_model_must_call_when_it_has_no_other():
    typed = uncached(AGENT.model_copy(update={"output_schema": SCHEMA, "output_name": "City"}))
    body = aw.build_request(typed, HI, "m", stream=False)
    assert body["tools"][-1]["name"] == aw.OUTPUT_TOOL and body["tools"][-1]["input_schema"] == SCHEMA
    assert "City" in body["tools"][-1]["description"]
    assert body["tool_choice"] == {"type": "any"}  # a function tool or the output
    alone = typed.model_copy(update={"tools": []})
    assert aw.build_request(alone, HI, "m", False)["tool_choice"] == {"type": "tool", "name": aw.OUTPUT_TOOL}
    none = with_settings(typed, tool_choice="none")
    assert aw.build_request(none, HI, "m", False)["tool_choice"] == {"type": "tool", "name": aw.OUTPUT_TOOL}
    thinking = with_settings(typed, thinking_tokens=2000)  # the API refuses a forced choice with thinking
    assert aw.build_request(thinking, HI, "m", False)["tool_choice"] == {"type": "auto"}
    quiet = with_settings(typed, thinking_tokens=2000, tool_choice="none")
    assert aw.build_request(quiet, HI, "m", False)["tool_choice"] == {"type": "none"}


def test_a_typed_output_that_is_not_an_object_is_wrapped_with_its_defs_at_the_top():
    schema = {"type": "array", "items": {"$ref": "#/$defs/C"}, "$defs": {"C": SCHEMA}}
    typed = uncached(AgentSpec(name="b", output_schema=schema, output_name="list[C]"))
    tool = aw.build_request(typed, HI, "m", stream=False)["tools"][0]
    assert tool["name"] == aw.OUTPUT_VALUE_TOOL
    assert tool["input_schema"] == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/C"}}},
        "required": ["value"],
        "$defs": {"C": SCHEMA},
    }


def test_a_tool_named_as_the_output_tool_is_refused():
    clash = AgentSpec(name="b", tools=[ToolSpec(name=aw.OUTPUT_TOOL)])
    with pytest.raises(wire.BadSettings, match="may not be named final_output"):
        aw.build_request(clash, HI, "m", stream=False)


def test_a_tool_without_a_description_is_sent_without_one():
    bare = AgentSpec(name="b", tools=[ToolSpec(name="ping")], prompt_cache="off")
    assert aw.build_request(bare, HI, "m", False)["tools"] == [
        {"name": "ping", "input_schema": bare.tools[0].parameters}
    ]


def test_handoffs_are_tools_without_arguments():
    agent = uncached(
        AGENT.model_copy(update={"handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing")]})
    )
    tools = aw.build_request(agent, HI, "m", stream=False)["tools"]
    assert tools[1] == {
        "name": "transfer_to_billing",
        "description": "Hand off to the billing agent to handle the request.",
        "input_schema": {"type": "object", "properties": {}},
    }


# ------------------------------------------------------------------------------ prompt caching


def marked(body: dict[str, Any]) -> list[str]:
    """Where the breakpoints are: 'tools', 'system', or 'messages.i.j'."""
    found = [f"tools.{i}" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    found += [f"system.{i}" for i, b in enumerate(system) if "cache_control" in b] if isinstance(system, list) else []
    for i, m in enumerate(body["messages"]):
        found += [f"messages.{i}.{j}" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return found


def test_cache_breakpoints_sit_on_the_stable_prefix():
    body = aw.build_request(AGENT, TOOL_TURN, "m", stream=False)
    # the last tool, the system prompt, the latest message, the message before the latest user turn
    assert marked(body) == ["tools.0", "system.0", "messages.1.4", "messages.2.1"]
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    hour = aw.build_request(AGENT.model_copy(update={"prompt_cache": "1h"}), TOOL_TURN, "m", stream=False)
    assert hour["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    off = aw.build_request(uncached(), TOOL_TURN, "m", stream=False)
    assert marked(off) == [] and off["system"] == "Be brief."


def test_thinking_blocks_never_carry_a_breakpoint():
    only_thinking = AssistantMessage(thinking=[SIGNED])
    body = aw.build_request(
        AgentSpec(name="b"), [UserMessage(content="a"), only_thinking, UserMessage(content="b")], "m", False
    )
    assert marked(body) == ["messages.2.0"]


_texts = st.text(alphabet="ab ", max_size=3)
_message = st.one_of(
    st.builds(lambda t: UserMessage(content=t), _texts),
    st.builds(
        lambda t, n, think: AssistantMessage(
            content=t or None,
            tool_calls=[ToolCall(call_id=f"c{i}", name="get_weather", arguments="{}") for i in range(n)],
            thinking=[SIGNED] if think else [],
        ),
        _texts,
        st.integers(0, 3),
        st.booleans(),
    ),
    st.builds(lambda i, t: ToolMessage(call_id=f"c{i}", name="get_weather", content=t), st.integers(0, 3), _texts),
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(_message, max_size=12),
    instructions=st.sampled_from(["", "Be brief."]),
    tools=st.booleans(),
    ttl=st.sampled_from(["5m", "1h"]),
)
def test_never_more_than_four_breakpoints_and_roles_alternate(messages, instructions, tools, ttl):
    agent = AgentSpec(name="p", instructions=instructions, tools=AGENT.tools if tools else [], prompt_cache=ttl)
    body = aw.build_request(agent, messages, "m", stream=False)
    assert len(marked(body)) <= aw.MAX_BREAKPOINTS
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert roles[:1] in ([], ["user"])  # the API refuses a first message that is not the user's
    assert all(m["content"] for m in body["messages"])
    assert all(b.get("text", "x") for m in body["messages"] for b in m["content"])  # no empty text block


# --------------------------------------------------------------------------------- replies

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "Two cities.", "signature": "s1"},
        {"type": "redacted_thinking", "data": "d1"},
        {"type": "text", "text": "Checking "},
        {"type": "text", "text": "both."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Tokyo"}},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
        "output_tokens": 40,
        "output_tokens_details": {"thinking_tokens": 12},
    },
}


def test_response_parses_text_calls_thinking_and_usage():
    reply = aw.parse_response(MESSAGE, turn=3)
    assert reply.message.content == "Checking both." and reply.finish_reason == "tool_calls"
    assert [(c.call_id, c.provider_id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_3_0", "toolu_a", "get_weather", '{"city": "Tokyo"}'),
        ("call_3_1", "toolu_a", "get_weather", '{"city": "Paris"}'),
    ]
    assert reply.message.thinking == [
        Thinking(provider="anthropic", kind="thinking", text="Two cities.", signature="s1"),
        Thinking(provider="anthropic", kind="redacted_thinking", data="d1"),
    ]
    u = reply.usage
    assert (u.input_tokens, u.cached_tokens, u.cache_write_tokens, u.output_tokens, u.reasoning_tokens) == (
        3210,
        3000,
        200,
        40,
        12,
    )
    assert (reply.model, reply.response_id) == ("claude-x", "msg_1")


def test_thinking_goes_back_exactly_as_it_came():
    reply = aw.parse_response(MESSAGE, turn=0)
    sent = aw.build_request(uncached(), [UserMessage(content="q"), reply.message], "m", stream=False)
    assert sent["messages"][1]["content"][:2] == MESSAGE["content"][:2]


@pytest.mark.parametrize(
    "stop, finish",
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("pause_turn", "length"),
        ("refusal", "content_filter"),
        ("something_new", "something_new"),
        (None, None),
    ],
)
def test_stop_reasons_take_chats_names(stop, finish):
    body = {"content": [{"type": "text", "text": "x"}], "stop_reason": stop}
    assert aw.parse_response(body, 0).finish_reason == finish


def test_the_output_tools_call_is_the_replys_json_text():
    body = {
        "content": [
            {"type": "text", "text": "Here it is:"},
            {"type": "tool_use", "id": "t", "name": aw.OUTPUT_TOOL, "input": {"city": "Rome"}},
        ],
        "stop_reason": "tool_use",
    }
    reply = aw.parse_response(body, 0)
    assert json.loads(reply.message.content or "") == {"city": "Rome"}
    assert reply.message.tool_calls == [] and reply.finish_reason == "stop"
    wrapped = {"content": [{"type": "tool_use", "id": "t", "name": aw.OUTPUT_VALUE_TOOL, "input": {"value": [1, 2]}}]}
    assert aw.parse_response(wrapped, 0).message.content == "[1, 2]"


@pytest.mark.parametrize(
    "body, detail",
    [
        ([], "not a JSON object"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded_error"),
        ({"content": "text"}, "no content"),
        ({"content": ["x"]}, "content block is not a JSON object"),
        ({"content": [{"type": "tool_use", "id": "a", "input": {}}]}, "without a function name"),
        ({"content": [{"type": "thinking", "thinking": "t"}]}, "without its text or signature"),
        ({"content": [{"type": "redacted_thinking"}]}, "without data"),
    ],
)
def test_malformed_messages_are_named(body, detail):
    with pytest.raises(wire.MalformedResponse, match=detail):
        aw.parse_response(body, 1)


def test_hostile_values_are_normalized():
    key = "sk-ant-secret-0123456789abcdef"
    body = {
        "id": "i" * 10_000,
        "model": key,
        "content": [
            {"type": "text", "text": f"lone \ud800 and {key}"},
            {"type": "tool_use", "id": 7, "name": 7, "input": '{"a": 1}'},
        ],
        "stop_reason": "f" * 10_000,
        "usage": {"input_tokens": -5, "cache_read_input_tokens": float("nan"), "output_tokens": 10**30},
    }
    reply = aw.parse_response(body, 2, mask=Redactor(key).text)
    assert reply.message.content == "lone \ufffd and ***" and key not in (reply.model or "")
    call = reply.message.tool_calls[0]
    assert (call.name, call.arguments, call.provider_id) == ("7", '{"a": 1}', "")
    assert len(reply.response_id or "") == wire.MAX_LABEL and len(reply.finish_reason or "") == wire.MAX_LABEL
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (0, wire.MAX_COUNT)
    huge = {"input_tokens": 10**30, "cache_read_input_tokens": 10**30, "cache_creation_input_tokens": 10**30}
    assert aw.parse_usage(huge).input_tokens == wire.MAX_COUNT


def test_a_key_in_thinking_never_reaches_the_transcript():
    key = "sk-ant-secret-0123456789abcdef"
    body = {
        "content": [
            {"type": "thinking", "thinking": f"the key is {key}", "signature": key},
            {"type": "redacted_thinking", "data": f"x{key}"},
        ]
    }
    reply = aw.parse_response(body, 0, mask=Redactor(key).text)
    assert key not in reply.model_dump_json() and reply.message.thinking[0].text == "the key is ***"


def test_too_many_tool_calls_are_malformed():
    calls = [{"type": "tool_use", "id": str(i), "name": "f", "input": {}} for i in range(wire.MAX_TOOL_CALLS + 1)]
    with pytest.raises(wire.MalformedResponse, match="tool calls in one reply"):
        aw.parse_response({"content": calls}, 1)


def test_anthropic_error_bodies_give_their_message_and_type_and_529_retries():
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    err = errors.from_status(httpx.Response(529, json=body, headers={"retry-after": "3"}))
    assert not err.non_retryable and "Overloaded" in err.message and err.next_retry_delay is not None
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}}
    refused = errors.from_status(httpx.Response(400, json=bad))
    assert refused.non_retryable and "max_tokens: Field required" in refused.message


# ---------------------------------------------------------------------------------- streams


def sse(payload: dict[str, Any]) -> list[str]:
    return [f"event: {payload['type']}\n", f"data: {json.dumps(payload)}\n", "\n"]


def stream_of(message: dict[str, Any], *, stop: bool = True, split: int = 4) -> list[str]:
    """A message as Anthropic streams it."""
    head = {**message, "content": [], "stop_reason": None, "usage": {**message.get("usage", {}), "output_tokens": 1}}
    out = sse({"type": "message_start", "message": head}) + sse({"type": "ping"})
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        start, deltas = dict(block), []
        if kind == "text":
            start["text"] = ""
            text = block["text"]
            deltas = [{"type": "text_delta", "text": text[j : j + split]} for j in range(0, len(text), split)]
        elif kind == "tool_use":
            start["input"] = {}
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[j : j + split]} for j in range(0, len(raw), split)
            ]
        elif kind == "thinking":
            start |= {"thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        out += sse({"type": "content_block_start", "index": i, "content_block": start})
        for d in deltas:
            out += sse({"type": "content_block_delta", "index": i, "delta": d})
        out += sse({"type": "content_block_stop", "index": i})
    delta = {"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}}
    out += sse({**delta, "usage": {"output_tokens": message.get("usage", {}).get("output_tokens", 0)}})
    return out + (sse({"type": "message_stop"}) if stop else [])


async def test_a_stream_parses_to_the_plain_messages_reply_and_shows_text_only():
    seen: list[str] = []
    streamed = await aw.parse_stream(lines(*stream_of(MESSAGE)), 3, on_delta=seen.append)
    assert streamed == aw.parse_response(MESSAGE, 3)
    assert "".join(seen) == "Checking both." and "Two" not in "".join(seen)  # never thinking


async def test_pings_comments_and_unknown_deltas_change_nothing():
    noisy = [": keep-alive\n", "\n", *sse({"type": "ping"})]
    events = stream_of(MESSAGE)
    mixed = [
        *noisy,
        *events[:12],
        *sse({"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta"}}),
        *events[12:],
    ]
    assert await aw.parse_stream(lines(*mixed), 3) == aw.parse_response(MESSAGE, 3)


async def test_a_stream_without_message_stop_is_never_an_answer():
    with pytest.raises(wire.StreamFailed, match="before message_stop"):
        await aw.parse_stream(lines(*stream_of(MESSAGE, stop=False)), 1)


async def test_an_error_event_fails_the_call_with_its_message_masked():
    key = "sk-ant-secret-0123456789abcdef"
    error = {"type": "error", "error": {"type": "overloaded_error", "message": f"Overloaded ({key})"}}
    with pytest.raises(wire.StreamFailed, match=r"overloaded_error: Overloaded \(\*\*\*\)"):
        await aw.parse_stream(lines(*stream_of(MESSAGE)[:12], *sse(error)), 1, mask=Redactor(key).text)


async def test_deltas_for_blocks_not_open_are_malformed():
    orphan = sse({"type": "content_block_delta", "index": 5, "delta": {"type": "text_delta", "text": "x"}})
    with pytest.raises(wire.MalformedResponse, match="content block 5, which is not open"):
        await aw.parse_stream(lines(*orphan, *sse({"type": "message_stop"})), 1)
    events = stream_of({"content": [{"type": "text", "text": "ab"}], "stop_reason": "end_turn"})
    late = sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "c"}})
    with pytest.raises(wire.MalformedResponse, match="not open"):
        await aw.parse_stream(lines(*events[:-6], *late, *events[-6:]), 1)


async def test_an_empty_stream_is_malformed():
    with pytest.raises(wire.MalformedResponse, match="no content block and no stop_reason"):
        await aw.parse_stream(lines(*sse({"type": "message_start", "message": {}}), *sse({"type": "message_stop"})), 1)


async def test_a_stream_assembling_more_than_the_limit_is_malformed():
    body = {
        "content": [{"type": "text", "text": "x" * 30}, {"type": "tool_use", "id": "t", "name": "f", "input": "y" * 10}]
    }
    assert (await aw.parse_stream(lines(*stream_of(body)), 1, limit=40)).message.content == "x" * 30
    with pytest.raises(wire.MalformedResponse, match="reply longer than 39 characters"):
        await aw.parse_stream(lines(*stream_of(body)), 1, limit=39)


async def test_too_many_blocks_in_a_stream_are_malformed():
    start = [
        line
        for i in range(aw.MAX_BLOCKS + 1)
        for line in sse({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
    ]
    with pytest.raises(wire.MalformedResponse, match="content blocks in one reply"):
        await aw.parse_stream(lines(*start), 1)


@pytest.mark.parametrize(
    "arguments, why",
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),
        ('{"n": ' + "7" * 5000 + "}", "a number longer than 100 characters"),
        ("[NaN]", "NaN is not JSON"),
    ],
)
async def test_arguments_past_the_bounds_are_replaced_by_why_when_streamed(arguments, why):
    body = {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": arguments}], "stop_reason": "tool_use"}
    streamed = await aw.parse_stream(lines(*stream_of(body, split=1000)), 1)
    assert streamed.message.tool_calls[0].arguments == bounds.refused(why)


@pytest.mark.parametrize("text", ["[" * 5000, '{"n": ' + "1" * 5000 + "}", '{"a": NaN}'])
async def test_events_past_the_bounds_are_malformed(text):
    with pytest.raises(wire.MalformedResponse, match="stream event is not JSON"):
        await aw.parse_stream(lines("event: content_block_delta\n", f"data: {text}\n", "\n"), 1)


# ------------------------------------------------------------------------ mutated replies


async def test_mutated_messages_give_a_valid_reply_or_a_named_failure_never_anything_else():
    """As tests/test_hostile_model.py does for the other wires: one random edit of a valid
    message or stream at a time, and only a valid reply or MalformedResponse / StreamFailed."""
    from tests.test_hostile_model import SEED, _lines, _mutate, _stream_lines, assert_valid

    rng = random.Random(SEED)
    events = [json.loads(line[len("data: ") :]) for line in stream_of(MESSAGE) if line.startswith("data: ")]
    outcomes = {"reply": 0, "failed": 0}
    for _ in range(400):
        try:
            assert_valid(aw.parse_response(_mutate(MESSAGE, rng), 3), 3)
            assert_valid(await aw.parse_stream(_lines(_stream_lines(events, rng)), 3, on_delta=str), 3)
            outcomes["reply"] += 1
        except (wire.MalformedResponse, wire.StreamFailed):
            outcomes["failed"] += 1
    assert outcomes["reply"] > 50 and outcomes["failed"] > 20, outcomes
