"""Chat Completions on the wire: the transcript to a request body, a response body to a reply.

Pure functions, no I/O, so each real server's quirk is pinned by a unit test:
- llama.cpp's server rejects `content: null` on an assistant message that carries tool_calls,
  so such a message is sent with `content: ""` (OpenAI, vLLM and Ollama accept that too);
- some servers omit tool-call ids or repeat them: ids are made unique and stable per turn;
- some servers send `arguments` as an object instead of a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from activities.sse import iter_events
from workflows.types import AgentSpec, AssistantMessage, Message, ModelReply, ToolCall, ToolMessage, Usage


class MalformedResponse(ValueError):
    """The server answered 200 with something that is not a usable completion."""


class StreamFailed(RuntimeError):
    """The stream ended early or carried an error event: the call must be retried whole."""


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
    if agent.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}}
            for s in agent.tools
        ]
    if agent.temperature is not None:
        body["temperature"] = agent.temperature
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def parse_usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
    return Usage(
        requests=1,
        input_tokens=int(raw.get("prompt_tokens") or 0),
        cached_tokens=int(prompt.get("cached_tokens") or 0) if isinstance(prompt, dict) else 0,
        output_tokens=int(raw.get("completion_tokens") or 0),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0) if isinstance(completion, dict) else 0,
    )


def arguments_text(raw: object) -> str:
    if raw is None or raw == "":
        return "{}"
    return raw if isinstance(raw, str) else json.dumps(raw)


def unique_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    for i, call in enumerate(calls):
        call_id = call.call_id or f"call_{turn}_{i}"
        if call_id in seen:
            call_id = f"{call_id}_{i}"
        seen.add(call_id)
        fixed.append(call.model_copy(update={"call_id": call_id}))
    return fixed


def parse_response(body: object, turn: int) -> ModelReply:
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("no choices in the response")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message")
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or []:
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            raise MalformedResponse(f"tool call without a function name: {json.dumps(raw)[:200]}")
        calls.append(
            ToolCall(
                call_id=str(raw.get("id") or ""), name=str(fn["name"]), arguments=arguments_text(fn.get("arguments"))
            )
        )
    content = message.get("content")
    return ModelReply(
        message=AssistantMessage(
            content=content if isinstance(content, str) else None, tool_calls=unique_ids(calls, turn)
        ),
        usage=parse_usage(body.get("usage")),
        finish_reason=choices[0].get("finish_reason"),
        model=body.get("model"),
        response_id=body.get("id"),
    )


async def parse_stream(
    lines: AsyncIterator[str], turn: int, *, on_delta: Callable[[str], None] | None = None
) -> ModelReply:
    """Assemble a streamed completion; `on_delta` sees each piece of text as it arrives.
    Only a stream that reached `[DONE]` counts as an answer."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: object = None
    finish: str | None = None
    model: str | None = None
    response_id: str | None = None
    async for event in iter_events(lines):
        if event.data.strip() == "[DONE]":
            break
        try:
            chunk = json.loads(event.data)
        except ValueError as err:
            raise MalformedResponse(f"stream event is not JSON: {event.data[:200]}") from err
        if not isinstance(chunk, dict):
            raise MalformedResponse("stream event is not a JSON object")
        if "error" in chunk:
            raise StreamFailed(f"error event mid-stream: {json.dumps(chunk['error'])[:300]}")
        model = chunk.get("model") or model
        response_id = chunk.get("id") or response_id
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
                if on_delta is not None and delta["content"]:
                    on_delta(delta["content"])
            for d in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(d.get("index", len(calls))), {"id": "", "name": "", "args": []})
                slot["id"] = d.get("id") or slot["id"]
                fn = d.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                if fn.get("arguments"):
                    slot["args"].append(arguments_text(fn["arguments"]))
    else:
        raise StreamFailed("stream ended before [DONE]")
    tool_calls = [
        ToolCall(call_id=s["id"], name=s["name"], arguments="".join(s["args"]) or "{}")
        for _, s in sorted(calls.items())
    ]
    if any(not c.name for c in tool_calls):
        raise MalformedResponse("streamed tool call without a function name")
    text = "".join(content)
    return ModelReply(
        message=AssistantMessage(content=text or None, tool_calls=unique_ids(tool_calls, turn)),
        usage=parse_usage(usage),
        finish_reason=finish,
        model=model,
        response_id=response_id,
    )
