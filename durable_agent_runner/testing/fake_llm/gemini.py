"""Gemini's API (generativelanguage v1beta) in the fake: `generateContent` and
`streamGenerateContent?alt=sse`, the model and the stream from the path (dialects.call_for).

A request is checked as the real API checks it (gemini_checks: its docstring lists what is
refused), and errors are in Google's shape: `{"error": {"code", "message", "status"}}`.

Thinking is enabled when `generationConfig.thinkingConfig` sets a budget other than 0 or a level.
Then the first functionCall part of a reply carries a `thoughtSignature` (or the last text part of
a reply without calls), derived from the call (its name and args), so a retry gets the same one
and a later request can be checked without the server keeping state. `includeThoughts: true`
adds a thought summary part (`thought: true`) before the answer.

Replies render in Gemini's shapes: candidates[0].content.parts (text, then functionCall parts with
an `id`, as Gemini 3 gives), finishReason (STOP, or the script step's "finish", e.g. SAFETY),
usageMetadata (promptTokenCount, candidatesTokenCount without the thoughts, thoughtsTokenCount,
cachedContentTokenCount, totalTokenCount), modelVersion and responseId. A script step's
"blocked" answers with no candidate and `promptFeedback.blockReason`. A stream is one `data:`
event per chunk, each a whole GenerateContentResponse; the last carries the finishReason and the
whole usage, and the stream ends when the body ends, so a cut stream is one without a
finishReason (faults.shape_stream never keeps the last chunk of a cut).

`as_chat` reads a request as Chat Completions (the testing kit's view). Call ids are the
functionCall's `id`, or `call_{content}_{part}` when it has none; a response is paired with its
call by id, else with the first unanswered call of that name.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import (
    Conversation,
    _sizes,
    as_dict,
    as_list,
    parse_chat,
)
from durable_agent_runner.testing.fake_llm.gemini_checks import (
    SKIP_SIGNATURE,
    check,
    get,
    require_key,
    signature,
    status_name,
    thinking_enabled,
)
from durable_agent_runner.testing.fake_llm.wire import SSE, ApiError, JSONDict, Reply, Usage, pieces, text_pieces

__all__ = [
    "SKIP_SIGNATURE",
    "THOUGHT_SUMMARY",
    "as_chat",
    "error_body",
    "error_event",
    "parse",
    "require_key",
    "response",
    "signature",
    "stream",
]

THOUGHT_SUMMARY = "Thinking about what the request needs."


def error_body(err: ApiError) -> JSONDict:
    """Google's error; a 429 with a Retry-After says it as Gemini does, in a google.rpc.RetryInfo."""
    error: JSONDict = {"code": err.status, "message": err.message, "status": status_name(err.status)}
    delay = err.headers.get("Retry-After")
    if err.status == 429 and delay is not None:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay}s"}]
    return {"error": error}


def error_event(message: str, status: int = 500) -> SSE:
    """An error mid-stream, as Google sends one: the error object in a `data:` event."""
    return SSE({"error": {"code": status, "message": message, "status": status_name(status)}})


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The request as an equivalent Chat Completions body (see the module's docstring)."""
    messages: list[dict[str, Any]] = []
    system = as_dict(get(body, "systemInstruction"))
    if system is not None:
        messages.append({"role": "system", "content": _text(system.get("parts"))})
    open_calls: list[tuple[str, str]] = []  # (id, name) of the last model content's unanswered calls
    for i, raw in enumerate(as_list(get(body, "contents")) or []):
        content = as_dict(raw) or {}
        parts = [p for p in as_list(content.get("parts")) or [] if isinstance(p, dict)]
        if content.get("role") == "model":
            open_calls = []
            calls: list[dict[str, Any]] = []
            for j, part in enumerate(parts):
                fc = as_dict(get(part, "functionCall"))
                if fc is None:
                    continue
                given = fc.get("id")
                call_id = given if isinstance(given, str) and given else f"call_{i}_{j}"
                name = str(fc.get("name", ""))
                open_calls.append((call_id, name))
                args = fc.get("args", {})
                text = args if isinstance(args, str) else json.dumps(args if args is not None else {})
                calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": text}})
            message: dict[str, Any] = {"role": "assistant", "content": _text(parts) or None}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        texts: list[str] = []
        for part in parts:
            fr = as_dict(get(part, "functionResponse"))
            if fr is None:
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                continue
            name, rid = str(fr.get("name", "")), fr.get("id")
            match = next((c for c in open_calls if c[0] == rid), None) or next(
                (c for c in open_calls if c[1] == name), None
            )
            if match is not None:
                open_calls.remove(match)
            call_id = match[0] if match else str(rid or "")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _result(fr.get("response"))})
        if texts:
            messages.append({"role": "user", "content": "\n".join(texts)})
    out: dict[str, Any] = {"messages": messages}
    declarations = [
        d
        for tool in as_list(body.get("tools")) or []
        for d in as_list(get(as_dict(tool) or {}, "functionDeclarations")) or []
    ]
    if declarations:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": (as_dict(d) or {}).get("name"),
                    "description": (as_dict(d) or {}).get("description", ""),
                    "parameters": get(as_dict(d) or {}, "parametersJsonSchema")
                    or get(as_dict(d) or {}, "parameters")
                    or {},
                },
            }
            for d in declarations
        ]
    config = as_dict(get(body, "generationConfig")) or {}
    schema = get(config, "responseJsonSchema") or get(config, "responseSchema")
    if isinstance(schema, dict):
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    return out


