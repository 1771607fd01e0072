"""Anthropic's Messages API on the wire: the transcript to a request body, a message to a reply.

Pure functions, no I/O, the same shape as chat_wire and responses_wire (and the errors of
activities.wire). The model activity adds the URL and the `x-api-key` and `anthropic-version`
headers; the version this wire speaks is API_VERSION, 2023-06-01: version 2026-10-21 (the
default of Anthropic's SDKs 2.x) refuses `temperature` and `top_p` at any value, which this wire
sends when an agent sets them.

The request:
- `system` is the agent's instructions; `max_tokens` is always sent: `max_output_tokens`, else
  DEFAULT_MAX_TOKENS (8,192, which every Claude model since 3.5 accepts; set `max_output_tokens`
  for an older one) plus the thinking budget when one is set (thinking counts in max_tokens), or
  ADAPTIVE_MAX_TOKENS (32,000) with adaptive thinking;
- `messages` alternate user / assistant: a run of tool results (and a user message beside them)
  is one user message, its `tool_result` blocks first, as the API requires. An assistant message
  is its signed thinking blocks (Anthropic's own, exactly as received; another provider's are
  dropped), then its text, then one `tool_use` per call with the run's call id and the parsed
  arguments; arguments that are not a JSON object go as `{}` (the workflow has already told the
  model they were invalid, in the call's result). Empty texts are left out (the API refuses
  them) and a message left empty is dropped;
- settings: temperature, top_p, `stop` as `stop_sequences`; `thinking_tokens` as
  `thinking: {type: enabled, budget_tokens}` (what models before Claude 4.6 take; the newest
  refuse a budget), `reasoning_effort` as adaptive thinking with an effort,
  `thinking: {type: adaptive}` and `output_config: {effort}` (Claude 4.6 and later; EFFORT:
  minimal and low "low", medium "medium", high "high"). `check_settings` names what Anthropic
  refuses (a seed, a temperature above 1 or beside thinking, top_p below 0.95 beside thinking, a
  forced tool choice beside thinking, max_output_tokens not above the thinking budget, both a
  budget and an effort, blank stop sequences) and `build_request` raises `BadSettings` with the
  same line;
- tool_choice: auto {"type": "auto"}, required {"type": "any"}, none {"type": "none"}, a name
  {"type": "tool", "name": ...}; `parallel_tool_calls=False` adds `disable_parallel_tool_use`;
- typed output goes through an output tool, not the API's structured outputs (`output_config`),
  which only Claude 4.5 and later take and which refuses most pydantic schemas (it wants
  `additionalProperties: false` on every object and no numeric or length bounds). The tool is
  OUTPUT_TOOL, its input_schema the output's schema (a schema that is not an object is wrapped as
  OUTPUT_VALUE_TOOL's `{"value": ...}`); the model must call a tool (`{"type": "any"}`), or that
  tool when it has no other; with thinking on it may only be offered (`auto`: the API refuses a
  forced choice with thinking; with tool_choice "none" not even offered), and a plain-text
  answer is taken as the output. The reply's call
  of it becomes the reply's text (the output's JSON, the text beside it dropped), so the runner
  sees a plain JSON answer; an agent tool of either name is refused;
- prompt caching by default (`AgentSpec.prompt_cache`, "5m", "1h" or "off"): `cache_control`
  on at most 4 blocks: the last tool, the system prompt (then sent as a list of text blocks),
  the last block of the latest message, and the last block of the message before the latest
  user turn, so each turn reads the turns before it from the cache;
- a request whose last assistant message made tool calls without a signed thinking block (a
  transcript another provider wrote, after a fallback) goes without `thinking`: the API refuses
  a tool-use continuation with thinking on and no thinking block.

The reply is activities.anthropic_reply's (parse_response, parse_stream): re-exported here, so
this module is the whole Wire, with `check_settings` (called when a run starts).
"""

from __future__ import annotations

import json
from typing import Any

from durable_agent_runner.activities.anthropic_reply import (
    MAX_BLOCKS,
    OUTPUT_TOOL,
    OUTPUT_VALUE_TOOL,
    THINKING_BLOCKS,
    parse_response,
    parse_stream,
    parse_usage,
)
from durable_agent_runner.activities.wire import (
    OPENING,
    TOOL_CHOICES,
    BadSettings,
    check_sendable,
    function_tools,
    output_format,
    settings_for,
)
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelSettings,
    Thinking,
    ToolMessage,
)

