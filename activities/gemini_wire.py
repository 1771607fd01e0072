"""Gemini's API (generativelanguage v1beta) on the wire: the transcript to a request body, a
response to a reply.

Pure functions, no I/O, the same shape as chat_wire (and the errors of activities.wire). The body
carries no model and no stream flag: both are in the URL, which the caller builds
(`{base}/v1beta/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse`);
`build_request` takes them only to be a `Wire`.

The transcript:
- the agent's instructions are `systemInstruction`; messages are `contents` with the roles
  "user" and "model"; contents of one role in a row become one content (tool results, then a
  user's text sent mid-turn), so the roles alternate whatever the transcript holds;
- an assistant message is a model content: its text, then one `functionCall` part per call.
  `args` is an object (a Struct): arguments that are not a JSON object (the model sent text that
  is not JSON; the tool already answered that) go back as `{}`. An assistant message with
  neither text nor calls is left out: Gemini refuses a content without parts;
- a tool result is a `functionResponse` part, `{"result": text}` (`{"error": text}` when the
  tool failed), in a user content with the other results of that step;
- ids: Gemini 3 gives each call an `id` and asks for it back on the call and its response;
  Gemini 2.5 gives none. The provider's id goes back on both exactly as it came, and no id goes
  when the provider gave none (or gave one id twice in a step: it would pair nothing);
- thought signatures: a `Thinking(provider="gemini", kind="signature")` rides back, unchanged,
  as `thoughtSignature` on the part it came on (its call's `functionCall` part, or the text part
  when its `call_id` is ""; the last such one when there were several). Other providers'
  thinking is dropped. Gemini 3 refuses a step of the current turn (since the last user message)
  whose first call has no signature; a step that has none (it came from another provider after
  a fallback) gets Google's documented placeholder `skip_thought_signature_validator`.

Tools go out as `parametersJsonSchema` and typed output as `responseJsonSchema` (with
`responseMimeType: application/json`): both take JSON Schema as it is. The older `parameters` and
`responseSchema` take an OpenAPI subset that has no `$ref`/`$defs`, `additionalProperties` or
`title`, all of which pydantic's schemas use; converting would lose meaning (a recursive model
cannot be inlined), so the JSON Schema fields are used instead of a conversion.

Settings go to `generationConfig`: temperature, topP, maxOutputTokens, stopSequences, seed;
`thinking_tokens` is `thinkingConfig.thinkingBudget`; `reasoning_effort` is
`thinkingConfig.thinkingLevel` (MINIMAL/LOW/MEDIUM/HIGH: Gemini 3's control; which levels a
model takes is the model's to say, with a 400). Both at once are refused (`check_settings`): the
API refuses a budget and a level together. Thought summaries (`includeThoughts`) are not asked
for: the transcript keeps only signatures, never thought text. `tool_choice` is
`toolConfig.functionCallingConfig.mode` AUTO / ANY / NONE; a tool's name is ANY with
`allowedFunctionNames: [name]`. `parallel_tool_calls=False` is refused: Gemini has no switch
for it (True is what it does anyway). `extra_body` is merged last (never over `OWNED`); its
`generationConfig` is merged key by key into ours, so `{"generationConfig": {"topK": 40}}` adds
to the settings instead of replacing them.

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

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agent_runner.activities.sse import iter_events
from durable_agent_runner.activities.wire import (
    MAX_TOOL_CALLS,
    BadSettings,
    Budget,
    MalformedResponse,
    Mask,
    Reader,
    StreamFailed,
    check_extra_body,
    count,
    function_tools,
    output_format,
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
    Thinking,
    ToolCall,
    ToolMessage,
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

# Google's documented signature for a step the model did not write itself (another provider's).
SKIP_SIGNATURE = "skip_thought_signature_validator"
_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
_FILTERED = frozenset(
    {
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
        "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION",
    }
)  # fmt: skip
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE"})


# ------------------------------------------------------------------------------ the request


def check_settings(settings: ModelSettings) -> list[str]:
    """One line per setting Gemini's API cannot honour (the run is refused when it starts)."""
    problems: list[str] = []
    if settings.parallel_tool_calls is False:
        problems.append("parallel_tool_calls: Gemini's API has no switch to turn parallel function calls off")
    if settings.thinking_tokens is not None and settings.reasoning_effort is not None:
        problems.append(
            "thinking_tokens and reasoning_effort: Gemini takes a thinking budget or a thinking level, not both"
        )
    return problems


