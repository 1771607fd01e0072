"""Hostile mode: a model server that attacks its client, for tests of the client's defences.

The model `hostile:<case>` answers like the weather demo (so a run still ends), then bends
every reply, streamed or not, on every API (Gemini's and Anthropic's field names included):
  echo       the request's key (its Authorization or api-key header value, exactly as sent) in
             every field it can reach: the text, tool-call arguments, ids and names, the
             reply's id, model, finish_reason and system_fingerprint, every usage field
  reuse-ids  tool-call ids "0", "1", … in every reply (numbered per reply, as some servers do)
  same-id    every tool call of every reply has the id "call_1"
  odd        negative, huge and string token counts, 10 KB ids, model and finish_reason, an
             extra tool call named by a number, Chat stream indexes sent as strings
  deep       every tool call's arguments nested 5,000 levels deep (`[[[…]]]`), past any
             recursion limit
  digits     every tool call's arguments hold a 5,000-digit integer, past Python's int limit

Error bodies, non-JSON bodies, error events that echo the key, and stalls are faults (see
fake_llm.faults: `echo_key`, `size`, `raw`, and the `stall` kind).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import as_dict, as_list
from durable_agent_runner.testing.fake_llm.wire import ApiError, JSONDict, Reply, ToolCall

CASES = ("echo", "reuse-ids", "same-id", "odd", "deep", "digits")
BIG = 10_000  # characters of an odd id, model or finish_reason
DEPTH = DIGITS = 5_000  # of `deep` arguments' nesting, of the `digits` integer
ODD_COUNTS: tuple[object, ...] = (-5, "12", 1e30, 10**30, True, None, [3])  # token counts of `odd`
NUMBER_NAME = "__number__"  # a tool name rendered as the JSON number 7
_ID_FIELDS = ("id", "call_id", "item_id", "system_fingerprint", "model", "responseId", "modelVersion")
_FINISH_FIELDS = ("finish_reason", "finishReason", "stop_reason")  # Chat's and Responses', Gemini's, Anthropic's
_USAGE_FIELDS = ("usage", "usageMetadata")


def case_of(model: str) -> str | None:
    """The hostile case a model name asks for; None for a well-behaved model."""
    if not model.startswith("hostile:"):
        return None
    case = model.removeprefix("hostile:")
    if case not in CASES:
        raise ApiError(
            404, f"The model `{model}` does not exist. Hostile cases: {', '.join(CASES)}.", code="model_not_found"
        )
    return case


def echoed(key: str, size: int = 0) -> str:
    """An error text holding the key, at least `size` characters long. Only whole copies of the
    key, at ever-shifting offsets, so that a client that cuts the text before masking it
    leaks part of a key wherever it cuts."""
    parts = [f"Incorrect API key provided: {key}."]
    length, i = len(parts[0]), 0
    while length < size:
        parts.append(f" {key} {'x' * (i % 13)}")
        length, i = length + len(parts[-1]), i + 1
    return "".join(parts)


def bend_reply(case: str, reply: Reply, key: str) -> Reply:
    """The scenario's reply, before it is rendered for either API."""
    calls = list(reply.tool_calls)
    if case == "echo":
        calls = [replace(c, call_id=key, arguments=_with_key(c.arguments, key)) for c in calls]
        if calls:  # a call the model "names" with the key: the client answers it as an unknown tool
            calls.append(ToolCall(key, key, json.dumps({"key": key})))
        return replace(reply, content=f"{reply.content or ''} (your key: {key})", tool_calls=tuple(calls))
    if case == "reuse-ids":
        calls = [replace(c, call_id=str(i)) for i, c in enumerate(calls)]
    elif case == "same-id":
        calls = [replace(c, call_id="call_1") for c in calls]
    elif case == "odd":
        calls = [replace(c, call_id=f"{i}" + "x" * BIG) for i, c in enumerate(calls)]
        if calls:
            calls.append(ToolCall("7", NUMBER_NAME, "{}"))
    elif case == "deep":
        calls = [replace(c, arguments="[" * DEPTH + "]" * DEPTH) for c in calls]
    elif case == "digits":
        calls = [replace(c, arguments='{"city": ' + "9" * DIGITS + "}") for c in calls]
    return replace(reply, tool_calls=tuple(calls))


def bend(case: str, payload: JSONDict, key: str) -> JSONDict:
    """A rendered body or stream event, bent: the fields no `Reply` holds."""
    out = copy.deepcopy(payload)
    if case == "echo":
        _walk(out, lambda d: _echo(d, key))
    elif case == "odd":
        _walk(out, _odd)
    return out


def _with_key(arguments: str, key: str) -> str:
    try:
        args = json.loads(arguments)
    except ValueError:
        return arguments + key
    return json.dumps({**args, "note": key}) if isinstance(args, dict) else arguments


def _walk(value: object, visit: Callable[[dict[str, Any]], None]) -> None:
    if (d := as_dict(value)) is not None:
        visit(d)
        for v in d.values():
            _walk(v, visit)
    for v in as_list(value) or []:
        _walk(v, visit)


def _echo(d: dict[str, Any], key: str) -> None:
    for name in _ID_FIELDS:
        if isinstance(d.get(name), str):
            d[name] = key
    for name in _FINISH_FIELDS:
        if d.get(name) is not None:
            d[name] = key
    for name in _USAGE_FIELDS:
        if (usage := as_dict(d.get(name))) is not None:
            d[name] = _usage(usage, lambda _: key)


def _odd(d: dict[str, Any]) -> None:
    if d.get("name") == NUMBER_NAME:
        d["name"] = 7
    for name in ("model", "modelVersion"):
        if isinstance(d.get(name), str):
            d[name] = "m" * BIG
    if d.get("object") in ("chat.completion", "chat.completion.chunk", "response") or d.get("type") == "message":
        d["id"] = "i" * BIG
    for name in _FINISH_FIELDS:
        if d.get(name) is not None:
            d[name] = "f" * BIG
    if isinstance(d.get("index"), int) and ("function" in d or str(d.get("type")).startswith("content_block")):
        d["index"] = str(d["index"])  # a streamed Chat tool-call delta, an Anthropic block event
    for name in _USAGE_FIELDS:
        if (usage := as_dict(d.get(name))) is not None:
            d[name] = _usage(usage, lambda i: ODD_COUNTS[i % len(ODD_COUNTS)])


def _usage(usage: dict[str, Any], value: Callable[[int], object], start: int = 0) -> dict[str, Any]:
    """Every count in a usage object (its *_details included) replaced by value(i)."""
    out: dict[str, Any] = {}
    for i, (name, v) in enumerate(usage.items(), start):
        nested = as_dict(v)
        out[name] = _usage(nested, value, 10 * i + 1) if nested is not None else value(i)
    return out
