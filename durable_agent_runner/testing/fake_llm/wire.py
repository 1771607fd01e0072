"""OpenAI wire formats: a `Reply` rendered as Chat Completions or Responses API JSON and SSE.

Field names, event types and their order follow OpenAI's API reference, so a client that
works here works against the real service (and vice versa).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str  # raw JSON text, sent as-is (a script may send invalid JSON on purpose)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int | None = None  # None: prompt + completion
    cache_write_tokens: int = 0  # of prompt_tokens: written to a prompt cache (Anthropic's)

    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens if self.total_tokens is None else self.total_tokens

    def chat(self) -> JSONDict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total(),
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }

    def responses(self) -> JSONDict:
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.total(),
        }


@dataclass(frozen=True)
class Reply:
    """What the fake model says: text and/or tool calls, API-neutral."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=lambda: Usage(1, 1))
    keepalive: bool = False  # interleave ": keep-alive" comments when streamed
    delta_chars: int | None = None  # characters per streamed text delta; None: see text_pieces
    # A provider's own stop reason, rendered as is by the wires that have one (Gemini's finishReason,
    # e.g. "SAFETY" or "MAX_TOKENS"); None: the usual one. `blocked`: the prompt is refused with this
    # reason before any reply (Gemini's promptFeedback.blockReason).
    finish: str | None = None
    blocked: str | None = None
    thinking: str | None = None  # the model's reasoning, where the API shows it (Anthropic's signed blocks)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


