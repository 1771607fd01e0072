"""Gemini's API (generativelanguage v1beta) on the wire: the transcript to a request body, a
response to a reply.

Pure functions, no I/O, the same shape as chat_wire (and the errors of activities.wire). The body
carries no model and no stream flag: both are in the URL, which the caller builds
(`{base}/v1beta/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse`);
`build_request` takes them only to be a `Wire`.

The request is activities.gemini_request's (`build_request`, `check_settings`, re-exported
here): its docstring says how the transcript, tools and settings map.

The reply:
- text parts are joined; parts marked `thought: true` are thought summaries, never answer text
  (their signature is kept); other part kinds (code execution, inline data) carry nothing the
  transcript keeps;
- usage: `promptTokenCount` + `toolUsePromptTokenCount` are the input tokens (the second is
  billed as input), `cachedContentTokenCount` the cached part of them; output tokens are
  `candidatesTokenCount` + `thoughtsTokenCount` (thoughts are billed as output, as OpenAI's
  completion tokens hold its reasoning tokens), and `reasoning_tokens` the thoughts alone;
- `finishReason` in Chat's words: STOP is "stop" ("tool_calls" when the reply calls tools: Gemini
  says STOP then too), MAX_TOKENS "length", the safety family (SAFETY, RECITATION, BLOCKLIST,
  PROHIBITED_CONTENT, SPII, IMAGE_*) "content_filter", any other its name in lower case.
  MALFORMED_FUNCTION_CALL (and MALFORMED_RESPONSE) is `MalformedResponse`: the model failed to
  write a call, another attempt usually does, and after a few the run fails saying so, instead
  of ending on an empty answer;
- a withheld reply (a content filter with no text and no call) and a blocked prompt
  (`promptFeedback.blockReason`, no candidates) are replies with `finish_reason
  "content_filter"` whose text says what Gemini said, e.g. "[Gemini blocked the prompt:
  SAFETY]": the run ends with a reason a person can read, never a crash nor an empty answer, and
  the finish reason tells a program it is not the model's own answer;
- a stream (`alt=sse`) is a `data:` event per GenerateContentResponse chunk and ends when the
  body ends: text appends (`on_delta` sees answer text only), calls come whole, usage is the
  last chunk's that carries it. It is an answer only if a chunk carried a finishReason (or the
  prompt was blocked); content after the finishReason, or an `error` object, fails it. The
  assembled chunks are parsed exactly like a plain body, so both paths give equal replies.

Untrusted values go through activities.wire's `Reader` (signatures too: masked, never cut), and
tool calls get the run's own ids.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agent_runner.activities.gemini_request import SKIP_SIGNATURE, build_request, check_settings
from durable_agent_runner.activities.sse import iter_events
from durable_agent_runner.activities.wire import (
    MAX_TOOL_CALLS,
    Budget,
    MalformedResponse,
    Mask,
    Reader,
    StreamFailed,
    count,
    run_ids,
    utf8,
)
from durable_agent_runner.workflows.types import (
    AssistantMessage,
    ModelReply,
    Thinking,
    ToolCall,
    Usage,
)

__all__ = [
    "SKIP_SIGNATURE",
    "build_request",
    "check_settings",
    "parse_response",
    "parse_stream",
    "parse_usage",
]

_FILTERED = frozenset(
    {
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
        "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION",
    }
)  # fmt: skip
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"})


# -------------------------------------------------------------------------------- the reply


def parse_usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    inputs = count(count(raw.get("promptTokenCount")) + count(raw.get("toolUsePromptTokenCount")))
    thoughts = count(raw.get("thoughtsTokenCount"))
    return Usage(
        requests=1,
        input_tokens=inputs,
        cached_tokens=min(count(raw.get("cachedContentTokenCount")), inputs),
        output_tokens=count(count(raw.get("candidatesTokenCount")) + thoughts),
        reasoning_tokens=thoughts,
    )


def _error_text(raw: object, r: Reader) -> str:
    """`STATUS: message` from Google's error object, or a body holding one."""
    if isinstance(raw, dict):
        err = raw["error"] if isinstance(raw.get("error"), dict) else raw
        code, message = err.get("status") or err.get("code"), err.get("message")
        if message or code:
            return f"{r.sample(code or 'error', 100)}: {r.sample(message or '', 300)}"
    return r.sample(raw, 300)


def _finish(raw: str | None, calls: bool) -> str | None:
    """Chat's name for why the reply stopped; `raw` is already masked."""
    if raw is None:
        return None
    if raw == "STOP":
        return "tool_calls" if calls else "stop"
    if raw == "MAX_TOKENS":
        return "length"
    return "content_filter" if raw in _FILTERED else raw.lower()


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _blocked(body: dict[str, Any], feedback: dict[str, Any], r: Reader) -> ModelReply:
    reason = r.label(feedback.get("blockReason")) or "blocked"
    detail = r.label(feedback.get("blockReasonMessage"), 500)
    return ModelReply(
        message=AssistantMessage(content=f"[Gemini blocked the prompt: {reason}{f': {detail}' if detail else ''}]"),
        usage=parse_usage(body.get("usageMetadata")),
        finish_reason="content_filter",
        model=r.label(body.get("modelVersion")),
        response_id=r.label(body.get("responseId")),
    )


