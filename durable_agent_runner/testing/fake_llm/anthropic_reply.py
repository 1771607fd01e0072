"""fake_llm's Anthropic replies: a `Reply` as a message or its stream, signed thinking first when
the request enables thinking, and a request as its Chat Completions equivalent (`as_chat`, for the
testing kit). What a request may be is anthropic.py's; see its docstring for both.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import Conversation, as_dict, as_list
from durable_agent_runner.testing.fake_llm.wire import SSE, JSONDict, Reply, pieces, text_pieces

SECRET = b"fake_llm: the thinking it signs"
REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
OUTPUT_TOOLS = ("final_output", "final_output_value")  # the runner's typed output (activities/anthropic_wire.py)


def sign(text: str) -> str:
    return base64.b64encode(hmac.new(SECRET, text.encode(), hashlib.sha256).digest()).decode()


def redacted_data(seed: str) -> str:
    payload = base64.b64encode(f"redacted:{seed}".encode()).decode()
    return f"{payload}.{sign(payload)}"


def thinking_on(body: dict[str, Any]) -> bool:
    return (as_dict(body.get("thinking")) or {}).get("type") in ("enabled", "adaptive")


def result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "".join(str((as_dict(b) or {}).get("text", "")) for b in as_list(content) or [])


# ----------------------------------------------------------------------------------- replies


def _output_tool(conv: Conversation) -> str | None:
    names = [(as_dict(t) or {}).get("name") for t in as_list(conv.request.get("tools")) or []]
    return next((n for n in OUTPUT_TOOLS if n in names), None)


def _input(arguments: str) -> object:
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return {}  # a body has no room for arguments that are not JSON (a stream sends them as they are)


def _content(reply: Reply, conv: Conversation) -> tuple[list[JSONDict], str]:
    """The message's blocks (thinking first, when asked for) and its stop_reason."""
    blocks: list[JSONDict] = []
    if thinking_on(conv.request):
        if REDACTED_TRIGGER in conv.last_user_text:
            blocks.append({"type": "redacted_thinking", "data": redacted_data(conv.fingerprint)})
        else:
            text = reply.thinking or f"The user asks: {conv.last_user_text[:200]!r}. Turn {conv.turn}: I answer."
            blocks.append({"type": "thinking", "thinking": text, "signature": sign(text)})
    output = _output_tool(conv)
    if output is not None and not reply.tool_calls and reply.content is not None:
        try:
            value = json.loads(reply.content)
        except ValueError:
            value = None
        if value is not None and (output != OUTPUT_TOOLS[0] or isinstance(value, dict)):
            made = {"value": value} if output != OUTPUT_TOOLS[0] else value
            call = {"type": "tool_use", "id": f"toolu_{conv.fingerprint[:12]}_out", "name": output, "input": made}
            return [*blocks, call], "tool_use"
    if reply.content is not None and (reply.content or not reply.tool_calls):
        blocks.append({"type": "text", "text": reply.content})
    blocks += [
        {"type": "tool_use", "id": tc.call_id, "name": tc.name, "input": _input(tc.arguments)}
        for tc in reply.tool_calls
    ]
    return blocks, "tool_use" if reply.tool_calls else "end_turn"


def _usage(reply: Reply, conv: Conversation, thinking: str) -> JSONDict:
    u = reply.usage
    write, read = u.cache_write_tokens, u.cached_tokens
    long = conv.prefixes is not None and conv.prefixes.long
    usage: JSONDict = {
        "input_tokens": max(0, u.prompt_tokens - read - write),
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 0 if long else write,
            "ephemeral_1h_input_tokens": write if long else 0,
        },
        "output_tokens": u.completion_tokens + len(thinking) // 4,
        "service_tier": "standard",
    }
    if thinking or u.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": u.reasoning_tokens or len(thinking) // 4}
    return usage


def _thought(blocks: list[JSONDict]) -> str:
    return "".join(str(b.get("thinking", "")) for b in blocks if b["type"] == "thinking")


