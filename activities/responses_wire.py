"""The OpenAI Responses API on the wire: the transcript to a request body, a response to a reply.

Pure functions, no I/O, the same shape as chat_wire (and the errors of activities.wire):
- `store: false` and the whole transcript on every call: the workflow owns the state, so a
  retried or replayed call never depends on a server-side `previous_response_id`;
- tools go out with `strict: false`: left out, OpenAI normalizes a schema into strict mode
  (every field required), unlike Chat Completions, and optional tool arguments would change;
- `reasoning` items are dropped: the transcript has no place for them;
- a stream is an answer only once `response.completed` (or `.incomplete`) arrives, and the
  response it carries is parsed exactly like a plain body, so both paths give equal replies;
  an argument delta for a call already done is malformed, as a Chat delta after finish_reason;
- a response cut short by its output limit says `finish_reason="length"`, as Chat Completions
  says it (a content filter: "content_filter"; another reason: "incomplete:<reason>");
- untrusted values go through activities.wire's `Reader`, and tool calls get the run's own ids.

Model settings go out under their Responses names (`max_output_tokens`, `reasoning.effort`,
a named `tool_choice` as `{"type": "function", "name": ...}`). `seed` and `stop` are not
Responses parameters and OpenAI refuses unknown ones, so a run that sets them is refused when it
starts (`check_settings`); a compatible server that takes them can get them through `extra_body`,
merged last (never over `OWNED`).
Handoff tools and the typed output's schema are activities.wire's (`function_tools`,
`output_format`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agent_runner.activities.sse import iter_events
from durable_agent_runner.activities.wire import (
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

__all__ = [
    "MalformedResponse", "StreamFailed", "build_request", "check_settings", "parse_response", "parse_stream",
    "parse_usage",
]  # fmt: skip

_USABLE = ("completed", "incomplete")
_TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete"}


def _settings(s: ModelSettings, tools: bool) -> dict[str, Any]:
    """The Responses fields for `s` (no seed, no stop: see the module's docstring); tool_choice
    and parallel_tool_calls only beside tools, as on the Chat wire."""
    plain = {"temperature": s.temperature, "top_p": s.top_p, "max_output_tokens": s.max_output_tokens}
    out: dict[str, Any] = {field: value for field, value in plain.items() if value is not None}
    if s.tool_choice is not None and tools:
        named = s.tool_choice not in TOOL_CHOICES
        out["tool_choice"] = {"type": "function", "name": s.tool_choice} if named else s.tool_choice
    if s.parallel_tool_calls is not None and tools:
        out["parallel_tool_calls"] = s.parallel_tool_calls
    if s.reasoning_effort is not None:
        out["reasoning"] = {"effort": s.reasoning_effort}
    return out


def check_settings(s: ModelSettings) -> list[str]:
    """What the Responses API lacks of `s`, one line each."""
    problems = []
    if s.seed is not None:
        problems.append("seed: the Responses API has no seed (put it in extra_body for a server that takes one)")
    if s.stop:
        problems.append("stop: the Responses API has no stop sequences (put them in extra_body for a server that does)")
    if s.thinking_tokens is not None:
        problems.append("thinking_tokens: the Responses API has no thinking budget; set reasoning_effort instead")
    return problems


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            if m.content:  # a tool-call-only turn is just its function_call items
                items.append({"role": "assistant", "content": m.content})
            items += [
                {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
                for c in m.tool_calls
            ]
        elif isinstance(m, ToolMessage):
            items.append({"type": "function_call_output", "call_id": m.call_id, "output": m.content})
        else:
            items.append({"role": "user", "content": m.content})
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if agent.instructions:
        body["instructions"] = agent.instructions
    tools = function_tools(agent)
    if tools:
        body["tools"] = [
            {"type": "function", "name": name, "description": text, "parameters": parameters, "strict": False}
            for name, text, parameters in tools
        ]
    settings = settings_for(agent, messages)
    check_sendable(settings)
    body |= _settings(settings, bool(tools))
    typed = output_format(agent)
    if typed is not None:
        body["text"] = {"format": {"type": "json_schema", "name": typed[0], "schema": typed[1], "strict": False}}
    if stream:
        body["stream"] = True
    return body | settings.extra_body  # last: a provider's own options win over ours


def parse_usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage(requests=1)
    inp = raw.get("input_tokens_details")
    out = raw.get("output_tokens_details")
    return Usage(
        requests=1,
        input_tokens=count(raw.get("input_tokens")),
        cached_tokens=count(inp.get("cached_tokens")) if isinstance(inp, dict) else 0,
        output_tokens=count(raw.get("output_tokens")),
        reasoning_tokens=count(out.get("reasoning_tokens")) if isinstance(out, dict) else 0,
    )


def _error_text(raw: object, r: Reader) -> str:
    """`code: message` from an error object, an `error` event or a body holding either."""
    if isinstance(raw, dict):
        err = raw["error"] if isinstance(raw.get("error"), dict) else raw
        code, message = err.get("code"), err.get("message")
        if message or code:
            return f"{r.sample(code or 'error', 100)}: {r.sample(message or '', 300)}"
    return r.sample(raw, 300)


def _message_text(item: dict[str, Any]) -> str:
    parts = item.get("content")
    if isinstance(parts, str):
        return parts
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
            text = part.get("text") or part.get("refusal")
            texts.append(text if isinstance(text, str) else "")
    return "".join(texts)


def parse_response(body: object, turn: int, *, mask: Mask | None = None) -> ModelReply:
    r = Reader(mask)
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    status = body.get("status") or "completed"  # some compatible servers leave it out
    if status not in _USABLE:
        raise MalformedResponse(f"response status is {r.sample(status, 100)!r}: {_error_text(body.get('error'), r)}")
    output = body.get("output")
    if not isinstance(output, list):
        raise MalformedResponse("no output in the response")
    texts: list[str] = []
    saw_message = False
    calls: list[ToolCall] = []
    for item in output:
        if not isinstance(item, dict):
            raise MalformedResponse("output item is not a JSON object")
        if item.get("type") == "message":
            saw_message = True
            texts.append(_message_text(item))
        elif item.get("type") == "function_call":
            if not item.get("name"):
                raise MalformedResponse(f"function call without a name: {r.sample(item)}")
            calls.append(r.call(item.get("call_id"), item.get("name"), item.get("arguments")))
        # `reasoning` and any other item type carry nothing the transcript keeps.
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    finish = _finish(str(status), r.sample(reason, 100) if reason else None)
    return ModelReply(
        message=AssistantMessage(
            content=r.text("".join(texts)) if saw_message else None, tool_calls=run_ids(calls, turn)
        ),
        usage=parse_usage(body.get("usage")),
        finish_reason=r.label(finish),
        model=r.label(body.get("model")),
        response_id=r.label(body.get("id")),
    )


# Chat Completions' names for why a reply stopped short, so that one check reads either wire.
_CHAT_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _finish(status: str, reason: str | None) -> str:
    if status == "completed" or reason is None:
        return status
    return _CHAT_FINISH.get(reason) or f"{status}:{reason}"


def _assembled(
    items: dict[int, dict[str, Any]], texts: dict[tuple[int, int], list[str]], args: dict[int, list[str]]
) -> list[dict[str, Any]]:
    """Output items rebuilt from the deltas, for a terminal event that does not list them."""
    out: list[dict[str, Any]] = []
    for i in sorted(set(items) | {k[0] for k in texts} | set(args)):
        parts = ["".join(v) for k, v in sorted(texts.items()) if k[0] == i]
        item = dict(items.get(i) or {"type": "message" if parts else "function_call"})
        if parts:
            item["content"] = [{"type": "output_text", "text": p} for p in parts]
        if i in args:
            item["arguments"] = "".join(args[i])
        out.append(item)
    return out


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _piece(value: object) -> str:
    """A delta's text: a string, or nothing."""
    return value if isinstance(value, str) else ""


async def parse_stream(
    lines: AsyncIterator[str],
    turn: int,
    *,
    on_delta: Callable[[str], None] | None = None,
    mask: Mask | None = None,
    limit: int | None = None,
) -> ModelReply:
    """Assemble a streamed response; `on_delta` sees each piece of text as it arrives (raw:
    a secret may span pieces, so the caller masks what it shows). Text and argument deltas past
    `limit` characters make it malformed (a `.done` event replaces its deltas: one line, which
    the caller bounds)."""
    r = Reader(mask)
    budget = Budget(limit)
    head: dict[str, Any] = {}
    items: dict[int, dict[str, Any]] = {}
    texts: dict[tuple[int, int], list[str]] = {}
    args: dict[int, list[str]] = {}
    done: set[int] = set()  # output items whose arguments are whole
    index = 0
    async for sse in iter_events(lines):
        if sse.data.strip() == "[DONE]":
            continue  # not Responses API, but some compatible servers end with it anyway
        event = r.json_object(sse.data)
        kind = event["type"] if isinstance(event.get("type"), str) else sse.event
        index = _int(event.get("output_index"), index)
        part = (index, _int(event.get("content_index"), 0))
        if kind == "error":
            raise StreamFailed(f"error event mid-stream: {_error_text(event, r)}")
        if kind == "response.failed":
            failed = event.get("response")
            raise StreamFailed(f"response failed mid-stream: {_error_text(failed or event, r)}")
        if kind in _TERMINAL:
            final = event.get("response")
            body = {**head, **final} if isinstance(final, dict) else dict(head)
            if not body.get("output"):
                body["output"] = _assembled(items, texts, args)
            if kind == "response.incomplete" or body.get("status") in (None, "", "queued", "in_progress"):
                body["status"] = _TERMINAL[kind]  # how it ended is the event's to say, not the head's
            return parse_response(body, turn, mask=mask)
        if kind in ("response.created", "response.in_progress") and isinstance(event.get("response"), dict):
            head = event["response"]
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(
            event.get("item"), dict
        ):
            items[index] = dict(event["item"])
            if kind.endswith(".done"):  # the finished item is authoritative over its deltas
                done.add(index)
                args.pop(index, None)
                texts = {k: v for k, v in texts.items() if k[0] != index}
        elif kind == "response.output_text.delta":
            delta = budget.take(utf8(_piece(event.get("delta"))))
            texts.setdefault(part, []).append(delta)
            if on_delta is not None and delta:
                on_delta(delta)
        elif kind == "response.output_text.done":
            texts[part] = [_piece(event.get("text"))]
        elif kind == "response.function_call_arguments.delta":
            if index in done:
                raise MalformedResponse(f"an argument delta for output item {index} after it was done")
            args.setdefault(index, []).append(budget.take(_piece(event.get("delta"))))
        elif kind == "response.function_call_arguments.done":
            done.add(index)
            whole = event.get("arguments")
            args[index] = [whole if isinstance(whole, str) else r.arguments(whole)]
            if event.get("name"):
                items.setdefault(index, {"type": "function_call"})["name"] = event["name"]
    raise StreamFailed("stream ended before response.completed")