def _generation_config(s: ModelSettings, typed: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    plain = {"temperature": s.temperature, "topP": s.top_p, "maxOutputTokens": s.max_output_tokens, "seed": s.seed}
    out: dict[str, Any] = {field: value for field, value in plain.items() if value is not None}
    if s.stop:
        out["stopSequences"] = list(s.stop)
    thinking: dict[str, Any] = {}
    if s.thinking_tokens is not None:
        thinking["thinkingBudget"] = s.thinking_tokens
    if s.reasoning_effort is not None:
        thinking["thinkingLevel"] = _LEVELS[s.reasoning_effort]
    if thinking:
        out["thinkingConfig"] = thinking
    if typed is not None:
        out["responseMimeType"] = "application/json"
        out["responseJsonSchema"] = typed[1]
    return out


def _tool_config(choice: str) -> dict[str, Any]:
    mode = _MODES.get(choice)
    config: dict[str, Any] = {"mode": mode} if mode else {"mode": "ANY", "allowedFunctionNames": [choice]}
    return {"functionCallingConfig": config}


def _args(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _provider_ids(message: AssistantMessage) -> dict[str, str]:
    """The run's call id -> the id the provider gave it, when each call has its own."""
    ids = [c.provider_id for c in message.tool_calls]
    if not all(ids) or len(set(ids)) != len(ids):
        return {}
    return {c.call_id: c.provider_id for c in message.tool_calls}


def _model_parts(message: AssistantMessage, ids: dict[str, str], current: bool) -> list[dict[str, Any]]:
    signed = [t for t in message.thinking if t.provider == "gemini" and t.kind == "signature" and t.signature]
    by_call = {t.call_id: t.signature for t in signed if t.call_id}
    on_text = next((t.signature for t in reversed(signed) if not t.call_id), None)
    parts: list[dict[str, Any]] = []
    if message.content or on_text:
        parts.append({"text": message.content or ""} | ({"thoughtSignature": on_text} if on_text else {}))
    for i, call in enumerate(message.tool_calls):
        fc: dict[str, Any] = {"name": call.name, "args": _args(call.arguments)}
        if call.call_id in ids:
            fc["id"] = ids[call.call_id]
        part: dict[str, Any] = {"functionCall": fc}
        signature = by_call.get(call.call_id) or (SKIP_SIGNATURE if current and i == 0 else None)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _contents(messages: list[Message]) -> list[dict[str, Any]]:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    ids: dict[str, str] = {}  # run call id -> provider id, for the results that answer them
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            own = _provider_ids(m)
            ids |= own
            role, parts = "model", _model_parts(m, own, current=i > last_user)
        elif isinstance(m, ToolMessage):
            fr: dict[str, Any] = {"name": m.name, "response": {"error" if m.is_error else "result": m.content}}
            if m.call_id in ids:
                fr["id"] = ids[m.call_id]
            role, parts = "user", [{"functionResponse": fr}]
        else:
            role, parts = "user", [{"text": m.content}]
        if not parts:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    return out


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    """The body of a generateContent / streamGenerateContent call (`model` and `stream` are the
    URL's, not the body's)."""
    settings = settings_for(agent, messages)
    problems = check_settings(settings)
    if problems:
        raise BadSettings("; ".join(problems))
    check_extra_body(settings.extra_body)
    body: dict[str, Any] = {"contents": _contents(messages)}
    if agent.instructions:
        body["systemInstruction"] = {"parts": [{"text": agent.instructions}]}
    tools = function_tools(agent)
    if tools:
        declarations = [
            {"name": name, "description": text, "parametersJsonSchema": parameters} for name, text, parameters in tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
        if settings.tool_choice is not None:
            body["toolConfig"] = _tool_config(settings.tool_choice)
    config = _generation_config(settings, output_format(agent))
    extra = dict(settings.extra_body)
    if isinstance(extra.get("generationConfig"), dict):
        config |= extra.pop("generationConfig")
    if config:
        body["generationConfig"] = config
    return body | extra  # last: a provider's own options win over ours


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
