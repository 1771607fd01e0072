"""Gemini's wire checked against Google's own SDK (google-genai, a test dependency only): what the
runner sends validates as the SDK's request types (pydantic models that forbid unknown fields),
and what the fake sends is read by the SDK's own client, streamed and not, without error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from durable_agent_runner.activities import gemini_wire as gw
from durable_agent_runner.testing.fake_llm.server import LLMServer
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

KEY = "AIzaSy-sdk-test-key-0123456789"
SCHEMA = {
    "$defs": {"City": {"properties": {"name": {"type": "string"}}, "required": ["name"], "type": "object"}},
    "properties": {"cities": {"items": {"$ref": "#/$defs/City"}, "type": "array"}},
    "additionalProperties": False,
    "title": "Plan",
    "type": "object",
}
AGENT = AgentSpec(
    name="weather",
    instructions="Answer with the weather.",
    tools=[
        ToolSpec(
            name="get_weather",
            description="Weather.",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        ToolSpec(name="plan", description="Plan a trip.", parameters=SCHEMA),
    ],
    handoffs=[HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
)
TRANSCRIPT: list[Message] = [
    UserMessage(content="Weather in Oslo and Rome?"),
    AssistantMessage(
        content="Checking both.",
        tool_calls=[
            ToolCall(call_id="c1", name="get_weather", arguments='{"city": "Oslo"}', provider_id="g1"),
            ToolCall(call_id="c2", name="get_weather", arguments='{"city": "Rome"}', provider_id="g2"),
        ],
        thinking=[Thinking(provider="gemini", kind="signature", signature="c2lnbmVkIGJ5IGdlbWluaQ==", call_id="c1")],
    ),
    ToolMessage(call_id="c1", name="get_weather", content="rain"),
    ToolMessage(call_id="c2", name="get_weather", content="no such city", is_error=True),
    AssistantMessage(
        content="Rain in Oslo.", thinking=[Thinking(provider="gemini", kind="signature", signature="dGV4dA==")]
    ),
    UserMessage(content="And a plan?"),
    AssistantMessage(tool_calls=[ToolCall(call_id="c3", name="plan", arguments='{"cities": [{"name": "Oslo"}]}')]),
    ToolMessage(call_id="c3", name="plan", content="{}"),
]
SETTINGS = [
    ModelSettings(temperature=0.4, top_p=0.9, max_output_tokens=256, seed=3, stop=["END"], thinking_tokens=2048),
    ModelSettings(reasoning_effort="low", tool_choice="get_weather", extra_body={"generationConfig": {"topK": 40}}),
    ModelSettings(tool_choice="required"),
    ModelSettings(tool_choice="none", reasoning_effort="minimal"),
]


def same(model: Any, sent: object) -> None:
    """The SDK's model, written back as JSON, is what was sent: no field lost or renamed."""
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == sent


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("typed", [False, True])
def test_requests_validate_as_the_sdks_request_types(settings: ModelSettings, typed: bool):
    agent = AGENT.model_copy(update={"settings": settings, "output_schema": SCHEMA if typed else None})
    # Ending at the user's message, a forced tool_choice is sent; after a tool's answer, not.
    for messages in (TRANSCRIPT, TRANSCRIPT[:6]):
        check_request(gw.build_request(agent, messages, "gemini-2.5-flash", stream=False))


def check_request(body: dict[str, Any]) -> None:
    for content in body["contents"]:
        # JSON mode: the signatures are read as the base64 bytes the API takes
        same(types.Content.model_validate_json(json.dumps(content)), content)
    for tool in body["tools"]:
        same(types.Tool.model_validate(tool), tool)
    same(types.Content.model_validate(body["systemInstruction"]), body["systemInstruction"])
    if "toolConfig" in body:
        same(types.ToolConfig.model_validate(body["toolConfig"]), body["toolConfig"])
    generation = body.get("generationConfig", {})
    same(types.GenerationConfig.model_validate(generation), generation)
    # The SDK's own config type holds every field of the body but the contents.
    config = {
        **generation,
        **{k: body[k] for k in ("systemInstruction", "tools", "toolConfig") if k in body},
    }
    types.GenerateContentConfig.model_validate(config)
    assert set(body) <= {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}


def test_the_placeholder_signature_is_base64_the_api_can_read():
    part = gw.build_request(AGENT, TRANSCRIPT, "m", False)["contents"][-2]["parts"][0]
    assert part["thoughtSignature"] == gw.SKIP_SIGNATURE
    assert types.Part.model_validate_json(json.dumps(part)).thought_signature


def test_the_sdks_own_request_reads_back_through_the_fake_as_the_runners_does(server: LLMServer):
    """The SDK's request for the same conversation parses in the fake as the runner's does."""
    server.reset()
    model = server.add_script("echo", [{"content": "ok"}])
    client = client_for(server)
    config = types.GenerateContentConfig(
        system_instruction="Answer with the weather.",
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(name="get_weather", parameters_json_schema={"type": "object"})
                ]
            )
        ],
        temperature=0.4,
    )
    client.models.generate_content(model=model, contents="Weather in Oslo?", config=config)
    theirs = server.requests()[-1]["body"]
    agent = AGENT.model_copy(update={"tools": AGENT.tools[:1], "handoffs": [], "temperature": 0.4})
    ours = gw.build_request(agent, [UserMessage(content="Weather in Oslo?")], model, stream=False)
    for key in ("contents", "generationConfig"):
        assert theirs[key] == ours[key]
    assert theirs["systemInstruction"]["parts"] == ours["systemInstruction"]["parts"]


