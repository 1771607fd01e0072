"""Gemini's API (generativelanguage v1beta) in the fake: `generateContent` and
`streamGenerateContent?alt=sse`, the model and the stream from the path (dialects.call_for).

A request is refused as the real API refuses it, with Google's error shape
(`{"error": {"code", "message", "status"}}`, e.g. 400 INVALID_ARGUMENT):
- without the `x-goog-api-key` header (403 PERMISSION_DENIED; any key is accepted);
- with a field the API does not know, at the top level, in a content, a part, the
  generationConfig or its thinkingConfig ("Invalid JSON payload received. Unknown name ...");
  either spelling of a known field (camelCase or snake_case) is accepted, as the real API does;
- without contents, with a content whose role is not "user" or "model", or without parts;
- with a user content of `functionResponse` parts that does not answer the model content just
  before it: a call of that content for each response (by name, and by id when both have one),
  as many responses as calls;
- with a thinking budget and a thinking level at once, or a response schema without
  `responseMimeType: application/json`, or both response schema fields;
- with a thought signature that is not the one it issued (changed, moved to another call), or,
  when the request enables thinking, a step of the current turn (model contents since the last
  user text) whose first call carries none. Google's placeholder `skip_thought_signature_validator`
  passes, as on the real API.

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

import base64
import hashlib
import json
from dataclasses import replace
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import (
    Conversation,
    _sizes,
    as_dict,
    as_list,
    canonical,
    parse_chat,
)
from durable_agent_runner.testing.fake_llm.wire import SSE, ApiError, JSONDict, Reply, Usage, pieces, text_pieces

SKIP_SIGNATURE = "skip_thought_signature_validator"
THOUGHT_SUMMARY = "Thinking about what the request needs."
_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}  # fmt: skip


def _names(*camel: str) -> frozenset[str]:
    """Each field under both of the spellings the real API reads."""
    snake = ("".join(f"_{c.lower()}" if c.isupper() else c for c in name) for name in camel)
    return frozenset((*camel, *snake))


_REQUEST = _names(
    "model", "contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig",
    "cachedContent",
)  # fmt: skip
_CONTENT = _names("role", "parts")
_PART = _names(
    "text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode", "codeExecutionResult",
    "thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution",
)  # fmt: skip
_CONFIG = _names(
    "stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities",
    "candidateCount", "maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty",
    "frequencyPenalty", "responseLogprobs", "logprobs", "enableEnhancedCivicAnswers", "speechConfig",
    "thinkingConfig", "imageConfig", "mediaResolution",
)  # fmt: skip
_THINKING = _names("includeThoughts", "thinkingBudget", "thinkingLevel")


def status_name(status: int) -> str:
    return _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def error_body(err: ApiError) -> JSONDict:
    return {"error": {"code": err.status, "message": err.message, "status": status_name(err.status)}}


def error_event(message: str, status: int = 500) -> SSE:
    """An error mid-stream, as Google sends one: the error object in a `data:` event."""
    return SSE({"error": {"code": status, "message": message, "status": status_name(status)}})


def invalid(message: str) -> ApiError:
    return ApiError(400, message)


def require_key(headers: dict[str, str]) -> None:
    """The real API answers a call without a key 403 (a key in the URL's `key=` is not read here)."""
    if not headers.get("x-goog-api-key"):
        raise ApiError(
            403,
            "Method doesn't allow unregistered callers (callers without established identity). "
            "Please use API Key or other form of API consumer identity to call this API.",
        )


# ------------------------------------------------------------------------------- requests


def _get(obj: dict[str, Any], camel: str) -> Any:
    """A field under either spelling."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return obj.get(camel, obj.get(snake))


def _known(obj: dict[str, Any], fields: frozenset[str], where: str) -> None:
    unknown = sorted(set(obj) - fields)
    if unknown:
        at = f" at '{where}'" if where else ""
        raise invalid(f'Invalid JSON payload received. Unknown name "{unknown[0]}"{at}: Cannot find field.')


def _object(value: object, where: str) -> dict[str, Any]:
    obj = as_dict(value)
    if obj is None:
        raise invalid(f"Invalid JSON payload received. Invalid value at '{where}': expected an object.")
    return obj


def signature(name: str, args: object) -> str:
    """The thought signature the fake gives a call: the same for the same call, checkable later."""
    digest = hashlib.sha256(f"fake-gemini\n{name}\n{canonical(args if isinstance(args, dict) else {})}".encode())
    return base64.b64encode(digest.digest()[:24]).decode()


def thinking_enabled(body: dict[str, Any]) -> bool:
    config = as_dict(_get(as_dict(_get(body, "generationConfig")) or {}, "thinkingConfig")) or {}
    budget = _get(config, "thinkingBudget")
    return bool(_get(config, "thinkingLevel")) or (budget is not None and budget != 0)


def _check_config(body: dict[str, Any]) -> None:
    config = _get(body, "generationConfig")
    if config is None:
        return
    config = _object(config, "generation_config")
    _known(config, _CONFIG, "generation_config")
    thinking = _get(config, "thinkingConfig")
    if thinking is not None:
        thinking = _object(thinking, "generation_config.thinking_config")
        _known(thinking, _THINKING, "generation_config.thinking_config")
        if _get(thinking, "thinkingBudget") is not None and _get(thinking, "thinkingLevel") is not None:
            raise invalid("You can only set only one of thinking budget and thinking level.")
    schema, json_schema = _get(config, "responseSchema"), _get(config, "responseJsonSchema")
    if schema is not None and json_schema is not None:
        raise invalid("response_schema and response_json_schema cannot both be set.")
    if (schema is not None or json_schema is not None) and _get(config, "responseMimeType") != "application/json":
        raise invalid("response_mime_type must be application/json when a response schema is set.")


def _calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [fc for p in parts if (fc := as_dict(_get(p, "functionCall"))) is not None]


def _check_contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = _get(body, "contents")
    if raw is None:
        raise invalid("* GenerateContentRequest.contents: contents is not specified")
    items = as_list(raw)
    if items is None:
        raise invalid("Invalid JSON payload received. Invalid value at 'contents': expected a list.")
    if not items:
        raise invalid("* GenerateContentRequest.contents: contents is not specified")
    contents: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        content = _object(item, f"contents[{i}]")
        _known(content, _CONTENT, f"contents[{i}]")
        if content.get("role") not in ("user", "model"):
            raise invalid(f"Please use a valid role: user, model. (contents[{i}].role: {content.get('role')!r})")
        parts = as_list(content.get("parts"))
        if not parts:
            raise invalid(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.")
        for j, part in enumerate(parts):
            _known(_object(part, f"contents[{i}].parts[{j}]"), _PART, f"contents[{i}].parts[{j}]")
        contents.append(content)
    for i in range(len(contents)):
        _check_responses(contents, i)
    return contents


def _check_responses(contents: list[dict[str, Any]], i: int) -> None:
    """A user content of function responses answers the calls of the model content before it."""
    responses = [fr for p in contents[i]["parts"] if (fr := as_dict(_get(p, "functionResponse"))) is not None]
    if not responses:
        return
    calls = _calls(contents[i - 1]["parts"]) if i > 0 and contents[i - 1]["role"] == "model" else []
    if not calls:
        raise invalid(
            f"Please ensure that function response turn comes immediately after a function call turn. (contents[{i}])"
        )
    if len(responses) != len(calls):
        raise invalid(
            "Please ensure that the number of function response parts is equal to the number of function "
            f"call parts of the function call turn. (contents[{i}]: {len(responses)} responses, {len(calls)} calls)"
        )
    open_calls = list(calls)
    for fr in responses:
        match = next(
            (
                c
                for c in open_calls
                if c.get("name") == fr.get("name") and (not c.get("id") or not fr.get("id") or c["id"] == fr["id"])
            ),
            None,
        )
        if match is None:
            raise invalid(
                f"Function response {fr.get('name')!r} in contents[{i}] answers no function call of the "
                "previous model turn."
            )
        open_calls.remove(match)


def _check_signatures(contents: list[dict[str, Any]], thinking: bool) -> None:
    last_user_text = max(
        (i for i, c in enumerate(contents) if c["role"] == "user" and any("text" in p for p in c["parts"])),
        default=-1,
    )
    for i, content in enumerate(contents):
        if content["role"] != "model":
            continue
        first = True
        for part in content["parts"]:
            fc = as_dict(_get(part, "functionCall"))
            if fc is None:
                continue
            given = _get(part, "thoughtSignature")
            if (
                given is not None
                and given != SKIP_SIGNATURE
                and given != signature(str(fc.get("name")), fc.get("args"))
            ):
                raise invalid(f"Corrupted thought signature. (contents[{i}], function call {fc.get('name')!r})")
            if first and given is None and thinking and i > last_user_text:
                raise invalid(
                    f"Function call `{fc.get('name')}` in the `{i}.` content block is missing a `thought_signature`."
                )
            first = False


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The request as an equivalent Chat Completions body (see the module's docstring)."""
    messages: list[dict[str, Any]] = []
    system = as_dict(_get(body, "systemInstruction"))
    if system is not None:
        messages.append({"role": "system", "content": _text(system.get("parts"))})
    open_calls: list[tuple[str, str]] = []  # (id, name) of the last model content's unanswered calls
    for i, raw in enumerate(as_list(_get(body, "contents")) or []):
        content = as_dict(raw) or {}
        parts = [p for p in as_list(content.get("parts")) or [] if isinstance(p, dict)]
        if content.get("role") == "model":
            open_calls = []
            calls: list[dict[str, Any]] = []
            for j, part in enumerate(parts):
                fc = as_dict(_get(part, "functionCall"))
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
            fr = as_dict(_get(part, "functionResponse"))
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
        for d in as_list(_get(as_dict(tool) or {}, "functionDeclarations")) or []
    ]
    if declarations:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": (as_dict(d) or {}).get("name"),
                    "description": (as_dict(d) or {}).get("description", ""),
                    "parameters": _get(as_dict(d) or {}, "parametersJsonSchema")
                    or _get(as_dict(d) or {}, "parameters")
                    or {},
                },
            }
            for d in declarations
        ]
    config = as_dict(_get(body, "generationConfig")) or {}
    schema = _get(config, "responseJsonSchema") or _get(config, "responseSchema")
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
    """A function response's text: its "result" or "error" when that is text, else its JSON."""
    obj = as_dict(response) or {}
    for key in ("result", "error", "output"):
        if isinstance(obj.get(key), str) and len(obj) == 1:
            return str(obj[key])
    return json.dumps(response)


def parse(body: dict[str, Any], model: str, stream: bool) -> Conversation:
    _known(body, _REQUEST, "")
    if body.get("model") not in (None, model, f"models/{model}"):
        raise invalid(f"The model in the body ({body.get('model')!r}) is not the path's ({model!r}).")
    contents = _check_contents(body)
    _check_config(body)
    _check_signatures(contents, thinking_enabled(body))
    chat = parse_chat({**as_chat(body), "model": model})
    sizes = _sizes(model, [_get(body, "systemInstruction"), contents, body.get("tools")], contents[-1])
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
    config = as_dict(_get(as_dict(_get(conv.request, "generationConfig")) or {}, "thinkingConfig")) or {}
    parts: list[JSONDict] = []
    if thinking and _get(config, "includeThoughts") is True:
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