class ApiError(Exception):
    """An OpenAI-style error response: status, body and optional headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bool = False,
    ) -> None:
        super().__init__(message)
        self.raw = raw  # sent as text/plain, like a proxy's error page, not an OpenAI error body
        self.status = status
        self.message = message
        self.type = type_ or default_error_type(status, code)
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> JSONDict:
        return error_body(self.message, self.type, self.param, self.code)


def default_error_type(status: int, code: str | None = None) -> str:
    # The `type` values OpenAI actually sends for each status.
    if code == "insufficient_quota":
        return "insufficient_quota"
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_body(message: str, type_: str, param: str | None, code: str | None) -> JSONDict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


@dataclass(frozen=True)
class SSE:
    """One server-sent event. A `str` payload goes out verbatim ("[DONE]", broken JSON)."""

    payload: JSONDict | str
    event: str | None = None

    def render(self, *, multiline: bool = False) -> bytes:
        if isinstance(self.payload, str):
            data = self.payload
        elif multiline:  # legal SSE: the client joins data lines with "\n"
            data = json.dumps(self.payload, ensure_ascii=False, indent=1)
        else:
            data = dumps(self.payload)
        lines = [f"event: {self.event}"] if self.event else []
        lines += [f"data: {line}" for line in data.split("\n")]
        return ("\n".join(lines) + "\n\n").encode()


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_pieces(text: str | None, size: int | None = None) -> int:
    """How many deltas a reply's text streams in: `size` characters each, or by default about
    16, like a few tokens."""
    if size is not None:
        return max(1, -(-len(text or "") // size))
    return max(4, len(text or "") // 16)


def pieces(text: str, n: int) -> list[str]:
    """Split `text` into up to `n` non-empty, nearly equal pieces (cut anywhere, like a tokenizer)."""
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    out: list[str] = []
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


# ------------------------------------------------------------------------- Chat Completions


def chat_completion(reply: Reply, *, rid: str, model: str, created: int) -> JSONDict:
    message: JSONDict = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": tc.call_id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
            for tc in reply.tool_calls
        ]
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": reply.usage.chat(),
    }


def chat_stream(reply: Reply, *, rid: str, model: str, created: int, include_usage: bool) -> list[SSE]:
    def chunk(delta: JSONDict, finish: str | None = None) -> SSE:
        body: JSONDict = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:  # OpenAI sends "usage": null on every chunk but the last
            body["usage"] = None
        return SSE(body)

    # OpenAI opens with content "" for text and content null for a tool-call-only reply.
    events = [chunk({"role": "assistant", "content": "" if reply.content is not None else None})]
    text = reply.content or ""
    events += [chunk({"content": piece}) for piece in pieces(text, text_pieces(text, reply.delta_chars))]
    for index, tc in enumerate(reply.tool_calls):
        head = {"index": index, "id": tc.call_id, "type": "function", "function": {"name": tc.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [head]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces(tc.arguments, 3)
        ]
    events.append(chunk({}, reply.finish_reason))
    if include_usage:
        events.append(
            SSE(
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": reply.usage.chat(),
                }
            )
        )
    events.append(SSE("[DONE]"))
    return events


def chat_error_event(code: str, message: str) -> SSE:
    return SSE(error_body(message, "server_error", None, code))


# ---------------------------------------------------------------------------- Responses API


def _message_item(item_id: str, text: str, status: str) -> JSONDict:
    content: list[JSONDict] = (
        [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _call_item(item_id: str, tc: ToolCall, arguments: str, status: str) -> JSONDict:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": tc.call_id,
        "name": tc.name,
        "arguments": arguments,
        "status": status,
    }


def _item_ids(rid: str, reply: Reply) -> tuple[str, list[str]]:
    suffix = rid.removeprefix("resp_")
    return f"msg_{suffix}", [f"fc_{suffix}_{i}" for i in range(len(reply.tool_calls))]


def response_object(
    reply: Reply, *, rid: str, model: str, created: int, request: JSONDict, done: bool = True
) -> JSONDict:
    output: list[JSONDict] = []
    if done:
        msg_id, fc_ids = _item_ids(rid, reply)
        if reply.content is not None:
            output.append(_message_item(msg_id, reply.content, "completed"))
        output += [
            _call_item(fc_id, tc, tc.arguments, "completed") for fc_id, tc in zip(fc_ids, reply.tool_calls, strict=True)
        ]
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": "completed" if done else "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": request.get("reasoning", {"effort": None, "summary": None}),
        "temperature": request.get("temperature"),
        "text": request.get("text", {"format": {"type": "text"}}),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "top_p": request.get("top_p"),
        "usage": reply.usage.responses() if done else None,
        "metadata": request.get("metadata", {}),
    }


def response_stream(reply: Reply, *, rid: str, model: str, created: int, request: JSONDict) -> list[SSE]:
    raw: list[JSONDict] = []
    pending = response_object(reply, rid=rid, model=model, created=created, request=request, done=False)
    raw.append({"type": "response.created", "response": pending})
    raw.append({"type": "response.in_progress", "response": pending})
    msg_id, fc_ids = _item_ids(rid, reply)
    index = 0
    if reply.content is not None:
        text = reply.content
        where: JSONDict = {"item_id": msg_id, "output_index": index}
        part: JSONDict = {"type": "output_text", "text": "", "annotations": []}
        raw.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _message_item(msg_id, "", "in_progress"),
            }
        )
        raw.append({"type": "response.content_part.added", **where, "content_index": 0, "part": part})
        raw += [
            {"type": "response.output_text.delta", **where, "content_index": 0, "delta": piece, "logprobs": []}
            for piece in pieces(text, text_pieces(text, reply.delta_chars))
        ]
        raw.append({"type": "response.output_text.done", **where, "content_index": 0, "text": text, "logprobs": []})
        raw.append({"type": "response.content_part.done", **where, "content_index": 0, "part": {**part, "text": text}})
        raw.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _message_item(msg_id, text, "completed"),
            }
        )
        index += 1
    for fc_id, tc in zip(fc_ids, reply.tool_calls, strict=True):
        where = {"item_id": fc_id, "output_index": index}
        raw.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _call_item(fc_id, tc, "", "in_progress"),
            }
        )
        raw += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in pieces(tc.arguments, 3)
        ]
        raw.append(
            {"type": "response.function_call_arguments.done", **where, "name": tc.name, "arguments": tc.arguments}
        )
        raw.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _call_item(fc_id, tc, tc.arguments, "completed"),
            }
        )
        index += 1
    final = response_object(reply, rid=rid, model=model, created=created, request=request)
    raw.append({"type": "response.completed", "response": final})
    return [SSE({**event, "sequence_number": seq}, event=str(event["type"])) for seq, event in enumerate(raw)]


def responses_error_event(code: str, message: str, sequence_number: int) -> SSE:
    payload: JSONDict = {
        "type": "error",
        "code": code,
        "message": message,
        "param": None,
        "sequence_number": sequence_number,
    }
    return SSE(payload, event="error")