__all__ = [
    "ADAPTIVE_MAX_TOKENS",
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "EFFORT",
    "MAX_BLOCKS",
    "OUTPUT_TOOL",
    "OUTPUT_VALUE_TOOL",
    "build_request",
    "check_settings",
    "parse_response",
    "parse_stream",
    "parse_usage",
]

API_VERSION = "2023-06-01"  # the `anthropic-version` header this wire's requests are valid under
DEFAULT_MAX_TOKENS = 8192
ADAPTIVE_MAX_TOKENS = 32_000  # room to think and answer; every model with adaptive thinking takes it
EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}  # -> output_config.effort
MAX_BREAKPOINTS = 4  # the API refuses a fifth cache_control


# ------------------------------------------------------------------------------ settings


def _thinks(s: ModelSettings) -> bool:
    return s.thinking_tokens is not None or s.reasoning_effort is not None


def check_settings(settings: ModelSettings) -> list[str]:
    """One line per setting Anthropic's Messages API refuses as it is set."""
    s, out = settings, []
    budget = s.thinking_tokens
    if s.seed is not None:
        out.append("seed: Anthropic's Messages API has no seed")
    if s.temperature is not None and s.temperature > 1:
        out.append(f"temperature: Anthropic takes 0 to 1, not {s.temperature:g}")
    if s.thinking_tokens is not None and s.reasoning_effort is not None:
        out.append("reasoning_effort: give thinking_tokens (a budget) or reasoning_effort (adaptive), not both")
    if _thinks(s):
        if s.temperature is not None:
            out.append("temperature: Anthropic refuses a temperature with thinking (thinking_tokens, reasoning_effort)")
        if s.top_p is not None and s.top_p < 0.95:
            out.append(f"top_p: with extended thinking Anthropic takes 0.95 to 1, not {s.top_p:g}")
        if s.tool_choice not in (None, "auto", "none"):
            out.append(f"tool_choice: Anthropic refuses a forced tool choice ({s.tool_choice}) with extended thinking")
        if s.max_output_tokens is not None and budget is not None and s.max_output_tokens <= budget:
            out.append(
                f"max_output_tokens: must exceed the thinking budget ({budget}), which Anthropic counts in max_tokens"
            )
    if s.stop and any(not stop.strip() for stop in s.stop):
        out.append("stop: Anthropic refuses a stop sequence of only whitespace")
    return out


def _tool_choice(s: ModelSettings, output: str | None, functions: bool, thinking: bool) -> dict[str, Any] | None:
    """The `tool_choice` for these settings; `output` is the output tool's name when offered."""
    choice = s.tool_choice
    if output is not None:
        if thinking:  # offered, not forced; "none": the answer comes as text
            picked: dict[str, Any] = {"type": "none" if choice == "none" else "auto"}
        elif choice in (None, "auto", "required"):
            picked = {"type": "any"} if functions else {"type": "tool", "name": output}
        else:
            picked = {"type": "tool", "name": output if choice == "none" else choice}
    elif choice is None:
        picked = {"type": "auto"} if s.parallel_tool_calls is False else {}
    elif choice in TOOL_CHOICES:
        picked = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    else:
        picked = {"type": "tool", "name": choice}
    if s.parallel_tool_calls is False and picked.get("type") not in (None, "none"):
        picked["disable_parallel_tool_use"] = True
    return picked or None


# ------------------------------------------------------------------------------ requests


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _thinking_block(t: Thinking) -> dict[str, Any] | None:
    if t.provider != "anthropic":
        return None
    if t.kind == "thinking":
        return {"type": "thinking", "thinking": t.text, "signature": t.signature}
    if t.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": t.data}
    return None


def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(m, AssistantMessage):
        blocks = [b for b in map(_thinking_block, m.thinking) if b is not None]
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        blocks += [
            {"type": "tool_use", "id": c.call_id, "name": c.name, "input": _input(c.arguments)} for c in m.tool_calls
        ]
        return "assistant", blocks
    if isinstance(m, ToolMessage):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.call_id}
        if m.content:  # an empty text block is refused; an absent content is an empty result
            result["content"] = m.content
        if m.is_error:
            result["is_error"] = True
        return "user", [result]
    return "user", [{"type": "text", "text": m.content}] if m.content else []


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The transcript as alternating messages; in a user message, tool results come first."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, blocks = _blocks(m)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    for merged in out:
        if merged["role"] == "user":  # stable: results in order, then the texts in order
            merged["content"].sort(key=lambda b: b["type"] != "tool_result")
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING}]})
    return out


