"""Parse a Chat Completions or Responses request into one API-neutral `Conversation`.

Scenarios only look at the `Conversation`, so both APIs behave alike. Validation mirrors
OpenAI's 400 errors for the mistakes a client can make (missing `model`, `messages`, `input`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from durable_agent_runner.testing.fake_llm.prompt_cache import Prefixes
from durable_agent_runner.testing.fake_llm.wire import ApiError

Api = Literal["chat", "responses", "anthropic", "gemini"]


@dataclass(frozen=True)
class ToolResult:
    """A tool result found in the request, joined to the call that asked for it."""

    call_id: str
    name: str  # "" when no call in the request carries this call_id
    arguments: str  # the call's raw JSON arguments, "" when unmatched
    output: str


@dataclass(frozen=True)
class Conversation:
    api: Api
    model: str
    stream: bool
    include_usage: bool
    turn: int  # assistant turns already in the request
    turn_since_user: int  # assistant turns after the last user message
    last_user_text: str
    tool_names: tuple[str, ...]
    results_since_user: tuple[ToolResult, ...]
    prompt_chars: int  # size of everything the model reads, for the token estimate
    prefix_chars: int  # same without the last input item: the part a prompt cache could hold
    fingerprint: str  # hash of what the reply depends on: stable ids for retried requests
    flags: tuple[str, ...]  # wire quirks noticed (logged, never rejected)
    user_texts: tuple[str, ...] = ()  # every user message's text, in order
    instructions: str = ""  # system and developer messages, or the Responses `instructions`
    # The request body as sent, for a scenario that reads what this class does not model
    # (tool parameters, the response format: see durable_agent_runner/testing/scenarios/team.py).
    request: dict[str, Any] = field(default_factory=lambda: {}, repr=False, compare=False)
    # APIs that mark what to cache (Anthropic's cache_control): the request's prefixes, and what
    # the server's prompt cache made of them (characters read, written; prompt_cache.py).
    prefixes: Prefixes | None = field(default=None, repr=False, compare=False)
    cache_chars: tuple[int, int] | None = None


def as_dict(value: object) -> dict[str, Any] | None:
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any] | None:
    # Through Any: pyright narrows to list[Unknown], mypy to list[Any]; both accept this.
    return cast(Any, value) if isinstance(value, list) else None


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_text(content: object) -> str:
    """Text of a message content: a string, or a list of parts with `text` (any part type)."""
    if isinstance(content, str):
        return content
    parts = as_list(content) or []
    texts: list[str] = []
    for part in parts:
        text = (as_dict(part) or {}).get("text")
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts)


def _sizes(model: str, prompt: object, last: object) -> dict[str, Any]:
    # One serialization of the whole prompt serves the token estimate and the fingerprint
    # (a 1,000-turn history is large; dumping it several times per request adds up).
    text = canonical(prompt)
    last_len = len(canonical(last)) + 1 if last is not None else 0
    digest = hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()[:24]
    return {"prompt_chars": len(text), "prefix_chars": len(text) - last_len, "fingerprint": digest}


def _common(body: dict[str, Any]) -> tuple[str, bool]:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(
            400,
            "you must provide a model parameter",
            param="model",
            code="missing_required_parameter",
        )
    return model, body.get("stream") is True


def check_tool_choice(body: dict[str, Any]) -> None:
    """OpenAI's checks of `tool_choice` (both APIs): only beside tools, and a named function must
    be one of them."""
    choice = body.get("tool_choice")
    if choice is None:
        return
    names = _tool_names(body)
    if not names:
        message = "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
        raise ApiError(400, message, param="tool_choice")
    spec = as_dict(choice)
    if spec is not None and spec.get("type") == "function":
        name = (as_dict(spec.get("function")) or spec).get("name")  # Chat nests it; Responses does not
        if name not in names:
            raise ApiError(
                400, f"Invalid value for 'tool_choice': function {name!r} not found in 'tools'.", param="tool_choice"
            )


def _tool_names(body: dict[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for tool in as_list(body.get("tools")) or []:
        spec = as_dict(tool) or {}
        # Chat nests the name under "function"; the Responses API puts it at the top.
        name = (as_dict(spec.get("function")) or spec).get("name")
        if isinstance(name, str):
            names.append(name)
    return tuple(names)


def _missing(param: str) -> ApiError:
    return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def _unanswered(ids: list[str], i: int) -> ApiError:
    """What OpenAI answers when an assistant message's tool calls are not all answered by the tool
    messages right after it (before message `i`)."""
    return ApiError(
        400,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
        param=f"messages.[{i}].role",
    )


def _items(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    raw = body.get(key)
    if raw is None:
        raise _missing(key)
    if key == "input" and isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    items = as_list(raw)
    if items is None:
        kind = type(raw).__name__
        raise ApiError(
            400,
            f"Invalid type for '{key}': expected an array of objects, but got {kind} instead.",
            param=key,
            code="invalid_type",
        )
    if key == "messages" and not items:
        raise ApiError(
            400,
            "Invalid 'messages': empty array. Expected an array with minimum length 1.",
            param="messages",
            code="empty_array",
        )
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        obj = as_dict(item)
        if obj is None:
            raise ApiError(
                400,
                f"Invalid type for '{key}[{i}]': expected an object.",
                param=f"{key}[{i}]",
                code="invalid_type",
            )
        out.append(obj)
    return out


def parse_chat(body: dict[str, Any]) -> Conversation:
    model, stream = _common(body)
    check_tool_choice(body)
    messages = _items(body, "messages")
    calls: dict[str, tuple[str, str]] = {}
    results: list[ToolResult] = []
    flags: list[str] = []
    turn = since_user = 0
    last_user = ""
    users: list[str] = []
    system: list[str] = []
    open_calls: list[str] = []  # the last assistant message's call ids not answered yet
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if not isinstance(role, str):
            raise _missing(f"messages[{i}].role")
        if open_calls and role != "tool":
            raise _unanswered(open_calls, i)
        if role == "assistant":
            turn += 1
            since_user += 1
            tool_calls = as_list(msg.get("tool_calls")) or []
            if tool_calls and "content" in msg and msg["content"] is None:
                # Strict servers (llama.cpp) reject this; OpenAI accepts it. Record, don't judge.
                flags.append("assistant_null_content_with_tool_calls")
            for tc in tool_calls:
                tc_d = as_dict(tc) or {}
                fn = as_dict(tc_d.get("function")) or {}
                calls[str(tc_d.get("id", ""))] = (str(fn.get("name", "")), str(fn.get("arguments", "")))
                open_calls.append(str(tc_d.get("id", "")))
        elif role == "user":
            last_user = content_text(msg.get("content"))
            users.append(last_user)
            since_user = 0
            results.clear()
        elif role in ("system", "developer"):
            system.append(content_text(msg.get("content")))
        elif role == "tool":
            call_id = str(msg.get("tool_call_id", ""))
            if call_id not in open_calls:
                raise ApiError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                    "'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            open_calls.remove(call_id)
            name, args = calls.get(call_id, ("", ""))
            results.append(ToolResult(call_id, name, args, content_text(msg.get("content"))))
    if open_calls:
        raise _unanswered(open_calls, len(messages))
    tools = body.get("tools")
    options = as_dict(body.get("stream_options")) or {}
    return Conversation(
        api="chat",
        model=model,
        stream=stream,
        include_usage=stream and options.get("include_usage") is True,
        turn=turn,
        turn_since_user=since_user,
        last_user_text=last_user,
        tool_names=_tool_names(body),
        results_since_user=tuple(results),
        **_sizes(model, [messages, tools], messages[-1]),
        flags=tuple(flags),
        user_texts=tuple(users),
        instructions="\n".join(system),
        request=body,
    )


def _is_assistant_output(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if kind in ("function_call", "reasoning"):
        return True
    return item.get("role") == "assistant" and kind in (None, "message")


def parse_responses(body: dict[str, Any]) -> Conversation:
    model, stream = _common(body)
    check_tool_choice(body)
    items = _items(body, "input")
    calls: dict[str, tuple[str, str]] = {}
    results: list[ToolResult] = []
    turn = since_user = 0
    last_user = ""
    users: list[str] = []
    instructions = body.get("instructions")
    system = [instructions] if isinstance(instructions, str) else []
    in_run = False
    output: set[str] = set()  # the calls answered by a function_call_output
    # Without a server-side conversation, the input holds every call and its output.
    stateless = body.get("previous_response_id") is None and body.get("conversation") is None
    for item in items:
        kind = item.get("type")
        if _is_assistant_output(item):
            # One model response may yield several items (message + function_calls): a run
            # of consecutive assistant-side items is one turn.
            if not in_run:
                turn += 1
                since_user += 1
            in_run = True
            if kind == "function_call":
                calls[str(item.get("call_id", ""))] = (
                    str(item.get("name", "")),
                    str(item.get("arguments", "")),
                )
            continue
        in_run = False
        if item.get("role") == "user" and kind in (None, "message"):
            last_user = content_text(item.get("content"))
            users.append(last_user)
            since_user = 0
            results.clear()
        elif item.get("role") in ("system", "developer") and kind in (None, "message"):
            system.append(content_text(item.get("content")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            if call_id not in calls and stateless:
                raise ApiError(
                    400, f"No tool call found for function call output with call_id {call_id}.", param="input"
                )
            name, args = calls.get(call_id, ("", ""))
            output.add(call_id)
            results.append(ToolResult(call_id, name, args, content_text(item.get("output"))))
    unanswered = [call_id for call_id in calls if call_id not in output]
    if unanswered and stateless:  # as OpenAI: every call in the input needs its output there too
        raise ApiError(400, f"No tool output found for function call {unanswered[0]}.", param="input")
    tools = body.get("tools")
    return Conversation(
        api="responses",
        model=model,
        stream=stream,
        include_usage=True,  # response.completed always carries usage
        turn=turn,
        turn_since_user=since_user,
        last_user_text=last_user,
        tool_names=_tool_names(body),
        results_since_user=tuple(results),
        **_sizes(model, [instructions, items, tools], items[-1] if items else None),
        flags=(),
        user_texts=tuple(users),
        instructions="\n".join(system),
        request=body,
    )
