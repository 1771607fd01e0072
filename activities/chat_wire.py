"""Chat Completions on the wire: the transcript to a request body, a response body to a reply.

Pure functions, no I/O, so each real server's quirk is pinned by a unit test:
- llama.cpp's server rejects `content: null` on an assistant message that carries tool_calls,
  so such a message is sent with `content: ""` (OpenAI, vLLM and Ollama accept that too);
- providers omit tool-call ids, repeat them, reuse them across turns or number them per reply:
  every call gets the run's own id (`run_ids`), the provider's is kept only for the record;
- some servers send `arguments` as an object instead of a JSON string.

Every byte of a reply is untrusted: whatever arrives, parsing ends in a `ModelReply` or in
`MalformedResponse` / `StreamFailed`, never in another exception that would be retried blindly.
`Reader` is how both wires take in a server's values (shared with activities.responses_wire).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from activities.sse import iter_events
from workflows.types import AgentSpec, AssistantMessage, Message, ModelReply, ToolCall, ToolMessage, Usage

Mask = Callable[[str], str]  # hides secrets in a server's text (activities.redact.Redactor.text)

MAX_LABEL = 200  # finish_reason, model, response_id
MAX_NAME = 128  # a longer tool name is cut: the workflow answers unknown names with an error
MAX_PROVIDER_ID = 64
MAX_COUNT = 10**9  # a token count above this is a lie
MAX_TOOL_CALLS = 128  # per reply: more is a server gone wrong, not a plan
SAMPLE = 200  # characters of an offending value quoted in an error


class MalformedResponse(ValueError):
    """The server answered 200 with something that is not a usable completion."""


class StreamFailed(RuntimeError):
    """The stream ended early or carried an error event: the call must be retried whole."""


@dataclass(frozen=True)
class Reader:
    """Takes in a server's values: strings made valid UTF-8 (a lone surrogate from a `\\ud800`
    escape would fail the reply's serialization), masked, and only then cut."""

    mask: Mask | None = None

    def text(self, value: str) -> str:
        return self.mask(utf8(value)) if self.mask is not None else utf8(value)

    def label(self, value: object, limit: int = MAX_LABEL) -> str | None:
        if not isinstance(value, str):
            return None
        return self.text(value)[:limit] or None

    def name(self, value: object) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # a name sent as a number is only an unknown name
        return self.label(value, MAX_NAME)

    def sample(self, value: object, limit: int = SAMPLE) -> str:
        """An excerpt of an offending value, for an error message."""
        try:
            text = value if isinstance(value, str) else json.dumps(value, default=repr)
        except (ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
        return self.text(text)[:limit]

    def arguments(self, raw: object) -> str:
        """A tool call's arguments as JSON text: servers send text, objects or nothing."""
        if raw is None or raw == "":
            return "{}"
        try:
            return self.text(raw if isinstance(raw, str) else json.dumps(raw))
        except (ValueError, RecursionError) as err:
            raise MalformedResponse(f"tool-call arguments cannot be read: {self.sample(raw)}") from err

    def content(self, raw: object) -> str | None:
        """Text from a string, or from a list of content parts (their text joined)."""
        if isinstance(raw, str):
            return self.text(raw)
        if not isinstance(raw, list):
            return None
        return self.text("".join(_part_text(p) for p in raw)) or None

    def call(self, provider_id: object, name: object, arguments: object) -> ToolCall:
        """A tool call without its run id yet (see `run_ids`)."""
        named = self.name(name)
        if named is None:
            raise MalformedResponse(f"tool call without a function name: {self.sample(name)}")
        pid = provider_id if isinstance(provider_id, str) else ""
        return ToolCall(
            call_id="",
            name=named,
            arguments=self.arguments(arguments),
            provider_id=self.label(pid, MAX_PROVIDER_ID) or "",
        )

    def json_object(self, data: str) -> dict[str, Any]:
        """One stream event's JSON object."""
        try:
            event = json.loads(data)
        except (ValueError, RecursionError) as err:
            raise MalformedResponse(f"stream event is not JSON: {self.sample(data)}") from err
        if not isinstance(event, dict):
            raise MalformedResponse("stream event is not a JSON object")
        return event


def utf8(text: str) -> str:
    """`text` as valid UTF-8: JSON can carry lone surrogates, which no payload can."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _part_text(part: object) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
    return text if isinstance(text, str) else ""


def count(value: object) -> int:
    """A token count: an integer in [0, MAX_COUNT]; anything that is not a number counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN
        return 0
    return int(min(max(value, 0), MAX_COUNT))


def run_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    """Give each call the run's own id, `call_{turn}_{index}`: unique in the run, whatever ids
    the provider sent (missing, repeated, reused across turns, numbered per reply, huge)."""
    if len(calls) > MAX_TOOL_CALLS:
        raise MalformedResponse(f"{len(calls)} tool calls in one reply (at most {MAX_TOOL_CALLS})")
    return [c.model_copy(update={"call_id": f"call_{turn}_{i}"}) for i, c in enumerate(calls)]


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
    lines: AsyncIterator[str], turn: int, *, on_delta: Callable[[str], None] | None = None, mask: Mask | None = None
) -> ModelReply:
    """Assemble a streamed completion; `on_delta` sees each piece of text as it arrives (raw:
    a secret may span pieces, so the caller masks what it shows). Only a stream that reached
    `[DONE]` counts as an answer."""
    r = Reader(mask)
    content: list[str] = []
    slots: dict[int, _Slot] = {}
    last = 0
    usage: object = None
    finish = model = response_id = None
    async for event in iter_events(lines):
        if event.data.strip() == "[DONE]":
            break
        chunk = r.json_object(event.data)
        if chunk.get("error") is not None:
            raise StreamFailed(f"error event mid-stream: {r.sample(chunk['error'], 300)}")
        model = r.label(chunk.get("model")) or model
        response_id = r.label(chunk.get("id")) or response_id
        usage = chunk.get("usage") or usage
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            finish = r.label(choice.get("finish_reason")) or finish
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            piece = utf8(_raw_content(delta.get("content")))
            if piece:
                content.append(piece)
                if on_delta is not None:
                    on_delta(piece)
            deltas = delta.get("tool_calls") or []
            if not isinstance(deltas, list):
                raise MalformedResponse(f"streamed tool_calls is not a list: {r.sample(deltas)}")
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
                    slot.arguments += args if isinstance(args, str) else r.arguments(args) if args else ""
    else:
        raise StreamFailed("stream ended before [DONE]")
    calls = [r.call(s.provider_id, s.name, s.arguments) for _, s in sorted(slots.items())]
    return ModelReply(
        message=AssistantMessage(content=r.text("".join(content)) or None, tool_calls=run_ids(calls, turn)),
        usage=parse_usage(usage),
        finish_reason=finish,
        model=model,
        response_id=response_id,
    )


def _raw_content(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    return "".join(_part_text(p) for p in raw) if isinstance(raw, list) else ""