def _unsigned_tool_turn(wire: list[dict[str, Any]]) -> bool:
    """The last assistant message calls tools without a thinking block first."""
    last = next((m for m in reversed(wire) if m["role"] == "assistant"), None)
    if last is None or not any(b["type"] == "tool_use" for b in last["content"]):
        return False
    return last["content"][0]["type"] not in THINKING_BLOCKS


def _output_tool(agent: AgentSpec) -> dict[str, Any] | None:
    typed = output_format(agent)
    if typed is None:
        return None
    name, schema = typed
    text = f"Give your final answer, the {name}, as this tool's input. Call it once, when you are done."
    if schema.get("type") == "object":
        return {"name": OUTPUT_TOOL, "description": text, "input_schema": schema}
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    wrapped: dict[str, Any] = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
    wrapped |= {k: v for k, v in schema.items() if k in ("$defs", "definitions")}  # refs resolve from the top
    return {"name": OUTPUT_VALUE_TOOL, "description": text, "input_schema": wrapped}


def _mark(block: dict[str, Any], cache: dict[str, str]) -> None:
    block["cache_control"] = dict(cache)


def _last_cacheable(message: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in reversed(message["content"]) if b["type"] not in THINKING_BLOCKS), None)


def _cache(body: dict[str, Any], ttl: str) -> None:
    """Breakpoints on the stable prefix: the last tool, the system prompt, the latest message,
    and the message before the latest user turn (at most MAX_BREAKPOINTS)."""
    cache = {"type": "ephemeral"} | ({"ttl": "1h"} if ttl == "1h" else {})
    if body.get("tools"):
        _mark(body["tools"][-1], cache)
    if isinstance(body.get("system"), str):
        body["system"] = [{"type": "text", "text": body["system"]}]
        _mark(body["system"][0], cache)
    wire: list[dict[str, Any]] = body["messages"]
    users = [i for i, m in enumerate(wire) if m["role"] == "user"]
    for i in {len(wire) - 1, users[-1] - 1 if users else -1}:
        block = _last_cacheable(wire[i]) if i >= 0 else None
        if block is not None:
            _mark(block, cache)


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    settings = settings_for(agent, messages)
    refused = check_settings(settings)
    if refused:
        raise BadSettings("; ".join(refused))
    check_sendable(settings)
    wire = _messages(messages)
    budget, effort = settings.thinking_tokens, settings.reasoning_effort
    thinking = _thinks(settings) and not _unsigned_tool_turn(wire)
    body: dict[str, Any] = {"model": model, "max_tokens": settings.max_output_tokens or DEFAULT_MAX_TOKENS}
    if thinking and budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = settings.max_output_tokens or DEFAULT_MAX_TOKENS + budget
    elif thinking:
        body["thinking"] = {"type": "adaptive"}
        body["max_tokens"] = settings.max_output_tokens or ADAPTIVE_MAX_TOKENS
    if effort is not None:
        body["output_config"] = {"effort": EFFORT[effort]}
    if agent.instructions:
        body["system"] = agent.instructions
    body["messages"] = wire
    functions = function_tools(agent)
    taken = sorted({name for name, _, _ in functions} & {OUTPUT_TOOL, OUTPUT_VALUE_TOOL})
    if taken:
        raise BadSettings(f"a tool may not be named {taken[0]}: on Anthropic's wire that name is the typed output's")
    tools = [
        {"name": name} | ({"description": text} if text else {}) | {"input_schema": params}
        for name, text, params in functions
    ]
    output = _output_tool(agent)
    if output is not None:
        tools.append(output)
    if tools:
        body["tools"] = tools
        choice = _tool_choice(settings, output["name"] if output else None, bool(functions), thinking)
        if choice is not None:
            body["tool_choice"] = choice
    plain = {"temperature": settings.temperature, "top_p": settings.top_p}
    body |= {field: value for field, value in plain.items() if value is not None}
    if settings.stop:
        body["stop_sequences"] = list(settings.stop)
    if agent.prompt_cache != "off":
        _cache(body, agent.prompt_cache)
    if stream:
        body["stream"] = True
    return body | settings.extra_body  # last: a provider's own options win over ours