# ----------------------------------------------------------------- the SDK's client on the fake


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


def client_for(srv: LLMServer) -> genai.Client:
    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=srv.url, api_version="v1beta"))


TOOLS = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather", description="Weather.", parameters_json_schema={"type": "object"}
            )
        ]
    )
]


def script(srv: LLMServer) -> str:
    srv.reset()
    return srv.add_script(
        "sdk",
        [
            {
                "content": "Let me look.",
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"name": "get_weather", "arguments": {"city": "Rome"}},
                ],
                "usage": {
                    "prompt_tokens": 1200,
                    "completion_tokens": 30,
                    "reasoning_tokens": 10,
                    "cached_tokens": 1024,
                },
            },
            {"content": "Rain in Oslo, sun in Rome."},
        ],
    )


THINK = types.ThinkingConfig(thinking_budget=1024, include_thoughts=True)


def test_the_sdk_reads_the_fakes_replies_with_function_calls(server: LLMServer):
    model = script(server)
    client = client_for(server)
    config = types.GenerateContentConfig(tools=TOOLS, thinking_config=THINK)
    first = client.models.generate_content(model=model, contents="Weather in Oslo and Rome?", config=config)
    calls = first.function_calls or []
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("get_weather", {"city": "Oslo"}, "call_0_0"),
        ("get_weather", {"city": "Rome"}, "call_0_1"),
    ]
    candidate = (first.candidates or [])[0]
    assert candidate.finish_reason == types.FinishReason.STOP
    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
    assert [p.thought for p in parts][:1] == [True] and parts[2].thought_signature  # the first call is signed
    usage = first.usage_metadata
    assert usage is not None and (usage.prompt_token_count, usage.cached_content_token_count) == (1200, 1024)
    assert (usage.candidates_token_count, usage.thoughts_token_count) == (20, 10)
    assert first.model_version == model and first.response_id
    # The SDK sends the model turn back as it came (signature included): the fake accepts it.
    history = [
        types.Content(role="user", parts=[types.Part(text="Weather in Oslo and Rome?")]),
        candidate.content,
        types.Content(
            role="user",
            parts=[
                types.Part(function_response=types.FunctionResponse(id=c.id, name=c.name, response={"result": r}))
                for c, r in zip(calls, ["rain", "sun"], strict=True)
            ],
        ),
    ]
    second = client.models.generate_content(model=model, contents=history, config=config)
    assert second.text == "Rain in Oslo, sun in Rome."


def test_the_sdk_reads_the_fakes_streams_with_function_calls(server: LLMServer):
    model = script(server)
    client = client_for(server)
    config = types.GenerateContentConfig(tools=TOOLS, thinking_config=THINK)
    chunks = list(client.models.generate_content_stream(model=model, contents="Weather?", config=config))
    assert len(chunks) > 2
    texts = [
        p.text
        for c in chunks
        for p in ((c.candidates or [])[0].content or types.Content()).parts or []
        if p.text and not p.thought
    ]
    assert "".join(texts) == "Let me look."
    calls = [fc for c in chunks for fc in c.function_calls or []]
    assert [(fc.name, fc.args) for fc in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_weather", {"city": "Rome"}),
    ]
    last = chunks[-1]
    assert (last.candidates or [])[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None and last.usage_metadata.cached_content_token_count == 1024


def test_the_sdk_reads_a_safety_stop_and_a_blocked_prompt(server: LLMServer):
    server.reset()
    client = client_for(server)
    safety = client.models.generate_content(model=server.add_script("safety", [{"finish": "SAFETY"}]), contents="x")
    assert (safety.candidates or [])[0].finish_reason == types.FinishReason.SAFETY and safety.text is None
    blocked = client.models.generate_content(model=server.add_script("blocked", [{"blocked": "SAFETY"}]), contents="x")
    assert blocked.prompt_feedback is not None and blocked.prompt_feedback.block_reason == types.BlockedReason.SAFETY
    assert not blocked.candidates
    streamed = list(
        client.models.generate_content_stream(model=server.add_script("b2", [{"blocked": "OTHER"}]), contents="x")
    )
    assert (
        streamed[-1].prompt_feedback is not None
        and streamed[-1].prompt_feedback.block_reason == types.BlockedReason.OTHER
    )


@pytest.mark.parametrize(
    "fault, kind, status",
    [
        ({"kind": "status", "status": 429, "retry_after": 1}, genai_errors.ClientError, "RESOURCE_EXHAUSTED"),
        ({"kind": "status", "status": 503}, genai_errors.ServerError, "UNAVAILABLE"),
    ],
)
def test_the_sdk_reads_the_fakes_errors_as_googles(server: LLMServer, fault: dict[str, Any], kind: type, status: str):
    server.reset()
    server.add_faults([fault])
    client = client_for(server)
    with pytest.raises(kind) as caught:
        client.models.generate_content(model=server.add_script("e", [{"content": "x"}]), contents="x")
    assert caught.value.code == fault["status"] and caught.value.status == status
    with pytest.raises(genai_errors.ClientError) as bad:
        client.models.generate_content(
            model="script:e",
            contents="x",
            config=types.GenerateContentConfig(
                thinking_config=types.ThinkingConfig(thinking_budget=5, thinking_level=types.ThinkingLevel.LOW)
            ),
        )
    assert bad.value.code == 400 and bad.value.status == "INVALID_ARGUMENT"
