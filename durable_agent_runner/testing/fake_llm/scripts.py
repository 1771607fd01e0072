"""What the fake server answers with: a `Responder` it is given, and the control API's scripts.

The server itself knows no scenario. It parses a request into a `Conversation`, and asks its
responder for the `Reply` (the default scenarios, durable_agent_runner/testing/scenarios/, or an
offline model of durable_agent_runner.testing). The responder also gets the scripts registered
over the control API, for the `script:<id>` models:

  script:<id>   step k answers turn k (past the end: the last step again). A step is
                {"content": text} and/or {"tool_calls": [{"name", "arguments"}]}, or {"json": value}
                for a final answer that is that value as JSON text (typed output); optional
                "usage", "keepalive", "delta_chars" (characters per streamed text delta),
                "finish" / "blocked" (a provider's own stop reason, or a prompt refused with that
                reason: Gemini's finishReason "SAFETY", promptFeedback.blockReason) and
                "thinking" (the text of the signed thinking block an Anthropic reply opens with)

`reply_of` turns a scenario's answer (text, calls) into a `Reply` with the usage a real server
would report for that request; it is a pure function of the request, so a retry gets the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import Conversation, as_dict, as_list
from durable_agent_runner.testing.fake_llm.wire import ApiError, Reply, ToolCall, Usage

# (text, [(tool name, JSON arguments)]): one reply, before it is rendered on a wire.
Answer = tuple[str | None, list[tuple[str, str]]]


@dataclass(frozen=True)
class ScriptStep:
    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, raw JSON arguments)
    usage: Mapping[str, int] = field(default_factory=lambda: {})
    keepalive: bool = False
    delta_chars: int | None = None  # None: about 16, like a few tokens
    ids: tuple[str, ...] = ()  # the tool calls' ids, when the script sets them (a server that reuses ids)
    finish: str | None = None  # see Reply.finish
    blocked: str | None = None  # see Reply.blocked
    thinking: str | None = None  # what the model thought first, where the API shows it (Anthropic)


Scripts = Mapping[str, Sequence[ScriptStep]]
# The server's answer to one model call: called in a server thread, once per call. Raises
# ApiError for an error reply (404 for a model it does not serve).
Responder = Callable[[Conversation, Scripts], Reply]


def no_model(model: str, hint: str = "") -> ApiError:
    return ApiError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.{hint}",
        code="model_not_found",
    )


# ------------------------------------------------------------------------------- replies


def _usage(
    conv: Conversation, content: str | None, calls: Sequence[tuple[str, str]], override: Mapping[str, int]
) -> Usage:
    prompt = max(1, conv.prompt_chars // 4)
    out_chars = len(content or "") + sum(len(name) + len(args) for name, args in calls)
    prefix = conv.prefix_chars // 4
    # Like OpenAI: caching starts at 1024 tokens and grows in 128-token blocks; where the request
    # marks what to cache, the server's prompt cache counted it (prompt_cache.py).
    cached = min(prompt, prefix // 128 * 128) if prefix >= 1024 else 0
    written = 0
    if conv.cache_chars is not None:
        cached, written = conv.cache_chars[0] // 4, conv.cache_chars[1] // 4
    return Usage(
        prompt_tokens=override.get("prompt_tokens", prompt),
        completion_tokens=override.get("completion_tokens", max(1, out_chars // 4)),
        cached_tokens=override.get("cached_tokens", cached),
        reasoning_tokens=override.get("reasoning_tokens", 0),
        total_tokens=override.get("total_tokens"),
        cache_write_tokens=override.get("cache_write_tokens", written),
    )


def reply_of(conv: Conversation, answer: Answer, step: ScriptStep | None = None) -> Reply:
    """`answer` to `conv` as a `Reply`: call ids from the turn (or the script's), estimated usage
    (or the script's)."""
    content, calls = answer
    step = step or ScriptStep()
    ids = step.ids
    tool_calls = tuple(
        ToolCall(ids[i] if ids else f"call_{conv.turn}_{i}", name, args) for i, (name, args) in enumerate(calls)
    )
    usage = _usage(conv, content, calls, step.usage)
    return Reply(
        content, tool_calls, usage, step.keepalive, step.delta_chars, step.finish, step.blocked, thinking=step.thinking
    )


def script_reply(conv: Conversation, scripts: Scripts) -> Reply:
    """The reply of the script `conv.model` names (`script:<id>`); ApiError 404 when none is."""
    steps = scripts.get(conv.model.removeprefix("script:")) if conv.model.startswith("script:") else None
    if not steps:
        raise no_model(conv.model)
    step = steps[min(conv.turn, len(steps) - 1)]  # past the end: repeat the last step
    return reply_of(conv, (step.content, list(step.tool_calls)), step)


def scripts_only(conv: Conversation, scripts: Scripts) -> Reply:
    """The responder of a server given none: the control API's scripts, and nothing else."""
    if conv.model.startswith("script:"):
        return script_reply(conv, scripts)
    raise no_model(
        conv.model,
        " This fake server serves only script:<id> models (python -m durable_agent_runner.testing.fake_llm "
        "serves the default scenarios).",
    )


# ------------------------------------------------------------------------------- scripts

STEP_KEYS = frozenset(
    {"content", "json", "tool_calls", "usage", "keepalive", "delta_chars", "finish", "blocked", "thinking"}
)

_USAGE_ALIASES = {
    "prompt_tokens": "prompt_tokens",
    "input_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "output_tokens": "completion_tokens",
    "total_tokens": "total_tokens",
    "cached_tokens": "cached_tokens",
    "reasoning_tokens": "reasoning_tokens",
    "cache_read_input_tokens": "cached_tokens",  # Anthropic's names
    "cache_creation_input_tokens": "cache_write_tokens",
    "cache_write_tokens": "cache_write_tokens",
}


def _flatten_usage(raw: Mapping[str, Any], out: dict[str, int]) -> None:
    # Accept Chat names, Responses names, and their nested *_details objects alike.
    for key, value in raw.items():
        nested = as_dict(value)
        if nested is not None and key.endswith("_details"):
            _flatten_usage(nested, out)
        elif key in _USAGE_ALIASES and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[_USAGE_ALIASES[key]] = value
        else:
            raise ValueError(f"usage: unsupported or non-integer field {key!r}")


def parse_steps(raw: object) -> tuple[ScriptStep, ...]:
    """Validate control-API steps; ValueError says what is wrong."""
    steps = as_list(raw)
    if not steps:
        raise ValueError("'steps' must be a non-empty list")
    out: list[ScriptStep] = []
    for i, step_raw in enumerate(steps):
        step = as_dict(step_raw)
        if step is None:
            raise ValueError(f"steps[{i}] must be an object")
        unknown = set(step) - STEP_KEYS
        if unknown:
            raise ValueError(f"steps[{i}]: unknown keys {sorted(unknown)}")
        content = step.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"steps[{i}].content must be a string")
        if "json" in step:
            if "content" in step:
                raise ValueError(f"steps[{i}]: give 'content' or 'json', not both")
            content = json.dumps(step["json"], ensure_ascii=False)
        size = step.get("delta_chars")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
            raise ValueError(f"steps[{i}].delta_chars must be a positive integer")
        calls: list[tuple[str, str]] = []
        ids: list[str] = []
        for j, call_raw in enumerate(as_list(step.get("tool_calls", [])) or []):
            call = as_dict(call_raw) or {}
            name, args = call.get("name"), call.get("arguments", {})
            if "id" in call:
                if not isinstance(call["id"], str) or len(ids) != j:
                    raise ValueError(f"steps[{i}].tool_calls[{j}].id must be a string, given for every call or none")
                ids.append(call["id"])
            if not isinstance(name, str) or not name:
                raise ValueError(f"steps[{i}].tool_calls[{j}].name must be a non-empty string")
            if not isinstance(args, (str, dict)):
                raise ValueError(f"steps[{i}].tool_calls[{j}].arguments must be an object or a string")
            calls.append((name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)))
        thinking = step.get("thinking")
        if thinking is not None and not isinstance(thinking, str):
            raise ValueError(f"steps[{i}].thinking must be a string")
        usage: dict[str, int] = {}
        _flatten_usage(as_dict(step.get("usage")) or {}, usage)
        if content is None and not calls:
            content = ""
        if ids and len(ids) != len(calls):
            raise ValueError(f"steps[{i}]: give an id for every tool call or for none")
        stops = {key: step.get(key) for key in ("finish", "blocked")}
        for key, value in stops.items():
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"steps[{i}].{key} must be a non-empty string")
        keepalive = step.get("keepalive") is True
        out.append(ScriptStep(content, tuple(calls), usage, keepalive, size, tuple(ids), thinking=thinking, **stops))
    return tuple(out)