def parse_response(body: object, turn: int, *, mask: Mask | None = None) -> ModelReply:
    r = Reader(mask)
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    if body.get("error") is not None:
        raise MalformedResponse(f"an error in a 200 body: {_error_text(body['error'], r)}")
    candidates = body.get("candidates")
    feedback = body.get("promptFeedback")
    if not isinstance(candidates, list) or not candidates:
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            return _blocked(body, feedback, r)
        raise MalformedResponse("no candidates in the response")
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise MalformedResponse("candidates[0] is not a JSON object")
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if parts is not None and not isinstance(parts, list):
        raise MalformedResponse(f"content.parts is not a list: {r.sample(parts)}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    signed: list[tuple[int | None, str]] = []  # (index of the call it came on, or None: text)
    for part in parts or []:
        if not isinstance(part, dict):
            raise MalformedResponse(f"a content part is not a JSON object: {r.sample(part)}")
        if "functionCall" in part:
            fc = part["functionCall"]
            if not isinstance(fc, dict):
                raise MalformedResponse(f"functionCall is not an object: {r.sample(fc)}")
            calls.append(r.call(fc.get("id"), fc.get("name"), fc.get("args")))
            where: int | None = len(calls) - 1
        else:
            if isinstance(part.get("text"), str) and part.get("thought") is not True:
                texts.append(part["text"])
            where = None
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            signed.append((where, r.text(signature)))
    raw_finish = r.label(candidate.get("finishReason"))
    if raw_finish in _MALFORMED:
        detail = r.sample(_string(candidate.get("finishMessage")), 300)
        raise MalformedResponse(f"Gemini stopped with {raw_finish}{f': {detail}' if detail else ''}")
    calls = run_ids(calls, turn)
    finish = _finish(raw_finish, bool(calls))
    text = r.text("".join(texts)) or None
    if text is None and not calls and finish == "content_filter":
        text = f"[Gemini withheld the reply: {raw_finish}]"
    thinking = [
        Thinking(provider="gemini", kind="signature", signature=s, call_id=calls[i].call_id if i is not None else "")
        for i, s in signed
    ]
    return ModelReply(
        message=AssistantMessage(content=text, tool_calls=calls, thinking=thinking),
        usage=parse_usage(body.get("usageMetadata")),
        finish_reason=finish,
        model=r.label(body.get("modelVersion")),
        response_id=r.label(body.get("responseId")),
    )


async def parse_stream(
    lines: AsyncIterator[str],
    turn: int,
    *,
    on_delta: Callable[[str], None] | None = None,
    mask: Mask | None = None,
    limit: int | None = None,
) -> ModelReply:
    """Assemble a streamed response; `on_delta` sees each piece of answer text as it arrives
    (raw: a secret may span pieces, so the caller masks what it shows). Text and arguments past
    `limit` characters make it malformed; thought text is not kept, so it is not counted."""
    r = Reader(mask)
    budget = Budget(limit)
    parts: list[dict[str, Any]] = []
    head: dict[str, Any] = {}  # the latest usageMetadata, modelVersion, responseId, promptFeedback
    finish: dict[str, Any] | None = None  # the candidate fields that ended it
    calls = 0
    async for event in iter_events(lines):
        if event.data.strip() == "[DONE]":
            continue  # not Gemini's, but a proxy in front of it may add one
        chunk = r.json_object(event.data)
        if chunk.get("error") is not None:
            raise StreamFailed(f"error event mid-stream: {_error_text(chunk['error'], r)}")
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback"):
            if chunk.get(key):
                head[key] = chunk[key]
        candidates = chunk.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if candidate is None:
            continue
        if not isinstance(candidate, dict):
            raise MalformedResponse("candidates[0] is not a JSON object")
        content = candidate.get("content")
        more = content.get("parts") if isinstance(content, dict) else None
        if more is not None and not isinstance(more, list):
            raise MalformedResponse(f"content.parts is not a list: {r.sample(more)}")
        if more and finish is not None:
            raise MalformedResponse(f"content after the finishReason: {r.sample(more)}")
        for part in more or []:
            if not isinstance(part, dict):
                raise MalformedResponse(f"a content part is not a JSON object: {r.sample(part)}")
            if "functionCall" in part:
                calls += 1
                if calls > MAX_TOOL_CALLS:
                    raise MalformedResponse(f"more than {MAX_TOOL_CALLS} tool calls in one reply")
                fc = part["functionCall"]
                budget.take(r.arguments(fc.get("args")) if isinstance(fc, dict) else "")
            elif part.get("thought") is True:
                part = {k: v for k, v in part.items() if k != "text"}  # never kept: not held either
            elif isinstance(part.get("text"), str):
                piece = budget.take(utf8(part["text"]))
                if piece and on_delta is not None:
                    on_delta(piece)
            parts.append(part)
        if candidate.get("finishReason"):
            finish = {k: candidate[k] for k in ("finishReason", "finishMessage") if k in candidate}
    feedback = head.get("promptFeedback")
    blocked = isinstance(feedback, dict) and feedback.get("blockReason")
    if finish is None and not blocked:
        raise StreamFailed("stream ended before its finishReason")
    body = dict(head)
    body["candidates"] = [{"content": {"role": "model", "parts": parts}, **finish}] if finish is not None else []
    return parse_response(body, turn, mask=mask)