def _text(parts: object) -> str:
    """The answer text of parts (thought summaries are not)."""
    return "".join(
        p["text"]
        for p in as_list(parts) or []
        if isinstance(p, dict) and isinstance(p.get("text"), str) and p.get("thought") is not True
    )


def _result(response: object) -> str:
    """A function response's text: its "output", "error" (or a guide's "result") when that is its
    only key and text, else its JSON."""
    obj = as_dict(response) or {}
    for key in ("output", "error", "result"):
        if isinstance(obj.get(key), str) and len(obj) == 1:
            return str(obj[key])
    return json.dumps(response)


def parse(body: dict[str, Any], model: str, stream: bool) -> Conversation:
    contents = check(body, model)
    chat = parse_chat({**as_chat(body), "model": model})
    sizes = _sizes(model, [get(body, "systemInstruction"), contents, body.get("tools")], contents[-1])
    return replace(chat, api="gemini", stream=stream, include_usage=True, request=body, **sizes)


# -------------------------------------------------------------------------------- replies


def _args(arguments: str) -> object:
    """A call's arguments as the object Gemini sends; a script's text that is not JSON goes as is."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _usage(u: Usage, done: bool = True) -> JSONDict:
    thoughts = min(u.reasoning_tokens, u.completion_tokens)
    out: JSONDict = {"promptTokenCount": u.prompt_tokens}
    if done:
        out["candidatesTokenCount"] = u.completion_tokens - thoughts
        if thoughts:
            out["thoughtsTokenCount"] = thoughts
    if u.cached_tokens:
        out["cachedContentTokenCount"] = u.cached_tokens
    out["totalTokenCount"] = u.prompt_tokens + (u.completion_tokens if done else 0)
    out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": u.prompt_tokens}]
    return out


def _parts(reply: Reply, conv: Conversation) -> list[JSONDict]:
    """The reply's parts: a thought summary when asked for, text, then each call whole."""
    thinking = thinking_enabled(conv.request)
    config = as_dict(get(as_dict(get(conv.request, "generationConfig")) or {}, "thinkingConfig")) or {}
    parts: list[JSONDict] = []
    if thinking and get(config, "includeThoughts") is True:
        parts.append({"text": THOUGHT_SUMMARY, "thought": True})
    if reply.content or (reply.content is not None and not reply.tool_calls and reply.finish is None):
        parts.append({"text": reply.content})
    for i, tc in enumerate(reply.tool_calls):
        args = _args(tc.arguments)
        part: JSONDict = {"functionCall": {"id": tc.call_id, "name": tc.name, "args": args}}
        if thinking and i == 0:
            part["thoughtSignature"] = signature(tc.name, args)
        parts.append(part)
    if thinking and not reply.tool_calls and parts and "thought" not in parts[-1]:
        parts[-1]["thoughtSignature"] = signature("", {"text": parts[-1].get("text", "")})
    return parts


def _head(rid: str, conv: Conversation) -> JSONDict:
    return {"modelVersion": conv.model, "responseId": rid}


def response(reply: Reply, conv: Conversation, rid: str, created: int) -> JSONDict:
    if reply.blocked is not None:
        return {"promptFeedback": {"blockReason": reply.blocked}, "usageMetadata": _usage(reply.usage, done=False)} | (
            _head(rid, conv)
        )
    candidate: JSONDict = {"index": 0, "finishReason": reply.finish or "STOP"}
    parts = _parts(reply, conv)
    if parts:
        candidate = {"content": {"parts": parts, "role": "model"}, **candidate}
    return {"candidates": [candidate], "usageMetadata": _usage(reply.usage)} | _head(rid, conv)


def stream(reply: Reply, conv: Conversation, rid: str, created: int) -> list[SSE]:
    """Chunks as Gemini streams them: text in pieces, calls whole, the finishReason and the whole
    usage last (a chunk of its own, so that a cut stream always lacks it)."""
    if reply.blocked is not None:
        return [SSE(response(reply, conv, rid, created))]
    head = _head(rid, conv)
    events: list[SSE] = []
    parts = _parts(reply, conv)
    signed_text = parts[-1] if parts and "text" in parts[-1] and "thoughtSignature" in parts[-1] else None
    for part in parts:
        if "functionCall" in part:
            content: list[JSONDict] = [part]
        elif part.get("thought") is True:
            content = [part]
        else:
            text = str(part.get("text", ""))
            content = [{"text": piece} for piece in pieces(text, text_pieces(text, reply.delta_chars))]
        for piece in content:
            candidate = {"content": {"parts": [piece], "role": "model"}, "index": 0}
            events.append(SSE({"candidates": [candidate], "usageMetadata": _usage(reply.usage, done=False)} | head))
    last: JSONDict = {"text": ""}
    if signed_text is not None:  # Gemini streams a text reply's signature on an empty last part
        last["thoughtSignature"] = signed_text["thoughtSignature"]
    final = {"content": {"parts": [last], "role": "model"}, "finishReason": reply.finish or "STOP", "index": 0}
    events.append(SSE({"candidates": [final], "usageMetadata": _usage(reply.usage)} | head))
    return events