def message(reply: Reply, conv: Conversation, rid: str, created: int) -> JSONDict:
    blocks, stop = _content(reply, conv)
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(reply, conv, _thought(blocks)),
    }


response = message


def _event(payload: JSONDict) -> SSE:
    return SSE(payload, event=str(payload["type"]))


def ping() -> SSE:
    return _event({"type": "ping"})


def error_event(type_: str, message_: str) -> SSE:
    return _event({"type": "error", "error": {"type": type_, "message": message_}})


def _block_events(index: int, block: JSONDict, reply: Reply, arguments: str | None) -> list[JSONDict]:
    kind = block["type"]
    where: JSONDict = {"index": index}
    deltas: list[JSONDict] = []
    if kind == "text":
        start: JSONDict = {"type": "text", "text": ""}
        text = str(block["text"])
        deltas = [{"type": "text_delta", "text": p} for p in pieces(text, text_pieces(text, reply.delta_chars))]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        text = str(block["thinking"])
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(text, text_pieces(text))]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = arguments if arguments is not None else json.dumps(block["input"], ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(raw, 3)]
    else:
        start = block
    return [
        {"type": "content_block_start", **where, "content_block": start},
        *[{"type": "content_block_delta", **where, "delta": d} for d in deltas],
        {"type": "content_block_stop", **where},
    ]


def stream(reply: Reply, conv: Conversation, rid: str, created: int) -> list[SSE]:
    whole = message(reply, conv, rid, created)
    usage = dict(whole["usage"])
    head = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    raw: list[JSONDict] = [{"type": "message_start", "message": head}, {"type": "ping"}]
    calls = iter(reply.tool_calls)  # none when the reply is the output tool's call
    for index, block in enumerate(whole["content"]):
        # A streamed call's arguments go as the script wrote them, JSON or not.
        own = block["type"] == "tool_use" and bool(reply.tool_calls)
        raw += _block_events(index, block, reply, next(calls).arguments if own else None)
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    raw.append({"type": "message_delta", "delta": delta, "usage": usage})
    raw.append({"type": "message_stop"})
    return [_event(e) for e in raw]


# ------------------------------------------------------------------------ the testing kit's view


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The request as an equivalent Chat Completions body."""
    out: list[dict[str, Any]] = []
    system = "\n".join(str((as_dict(b) or {}).get("text", "")) for b in _system_list(body.get("system")))
    if system:
        out.append({"role": "system", "content": system})
    for item in as_list(body.get("messages")) or []:
        msg = as_dict(item) or {}
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else as_list(content) or []
        blocks = [as_dict(b) or {} for b in blocks]
        texts = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if msg.get("role") == "assistant":
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input", {}))},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            out.append({"role": "assistant", "content": texts or None, **({"tool_calls": calls} if calls else {})})
            continue
        out += [
            {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": result_text(b.get("content"))}
            for b in blocks
            if b.get("type") == "tool_result"
        ]
        if any(b.get("type") == "text" for b in blocks):
            out.append({"role": "user", "content": texts})
    chat: dict[str, Any] = {"model": body.get("model"), "messages": out, "stream": body.get("stream") is True}
    tools: list[dict[str, Any]] = []
    for raw in as_list(body.get("tools")) or []:
        tool = as_dict(raw) or {}
        schema = as_dict(tool.get("input_schema")) or {}
        if tool.get("name") == OUTPUT_TOOLS[0]:
            chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
        elif tool.get("name") == OUTPUT_TOOLS[1]:
            inner = as_dict((as_dict(schema.get("properties")) or {}).get("value")) or {}
            inner |= {k: v for k, v in schema.items() if k in ("$defs", "definitions")}
            chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": inner}}
        else:
            function = {"name": tool.get("name"), "description": tool.get("description", ""), "parameters": schema}
            tools.append({"type": "function", "function": function})
    if tools:
        chat["tools"] = tools
    return chat


def _system_list(raw: object) -> list[object]:
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}]
    return as_list(raw) or []
