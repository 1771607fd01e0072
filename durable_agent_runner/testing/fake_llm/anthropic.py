"""Anthropic's Messages API in the fake: POST /v1/messages, streamed or not.

`parse` refuses what the real API refuses, with its 400 messages: a missing `model`, `max_tokens`
or `messages`, unknown top-level fields, roles that do not alternate starting with the user
(the real API merges consecutive turns; the fake refuses them, so that a client's own merging is
tested), a `tool_result` without its `tool_use` in the message before it and a `tool_use`
without its result opening the message after it (text before the results leaves calls open),
empty text blocks, a fifth `cache_control`, and with thinking on: a budget under 1,024 or not
under max_tokens, a temperature other than 1, a forced tool choice, and a tool-use continuation
whose assistant message does not open with a thinking block. Every thinking block sent back
must be one the fake signed (an HMAC of its text under anthropic_reply.SECRET; redacted blocks
carry their own MAC): a changed or missing one is refused as the API refuses it.

`check_headers` requires `anthropic-version` (and from version 2026-10-21 on refuses
`temperature`, `top_p` and `top_k`, as that version does). The key (`x-api-key`, or the SDKs'
2.x `Authorization: Bearer`) is read, for a hostile server to echo, but not checked: fake_llm
checks no key on the OpenAI paths either.

A `Reply` renders as a message: a signed thinking block first when the request enables
thinking (the reply's own text, or one saying what it thinks about; a redacted block when the
last user text holds REDACTED_TRIGGER, Anthropic's test string), then its text, then one
`tool_use` per call. A text answer to a request offering the runner's output tool
(`final_output`, or `final_output_value` wrapping `{"value": ...}`) is that tool's call, as a
model made to call it answers. Usage splits the prompt as the server's prompt cache counted it
(prompt_cache.py): input_tokens, cache_creation_input_tokens, cache_read_input_tokens.
Streams: message_start, a ping, content_block_start / _delta / _stop per block, message_delta,
message_stop, each with its `event:` line. Errors: `{"type": "error", "error": {"type", "message"}}`
with Anthropic's type for the status (529: overloaded_error).

`as_chat` turns a request into its Chat Completions equivalent for the testing kit.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
from typing import Any

from durable_agent_runner.testing.fake_llm.anthropic_reply import (
    OUTPUT_TOOLS,
    REDACTED_TRIGGER,
    as_chat,
    error_event,
    message,
    ping,
    redacted_data,
    result_text,
    sign,
    stream,
    thinking_on,
)
from durable_agent_runner.testing.fake_llm.conversation import Conversation, ToolResult, as_dict, as_list, canonical
from durable_agent_runner.testing.fake_llm.prompt_cache import TTL_SECONDS, Prefixes
from durable_agent_runner.testing.fake_llm.wire import ApiError, JSONDict, default_error_type

__all__ = [
    "REDACTED_TRIGGER",
    "as_chat",
    "check_headers",
    "error_body",
    "error_event",
    "message",
    "parse",
    "ping",
    "redacted_data",
    "response",
    "sign",
    "stream",
]

response = message

MAX_BREAKPOINTS = 4
SAMPLING, SAMPLING_GONE = ("temperature", "top_p", "top_k"), "2026-10-21"  # the API version that refuses them
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p", "top_k",
        "stop_sequences", "stream", "metadata", "thinking", "service_tier", "output_config", "output_format",
        "cache_control", "container", "inference_geo", "speed", "diagnostics", "mcp_servers", "context_management",
    }
)  # fmt: skip
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _invalid(message: str) -> ApiError:
    return ApiError(400, message)


def _signed(block: dict[str, Any]) -> bool:
    """A thinking block the fake itself sent: its signature (or its redacted data's MAC) checks."""
    if block.get("type") == "redacted_thinking":
        payload, _, mac = str(block.get("data", "")).partition(".")
        return hmac.compare_digest(mac, sign(payload))
    text, signature = block.get("thinking"), block.get("signature")
    return isinstance(text, str) and isinstance(signature, str) and hmac.compare_digest(signature, sign(text))


# ---------------------------------------------------------------------------------- requests


def check_headers(headers: dict[str, str], body: dict[str, Any]) -> None:
    """`anthropic-version` is required; from version 2026-10-21 on, sampling fields are refused."""
    version = headers.get("anthropic-version")
    if not version:
        raise _invalid("anthropic-version: header is required")
    sampling = [k for k in SAMPLING if k in body]
    if version >= SAMPLING_GONE and sampling:
        raise _invalid(f"{sampling[0]}: Extra inputs are not permitted")


def _blocks(content: object, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content:
            raise _invalid(f"{where}: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    items = as_list(content)
    if items is None:
        raise _invalid(f"{where}.content: Input should be a valid list")
    out: list[dict[str, Any]] = []
    for j, raw in enumerate(items):
        block = as_dict(raw)
        if block is None or not isinstance(block.get("type"), str):
            raise _invalid(f"{where}.content.{j}: Input should be a valid dictionary or object")
        if block["type"] == "text" and not block.get("text"):
            raise _invalid("messages: text content blocks must be non-empty")
        out.append(block)
    return out


def _check_thinking(body: dict[str, Any], max_tokens: int) -> None:
    thinking = as_dict(body.get("thinking")) or {}
    if thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024:
        raise _invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if max_tokens <= budget:
        raise _invalid(
            f"`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at {DOCS}"
        )
    if body.get("temperature") not in (None, 1):
        raise _invalid(f"`temperature` may only be set to 1 when thinking is enabled. Please consult {DOCS}")
    if (as_dict(body.get("tool_choice")) or {}).get("type") in ("any", "tool"):
        raise _invalid("Thinking may not be enabled when tool_choice forces tool use.")


def _check_pairs(messages: list[tuple[str, list[dict[str, Any]]]], thinking: bool) -> None:
    """tool_use and tool_result blocks pair up across neighbouring messages; with thinking on, a
    tool-use continuation's assistant message opens with a thinking block."""
    for i, (role, blocks) in enumerate(messages):
        if role == "user":
            before = messages[i - 1][1] if i else []
            used = {b.get("id") for b in before if b.get("type") == "tool_use"}
            for j, b in enumerate(blocks):
                if b["type"] == "tool_result" and b.get("tool_use_id") not in used:
                    raise _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message."
                    )
            continue
        for j, b in enumerate(blocks):
            if b["type"] in ("thinking", "redacted_thinking") and not _signed(b):
                field = "data" if b["type"] == "redacted_thinking" else "signature"
                raise _invalid(f"messages.{i}.content.{j}: Invalid `{field}` in `{b['type']}` block")
        if i + 1 == len(messages):
            continue  # a final assistant message is a prefill
        # Only results that open the next message answer: text before them leaves the calls open.
        leading = itertools.takewhile(lambda b: b["type"] == "tool_result", messages[i + 1][1])
        answered = {b.get("tool_use_id") for b in leading}
        missing = [str(b.get("id")) for b in blocks if b["type"] == "tool_use" and b.get("id") not in answered]
        if missing:
            raise _invalid(
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in "
                "the next message."
            )
    last = len(messages) - 2
    if thinking and last >= 0 and messages[last][0] == "assistant":
        blocks = messages[last][1]
        if any(b["type"] == "tool_use" for b in blocks) and blocks[0]["type"] not in ("thinking", "redacted_thinking"):
            raise _invalid(
                f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{blocks[0]['type']}`. When `thinking` is enabled, a final `assistant` message must start with a "
                "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
                "you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
                f"Please consult our documentation at {DOCS}"
            )


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("tools")
    if raw is None:
        return []
    tools = as_list(raw)
    if tools is None:
        raise _invalid("tools: Input should be a valid list")
    names: set[str] = set()
    for i, item in enumerate(tools):
        tool = as_dict(item) or {}
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if (as_dict(tool.get("input_schema")) or {}).get("type") != "object":
            raise _invalid(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        if name in names:
            raise _invalid("tools: Tool names must be unique.")
        names.add(name)
    return [as_dict(t) or {} for t in tools]


def _system(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("system")
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}]
    blocks = as_list(raw)
    if blocks is None or any((as_dict(b) or {}).get("type") != "text" for b in blocks):
        raise _invalid("system: Input should be a valid string or a list of text blocks")
    return [as_dict(b) or {} for b in blocks]


def _prefixes(model: str, parts: list[object], marks: list[tuple[int, float]]) -> Prefixes:
    digest = hashlib.sha256(f"{model}\n".encode())
    ends: list[tuple[str, int]] = []
    chars = 0
    for part in parts:
        text = canonical(part) + "\n"
        digest.update(text.encode())
        chars += len(text)
        ends.append((digest.copy().hexdigest()[:32], chars))
    return Prefixes(tuple(ends), tuple(marks))


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def parse(body: dict[str, Any], *args: Any) -> Conversation:
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise _invalid(f"{unknown[0]}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise _invalid("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise _invalid("max_tokens: Input should be a valid integer greater than or equal to 0")
    raw = body.get("messages")
    if raw is None:
        raise _invalid("messages: Field required")
    items = as_list(raw)
    if items is None:
        raise _invalid("messages: Input should be a valid list")
    if not items:
        raise _invalid("messages: at least one message is required")
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not 0 <= temperature <= 1:
        raise _invalid("temperature: Input should be less than or equal to 1")
    _check_thinking(body, max_tokens)
    for stop in as_list(body.get("stop_sequences")) or []:  # as the API answers an empty or blank one
        if not isinstance(stop, str) or not stop:
            raise _invalid("stop_sequences: each stop sequence must be non-empty")
        if not stop.strip():
            raise _invalid("stop_sequences: each stop sequence must contain non-whitespace")
    messages: list[tuple[str, list[dict[str, Any]]]] = []
    for i, item in enumerate(items):
        msg = as_dict(item) or {}
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if not messages and role != "user":
            raise _invalid('messages: first message must use the "user" role')
        if messages and messages[-1][0] == role:
            raise _invalid(
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        messages.append((str(role), _blocks(msg.get("content"), f"messages.{i}")))
    _check_pairs(messages, thinking_on(body))
    tools, system = _tools(body), _system(body)
    # The prompt as blocks, for its size and the prompt cache: tools, system, messages' blocks.
    parts: list[object] = []
    marks: list[tuple[int, float]] = []
    for kind, blocks in [("tool", tools), ("system", system), *[(role, b) for role, b in messages]]:
        for block in blocks:
            cache = as_dict(block.get("cache_control"))
            if cache is not None:
                marks.append((len(parts), TTL_SECONDS.get(str(cache.get("ttl", "5m")), TTL_SECONDS["5m"])))
            parts.append([kind, _unmarked(block)])
    automatic = as_dict(body.get("cache_control"))  # the top-level mark: on the last block
    if automatic is not None and parts:
        marks.append((len(parts) - 1, TTL_SECONDS.get(str(automatic.get("ttl", "5m")), TTL_SECONDS["5m"])))
    if len(marks) > MAX_BREAKPOINTS:
        raise _invalid(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}.")
    prefixes = _prefixes(model, parts, marks)
    calls: dict[str, tuple[str, str]] = {}
    results: list[ToolResult] = []
    turn = since_user = 0
    users: list[str] = []
    for role, blocks in messages:
        if role == "assistant":
            turn += 1
            since_user += 1
            for b in blocks:
                if b["type"] == "tool_use":
                    calls[str(b.get("id", ""))] = (str(b.get("name", "")), json.dumps(b.get("input", {})))
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                call_id = str(b.get("tool_use_id", ""))
                name, arguments = calls.get(call_id, ("", ""))
                results.append(ToolResult(call_id, name, arguments, result_text(b.get("content"))))
            elif b["type"] == "text":
                users.append(str(b["text"]))
                since_user = 0
                results.clear()
    total = prefixes.ends[-1][1] if prefixes.ends else 0
    before_last = prefixes.ends[-2][1] if len(prefixes.ends) > 1 else 0
    same = {k: v for k, v in body.items() if k != "stream"}  # a retry, streamed or not, gets the same reply
    fingerprint = hashlib.sha256(f"{model}\n{canonical(same)}".encode()).hexdigest()[:24]
    return Conversation(
        api="anthropic",
        model=model,
        stream=body.get("stream") is True,
        include_usage=True,
        turn=turn,
        turn_since_user=since_user,
        last_user_text=users[-1] if users else "",
        tool_names=tuple(str(t["name"]) for t in tools if t["name"] not in OUTPUT_TOOLS),
        results_since_user=tuple(results),
        prompt_chars=total,
        prefix_chars=before_last,
        fingerprint=fingerprint,
        flags=(),
        user_texts=tuple(users),
        instructions="\n".join(str(b.get("text", "")) for b in system),
        request=body,
        prefixes=prefixes,
    )


def error_body(err: ApiError) -> JSONDict:
    own = err.type != default_error_type(err.status, err.code)  # a fault that names its type
    kind = (
        err.type if own else _ERROR_TYPES.get(err.status, "api_error" if err.status >= 500 else "invalid_request_error")
    )
    return {"type": "error", "error": {"type": kind, "message": err.message}}
