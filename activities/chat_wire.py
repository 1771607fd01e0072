"""Chat Completions on the wire: the transcript to a request body, a response body to a reply.

Pure functions, no I/O, so each real server's quirk is pinned by a unit test:
- llama.cpp's server rejects `content: null` on an assistant message that carries tool_calls,
  so such a message is sent with `content: ""` (OpenAI, vLLM and Ollama accept that too);
- providers omit tool-call ids, repeat them, reuse them across turns or number them per reply:
  every call gets the run's own id (`run_ids`), the provider's is kept only for the record;
- some servers send `arguments` as an object instead of a JSON string.

Model settings (`AgentSpec.settings_now()`) go out under their Chat Completions names. The
output cap is `max_completion_tokens` alone: OpenAI's reasoning models refuse `max_tokens`, and
OpenAI refuses a request that sets both (400 invalid_parameter_combination). vLLM and llama.cpp's
own server (since 2026-02) read `max_completion_tokens`; servers that read only `max_tokens`
(llama-cpp-python 0.3, Ollama) ignore it, so there put `{"max_tokens": N}` in `extra_body`.
`extra_body` is merged last and may set anything but the fields the runner owns (`activities.wire.OWNED`).

Untrusted values are taken in through activities.wire's `Reader`: whatever arrives, parsing ends
in a `ModelReply` or in `MalformedResponse` / `StreamFailed`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from durable_agent_runner.activities.sse import iter_events
from durable_agent_runner.activities.wire import (
    MAX_TOOL_CALLS,
    TOOL_CHOICES,
    Budget,
    MalformedResponse,
    Mask,
    Reader,
    StreamFailed,
    check_sendable,
    count,
    function_tools,
    output_format,
    part_text,
    run_ids,
    settings_for,
    utf8,
)
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolMessage,
    Usage,
)


def _settings(s: ModelSettings, tools: bool) -> dict[str, Any]:
    """The Chat Completions fields for `s`; tool_choice and parallel_tool_calls only beside
    tools (OpenAI refuses them alone, and without tools they mean nothing)."""
    plain = {"temperature": s.temperature, "top_p": s.top_p, "max_completion_tokens": s.max_output_tokens}
    out: dict[str, Any] = {field: value for field, value in plain.items() if value is not None}
    if s.tool_choice is not None and tools:
        named = s.tool_choice not in TOOL_CHOICES
        out["tool_choice"] = {"type": "function", "function": {"name": s.tool_choice}} if named else s.tool_choice
    if s.parallel_tool_calls is not None and tools:
        out["parallel_tool_calls"] = s.parallel_tool_calls
    if s.reasoning_effort is not None:
        out["reasoning_effort"] = s.reasoning_effort
    if s.seed is not None:
        out["seed"] = s.seed
    if s.stop:
        out["stop"] = list(s.stop)
    return out


def check_settings(s: ModelSettings) -> list[str]:
    """What Chat Completions lacks of `s`: a thinking budget (OpenAI's models take
    reasoning_effort; a compatible server's own field can go in extra_body)."""
    if s.thinking_tokens is not None:
        return ["thinking_tokens: Chat Completions has no thinking budget; set reasoning_effort instead"]
    return []


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    wire: list[dict[str, Any]] = []
    if agent.instructions:
        wire.append({"role": "system", "content": agent.instructions})
    for m in messages:
        if isinstance(m, AssistantMessage):
            out: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.tool_calls:
                out["tool_calls"] = [
                    {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
            wire.append(out)
        elif isinstance(m, ToolMessage):
            wire.append({"role": "tool", "tool_call_id": m.call_id, "content": m.content})
        else:
            wire.append({"role": "user", "content": m.content})
    body: dict[str, Any] = {"model": model, "messages": wire}
    tools = function_tools(agent)
    if tools:
        body["tools"] = [
            {"type": "function", "function": {"name": name, "description": text, "parameters": parameters}}
            for name, text, parameters in tools
        ]
    settings = settings_for(agent, messages)
    check_sendable(settings)
    body |= _settings(settings, bool(tools))
    typed = output_format(agent)
    if typed is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": typed[0], "schema": typed[1], "strict": False},
        }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body | settings.extra_body  # last: a provider's own options win over ours


def parse_usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    prompt = raw.get("prompt_tokens_details")
    completion = raw.get("completion_tokens_details")
    return Usage(
        requests=1,
        input_tokens=count(raw.get("prompt_tokens")),
        cached_tokens=count(prompt.get("cached_tokens")) if isinstance(prompt, dict) else 0,
        output_tokens=count(raw.get("completion_tokens")),
        reasoning_tokens=count(completion.get("reasoning_tokens")) if isinstance(completion, dict) else 0,
    )


def parse_response(body: object, turn: int, *, mask: Mask | None = None) -> ModelReply:
    r = Reader(mask)
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("no choices in the response")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise MalformedResponse(f"tool_calls is not a list: {r.sample(raw_calls)}")
    calls: list[ToolCall] = []
    for raw in raw_calls:
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict):
            raise MalformedResponse(f"tool call without a function: {r.sample(raw)}")
        calls.append(r.call(raw.get("id"), fn.get("name"), fn.get("arguments")))
    return ModelReply(
        message=AssistantMessage(content=r.content(message.get("content")), tool_calls=run_ids(calls, turn)),
        usage=parse_usage(body.get("usage")),
        finish_reason=r.label(choices[0].get("finish_reason")),
        model=r.label(body.get("model")),
        response_id=r.label(body.get("id")),
    )


@dataclass
class _Slot:
    """A streamed tool call being assembled from its deltas."""

    provider_id: object = None
    name: object = None
    arguments: str = ""


def _index(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        return int(value)
    return default


async def parse_stream(
    lines: AsyncIterator[str],
    turn: int,
    *,
    on_delta: Callable[[str], None] | None = None,
    mask: Mask | None = None,
    limit: int | None = None,
) -> ModelReply:
    """Assemble a streamed completion; `on_delta` sees each piece of text as it arrives (raw:
    a secret may span pieces, so the caller masks what it shows). Only a stream that reached
    `[DONE]` counts as an answer; one whose text and arguments pass `limit` characters is none,
    nor one with nothing in it (no text, no call, no finish_reason: a body without choices),
    nor one that sends a call's arguments after the reply's finish_reason."""
    r = Reader(mask)
    budget = Budget(limit)
    content: list[str] = []
    slots: dict[int, _Slot] = {}
    last = 0
    usage: object = None
    # The last non-empty text of each label, read once at the end: a long reply has many chunks.
    finish = model = response_id = ""
    async for event in iter_events(lines):
        if event.data.strip() == "[DONE]":
            break
        chunk = r.json_object(event.data)
        if chunk.get("error") is not None:
            raise StreamFailed(f"error event mid-stream: {r.sample(chunk['error'], 300)}")
        model = _latest(chunk.get("model"), model)
        response_id = _latest(chunk.get("id"), response_id)
        usage = chunk.get("usage") or usage
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            finished = bool(finish)  # in an earlier chunk: this one's deltas come before its own
            finish = _latest(choice.get("finish_reason"), finish)
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            piece = budget.take(utf8(_raw_content(delta.get("content"))))
            if piece:
                content.append(piece)
                if on_delta is not None:
                    on_delta(piece)
            deltas = delta.get("tool_calls") or []
            if not isinstance(deltas, list):
                raise MalformedResponse(f"streamed tool_calls is not a list: {r.sample(deltas)}")
            if deltas and finished:
                raise MalformedResponse(f"a tool-call delta after the finish_reason: {r.sample(deltas)}")
            for d in deltas:
                if not isinstance(d, dict):
                    raise MalformedResponse(f"streamed tool call is not an object: {r.sample(d)}")
                # Without an index, a delta naming a new id starts a call; any other continues the last.
                new = d.get("id") and (last not in slots or d.get("id") != slots[last].provider_id)
                last = _index(d.get("index"), len(slots) if new else last)
                slot = slots.setdefault(last, _Slot())
                if len(slots) > MAX_TOOL_CALLS:
                    raise MalformedResponse(f"more than {MAX_TOOL_CALLS} tool calls in one reply")
                slot.provider_id = d.get("id") or slot.provider_id
                fn = d.get("function")
                if isinstance(fn, dict):
                    slot.name = fn.get("name") or slot.name
                    args = fn.get("arguments")
                    slot.arguments += budget.take(args if isinstance(args, str) else r.arguments(args) if args else "")
    else:
        raise StreamFailed("stream ended before [DONE]")
    if not (content or slots or finish):
        raise MalformedResponse("the stream carried no text, no tool call and no finish_reason")
    calls = [r.call(s.provider_id, s.name, s.arguments) for _, s in sorted(slots.items())]
    return ModelReply(
        message=AssistantMessage(content=r.text("".join(content)) or None, tool_calls=run_ids(calls, turn)),
        usage=parse_usage(usage),
        finish_reason=r.label(finish),
        model=r.label(model),
        response_id=r.label(response_id),
    )


def _latest(value: object, previous: str) -> str:
    return value if isinstance(value, str) and value else previous


def _raw_content(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    return "".join(part_text(p) for p in raw) if isinstance(raw, list) else ""
