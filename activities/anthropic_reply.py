"""Anthropic's Messages API: a message, or its stream, to a reply (activities.anthropic_wire
builds the request and re-exports these).

The reply: `text` blocks are the content, `tool_use` blocks the calls (the run's own ids),
`thinking` / `redacted_thinking` go to `AssistantMessage.thinking` (never into the content),
other blocks (server tools) carry nothing the transcript keeps. `stop_reason` takes Chat's
names: end_turn and stop_sequence "stop", max_tokens and model_context_window_exceeded "length",
tool_use "tool_calls", refusal "content_filter", pause_turn "length" (the runner offers no server
tool, so a paused turn is an unfinished reply); another value passes as it is. Usage:
`input_tokens` is all input (Anthropic's input_tokens + cache_creation_input_tokens +
cache_read_input_tokens), `cached_tokens` the cache reads, `cache_write_tokens` the cache writes.

A stream is an answer only once `message_stop` arrives; its blocks are assembled from
`content_block_start` / `_delta` (text_delta, input_json_delta, thinking_delta, signature_delta)
/ `_stop` and parsed exactly as a plain body. `ping` is ignored; an `error` event is
StreamFailed with its message, masked. Text and argument deltas count against `limit`, and
`on_delta` sees text only, never thinking.

Untrusted values go through activities.wire's `Reader`. Thinking is masked like any text (its
signature and data too): a block that held the key would come back changed, and be refused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agent_runner.activities.sse import iter_events
from durable_agent_runner.activities.wire import (
    MAX_TOOL_CALLS,
    Budget,
    MalformedResponse,
    Mask,
    Reader,
    StreamFailed,
    count,
    parse_body,
    run_ids,
    utf8,
)
from durable_agent_runner.workflows.types import AssistantMessage, ModelReply, Thinking, ToolCall, Usage

__all__ = ["MAX_BLOCKS", "OUTPUT_TOOL", "OUTPUT_VALUE_TOOL", "parse_response", "parse_stream", "parse_usage"]

OUTPUT_TOOL = "final_output"  # its input is the typed output
OUTPUT_VALUE_TOOL = "final_output_value"  # its input is {"value": the typed output}
MAX_BLOCKS = 2 * MAX_TOOL_CALLS  # content blocks in one streamed reply
THINKING_BLOCKS = ("thinking", "redacted_thinking")
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "pause_turn": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


# ------------------------------------------------------------------------------- replies


def parse_usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    details = raw.get("output_tokens_details")
    read, write = count(raw.get("cache_read_input_tokens")), count(raw.get("cache_creation_input_tokens"))
    return Usage(
        requests=1,
        input_tokens=count(count(raw.get("input_tokens")) + read + write),  # the sum within the bound too
        cached_tokens=read,
        cache_write_tokens=write,
        output_tokens=count(raw.get("output_tokens")),
        reasoning_tokens=count(details.get("thinking_tokens")) if isinstance(details, dict) else 0,
    )


def _error_text(raw: object, r: Reader) -> str:
    """`type: message` from an error event or body (`{"type": "error", "error": {...}}`)."""
    if isinstance(raw, dict):
        err = raw["error"] if isinstance(raw.get("error"), dict) else raw
        kind, message = err.get("type"), err.get("message")
        if message or (kind and kind != "error"):
            return f"{r.sample(kind or 'error', 100)}: {r.sample(message or '', 300)}"
    return r.sample(raw, 300)


def _output_text(name: str, raw: object, r: Reader) -> str:
    """The typed output an output tool's input carries, as JSON text (bounded as arguments are;
    text that is not JSON stays, and the workflow tells the model what is wrong with it)."""
    if name == OUTPUT_TOOL or not isinstance(raw, str | dict):
        return r.arguments(raw)
    try:
        value = parse_body(raw, "output tool input", r.mask) if isinstance(raw, str) else raw
    except MalformedResponse:
        return r.arguments(raw)
    value = value.get("value") if isinstance(value, dict) else None
    try:
        return r.arguments(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as err:
        raise MalformedResponse(f"output tool input cannot be read: {r.sample(raw)}") from err


def _thinking(block: dict[str, Any], r: Reader) -> Thinking:
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str):
            raise MalformedResponse(f"redacted_thinking block without data: {r.sample(block)}")
        return Thinking(provider="anthropic", kind="redacted_thinking", data=r.text(data))
    text, signature = block.get("thinking"), block.get("signature")
    if not isinstance(text, str) or not isinstance(signature, str):
        raise MalformedResponse(f"thinking block without its text or signature: {r.sample(block)}")
    return Thinking(provider="anthropic", kind="thinking", text=r.text(text), signature=r.text(signature))


def parse_response(body: object, turn: int, *, mask: Mask | None = None) -> ModelReply:
    r = Reader(mask)
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    if body.get("type") == "error":
        raise MalformedResponse(f"an error body with status 200: {_error_text(body, r)}")
    content = body.get("content")
    if not isinstance(content, list):
        raise MalformedResponse("no content in the message")
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[Thinking] = []
    output: str | None = None
    for block in content:
        if not isinstance(block, dict):
            raise MalformedResponse(f"content block is not a JSON object: {r.sample(block)}")
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            texts.append(text if isinstance(text, str) else "")
        elif kind == "tool_use" and block.get("name") in (OUTPUT_TOOL, OUTPUT_VALUE_TOOL):
            output = _output_text(str(block["name"]), block.get("input"), r)
        elif kind == "tool_use":
            calls.append(r.call(block.get("id"), block.get("name"), block.get("input")))
        elif kind in THINKING_BLOCKS:
            thinking.append(_thinking(block, r))
        # server tools' blocks and any other type carry nothing the transcript keeps
    stop = body.get("stop_reason")
    finish = _FINISH.get(stop, stop) if isinstance(stop, str) else None
    if stop == "tool_use" and output is not None and not calls:
        finish = "stop"  # only the output tool was called: the answer is whole
    text = output if output is not None else r.text("".join(texts)) if texts else None
    return ModelReply(
        message=AssistantMessage(content=text, tool_calls=run_ids(calls, turn), thinking=thinking),
        usage=parse_usage(body.get("usage")),
        finish_reason=r.label(finish),
        model=r.label(body.get("model")),
        response_id=r.label(body.get("id")),
    )


# -------------------------------------------------------------------------------- streams


def _index(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        return int(value)
    return default


def _piece(value: object) -> str:
    return value if isinstance(value, str) else ""


def _assembled(blocks: dict[int, dict[str, Any]], parts: dict[int, list[str]]) -> list[dict[str, Any]]:
    """The message's content rebuilt from its blocks' starts and deltas."""
    out: list[dict[str, Any]] = []
    for i in sorted(blocks):
        block, joined = dict(blocks[i]), "".join(parts.get(i, []))
        kind = block.get("type")
        if kind == "text":
            block["text"] = _piece(block.get("text")) + joined
        elif kind == "tool_use" and joined:
            block["input"] = joined  # JSON text: read within the bounds as any arguments
        elif kind == "thinking":
            block["thinking"] = _piece(block.get("thinking")) + joined
        out.append(block)
    return out


async def parse_stream(
    lines: AsyncIterator[str],
    turn: int,
    *,
    on_delta: Callable[[str], None] | None = None,
    mask: Mask | None = None,
    limit: int | None = None,
) -> ModelReply:
    """Assemble a streamed message; `on_delta` sees each piece of text as it arrives (raw: a
    secret may span pieces, so the caller masks what it shows), never thinking. Only a stream
    that reached `message_stop` is an answer; one whose deltas pass `limit` characters is none,
    nor one with no content block and no stop_reason, nor one with a delta for a block that never
    started or already stopped."""
    r = Reader(mask)
    budget = Budget(limit)
    head: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    parts: dict[int, list[str]] = {}
    stopped: set[int] = set()
    last = -1
    stop: object = None
    async for sse in iter_events(lines):
        event = r.json_object(sse.data)
        kind = event["type"] if isinstance(event.get("type"), str) else sse.event
        if kind == "ping":
            continue
        if kind == "error":
            raise StreamFailed(f"error event mid-stream: {_error_text(event, r)}")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            head = dict(event["message"])
            usage |= head["usage"] if isinstance(head.get("usage"), dict) else {}
        elif kind == "content_block_start":
            last = _index(event.get("index"), len(blocks))
            block = event.get("content_block")
            if not isinstance(block, dict):
                raise MalformedResponse(f"content_block_start without a block: {r.sample(event)}")
            blocks[last] = dict(block)
            if len(blocks) > MAX_BLOCKS:
                raise MalformedResponse(f"more than {MAX_BLOCKS} content blocks in one reply")
        elif kind == "content_block_delta":
            i = _index(event.get("index"), last)
            delta = event.get("delta")
            if i not in blocks or i in stopped:
                raise MalformedResponse(f"a delta for content block {i}, which is not open")
            if not isinstance(delta, dict):
                continue
            dtype = delta.get("type")
            if dtype == "text_delta":
                piece = budget.take(utf8(_piece(delta.get("text"))))
                parts.setdefault(i, []).append(piece)
                if on_delta is not None and piece:
                    on_delta(piece)
            elif dtype == "input_json_delta":
                parts.setdefault(i, []).append(budget.take(_piece(delta.get("partial_json"))))
            elif dtype == "thinking_delta":
                parts.setdefault(i, []).append(budget.take(_piece(delta.get("thinking"))))
            elif dtype == "signature_delta":
                blocks[i]["signature"] = _piece(blocks[i].get("signature")) + budget.take(
                    _piece(delta.get("signature"))
                )
        elif kind == "content_block_stop":
            stopped.add(_index(event.get("index"), last))
        elif kind == "message_delta":
            delta = event.get("delta")
            stop = delta.get("stop_reason") or stop if isinstance(delta, dict) else stop
            more = event.get("usage")
            usage |= {k: v for k, v in more.items() if v is not None} if isinstance(more, dict) else {}
        elif kind == "message_stop":
            if not blocks and not stop:
                raise MalformedResponse("the stream carried no content block and no stop_reason")
            body = {**head, "content": _assembled(blocks, parts), "stop_reason": stop, "usage": usage}
            return parse_response(body, turn, mask=mask)
    raise StreamFailed("stream ended before message_stop")
