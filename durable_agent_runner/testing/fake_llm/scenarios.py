"""Scenarios: the reply is a pure function of the request (and the registered scripts).

Being stateless is the point: a retried request gets the same reply, so a durable runner
that replays or retries a model call sees exactly what it saw the first time.

The model name picks the scenario:
  script:<id>   steps registered over the control API; step k answers turn k. A step is
                {"content": text} and/or {"tool_calls": [{"name", "arguments"}]}, or {"json": value}
                for a final answer that is that value as JSON text (typed output); optional
                "usage", "keepalive", and "delta_chars" (characters per streamed text delta)
  echo          "echo: <last user message>"
  loop:<N>:<B>  N-1 turns of B filler characters plus a call to the first tool, then text
  team          every agent of a support team: handoffs, an agent as a tool, typed output (team.py)
  recall        "I remember: <user message 1> | <user message 2> | ...": every user message it
                sees, in order (a summary put in place of older messages is one of them)
  anything else the weather demo (get_weather in parallel, convert_temperature, answer); an agent
                without get_weather is told there is no script for it (no_script_text)

Whatever the model, a request whose instructions start with "Summarize the conversation" (a
session's compaction, activities/compaction.py) gets "SUMMARY: <user message> | ...": the
user messages of the transcript it was sent, read from its <user> and <summary> tags (from an
earlier summary, what follows its "SUMMARY: "), or a blank reply when there are none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_agent_runner.testing.fake_llm import team
from durable_agent_runner.testing.fake_llm.conversation import Conversation, ToolResult, as_dict, as_list
from durable_agent_runner.testing.fake_llm.wire import ApiError, Reply, ToolCall, Usage

CITIES = ("Tokyo", "Paris", "London", "New York", "Berlin", "Sydney", "Madrid", "Rome", "Cairo", "Toronto")
DEFAULT_CITIES = ("Tokyo", "Paris")


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


# ------------------------------------------------------------------------------- scripts

_USAGE_ALIASES = {
    "prompt_tokens": "prompt_tokens",
    "input_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "output_tokens": "completion_tokens",
    "total_tokens": "total_tokens",
    "cached_tokens": "cached_tokens",
    "reasoning_tokens": "reasoning_tokens",
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
        unknown = set(step) - {"content", "json", "tool_calls", "usage", "keepalive", "delta_chars"}
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
        usage: dict[str, int] = {}
        _flatten_usage(as_dict(step.get("usage")) or {}, usage)
        if content is None and not calls:
            content = ""
        if ids and len(ids) != len(calls):
            raise ValueError(f"steps[{i}]: give an id for every tool call or for none")
        out.append(ScriptStep(content, tuple(calls), usage, step.get("keepalive") is True, size, tuple(ids)))
    return tuple(out)


def _script(
    conv: Conversation, scripts: Mapping[str, Sequence[ScriptStep]]
) -> tuple[str | None, list[tuple[str, str]], ScriptStep]:
    script_id = conv.model.removeprefix("script:")
    steps = scripts.get(script_id)
    if not steps:
        raise _no_model(conv.model)
    step = steps[min(conv.turn, len(steps) - 1)]  # past the end: repeat the last step
    return step.content, list(step.tool_calls), step


def _no_model(model: str, hint: str = "") -> ApiError:
    return ApiError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.{hint}",
        code="model_not_found",
    )


# ---------------------------------------------------------------------------------- loop

_FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def _loop(conv: Conversation) -> tuple[str | None, list[tuple[str, str]]]:
    match = re.fullmatch(r"loop:(\d+)(?::(\d+))?", conv.model)
    if not match or int(match.group(1)) < 1:
        raise _no_model(conv.model, " Expected loop:<turns>:<bytes>, turns >= 1.")
    turns, size = int(match.group(1)), int(match.group(2) or 0)
    k = conv.turn
    if k >= turns - 1:
        return f"done after {turns} turns", []
    head = f"turn {k}: "
    filler = (head + _FILLER * (size // len(_FILLER) + 1))[:size]
    calls = [(conv.tool_names[0], json.dumps({"i": k, "size": size}))] if conv.tool_names else []
    return (filler if size or not calls else None), calls


# ------------------------------------------------------------------------------- weather


def no_script_text(what: str) -> str:
    """The offline model's answer to an agent nobody scripted: says so, and what to do."""
    return (
        f"[offline model] There is no script for {what}. This is the offline test double, not a real "
        f"model: script your agent's replies with durable_agent_runner.testing.ScriptedModel or "
        f"FunctionModel (docs/testing.md), or set OPENAI_API_KEY (or LLM_BASE_URL) to use a real model."
    )


def _cities(text: str) -> list[str]:
    found = [(m.start(), city) for city in CITIES if (m := re.search(rf"\b{re.escape(city)}\b", text, re.I))]
    return [city for _, city in sorted(found)] or list(DEFAULT_CITIES)


def _parse_result(result: ToolResult) -> dict[str, Any] | None:
    """The tool's JSON object, or None when it is not JSON or reads like an error."""
    try:
        value = as_dict(json.loads(result.output))
    except ValueError:
        return None
    if value is None or "error" in value:
        return None
    return value


def _city_of(result: ToolResult, parsed: dict[str, Any] | None) -> str:
    if parsed is not None and isinstance(parsed.get("city"), str):
        return str(parsed["city"])
    try:
        args = as_dict(json.loads(result.arguments)) or {}
    except ValueError:
        args = {}
    city = args.get("city")
    return city if isinstance(city, str) else "an unknown city"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class _WeatherFacts:
    temps: list[tuple[str, str, float]] = field(default_factory=lambda: [])  # city, condition, °C
    problems: list[str] = field(default_factory=lambda: [])
    fahrenheit: float | None = None


def _weather_facts(results: Sequence[ToolResult]) -> _WeatherFacts:
    facts = _WeatherFacts()
    for result in results:
        parsed = _parse_result(result)
        is_convert = result.name == "convert_temperature" or (
            not result.name and parsed is not None and "unit" in parsed
        )
        if is_convert:
            value = _number((parsed or {}).get("value"))
            if value is None:
                facts.problems.append(f"The temperature conversion failed: {_snippet(result.output)}")
            else:
                facts.fahrenheit = value
            continue
        if result.name not in ("", "get_weather"):
            continue  # some other tool (e.g. get_forecast): nothing to report
        temp = _number((parsed or {}).get("temperature_c"))
        city = _city_of(result, parsed)
        if parsed is None or temp is None:
            facts.problems.append(f"The weather lookup for {city} failed: {_snippet(result.output)}")
        else:
            facts.temps.append((city, str(parsed.get("condition", "unknown conditions")), temp))
    return facts


def _weather_text(facts: _WeatherFacts) -> str:
    lines = [f"{city}: {cond}, {temp:.1f}°C." for city, cond, temp in facts.temps]
    if len(facts.temps) > 1:
        city, _, _ = max(facts.temps, key=lambda t: t[2])
        word = "warmer" if len(facts.temps) == 2 else "the warmest"
        at = f" at {facts.fahrenheit:.1f}°F" if facts.fahrenheit is not None else ""
        lines.append(f"{city} is {word}{at}.")
    elif facts.temps and facts.fahrenheit is not None:
        lines.append(f"That is {facts.fahrenheit:.1f}°F.")
    lines += facts.problems
    if not lines:
        lines.append("I could not get any weather data.")
    return " ".join(lines)


def _weather(conv: Conversation) -> tuple[str | None, list[tuple[str, str]]]:
    # Phases count from the last user message so a multi-question demo chat keeps working.
    if "get_weather" not in conv.tool_names:
        # Not the weather demo's agent: most likely a newcomer's own, run against the demo's model.
        return no_script_text(f"this agent (its tools: {', '.join(conv.tool_names) or 'none'})"), []
    if conv.turn_since_user == 0:
        return None, [("get_weather", json.dumps({"city": city})) for city in _cities(conv.last_user_text)]
    facts = _weather_facts(conv.results_since_user)
    if (
        conv.turn_since_user == 1
        and facts.temps
        and facts.fahrenheit is None
        and "convert_temperature" in conv.tool_names
    ):
        warmest = max(facts.temps, key=lambda t: t[2])
        return None, [("convert_temperature", json.dumps({"celsius": warmest[2], "unit": "fahrenheit"}))]
    text = _weather_text(facts)
    # "…and send the report to ops@example.com": a side effect, which the demo agent guards
    # with an approval.
    if "send_report" in conv.tool_names and re.search(r"\b(send|email|mail)\b", conv.last_user_text, re.I):
        sent = [r for r in conv.results_since_user if r.name == "send_report"]
        if not sent:
            found = re.search(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", conv.last_user_text)
            to = found.group(0) if found else "team@example.com"
            return None, [("send_report", json.dumps({"to": to, "body": text}))]
        return f"{text} Report: {_snippet(sent[-1].output)}", []
    return text, []


# -------------------------------------------------------------------------------- memory

SUMMARY_MARKER = "Summarize the conversation"  # as activities/compaction.py starts its instructions
SUMMARY_PREFIX = "SUMMARY: "
MAX_RECALL_CHARS = 64 * 1024
# Past the compaction activity's own cap (64 KB), so a test can see that cap at work.
MAX_SUMMARY_CHARS = 256 * 1024
_TAGGED = re.compile(r"<(user|summary)(?: of=\"\d+\")?>\n(.*?)\n</\1>", re.DOTALL)
_ANY_TAG = re.compile(r"^<(user|summary|assistant|tool_call|tool_result)\b", re.MULTILINE)


def _recall(conv: Conversation) -> tuple[str | None, list[tuple[str, str]]]:
    if not conv.user_texts:
        return "I remember nothing.", []
    return ("I remember: " + " | ".join(conv.user_texts))[:MAX_RECALL_CHARS], []


def _summarize(conv: Conversation) -> tuple[str | None, list[tuple[str, str]]]:
    """The user messages in the transcript sent to be summarized; "" when there are none."""
    texts: list[str] = []
    for sent in conv.user_texts:
        tagged = _TAGGED.findall(sent)
        if not _ANY_TAG.search(sent):  # not a transcript in compaction's tags: the message as it is
            texts.append(sent)
        texts += [_unwrapped(text) if tag == "summary" else text for tag, text in tagged]
    texts = [text for text in texts if text.strip()]
    return ((SUMMARY_PREFIX + " | ".join(texts))[:MAX_SUMMARY_CHARS] if texts else ""), []


def _unwrapped(summary: str) -> str:
    """An earlier summary's messages: what follows its "SUMMARY: ", wherever the runner put it."""
    return summary.split(SUMMARY_PREFIX, 1)[1] if SUMMARY_PREFIX in summary else summary


# --------------------------------------------------------------------------------- entry


def _usage(
    conv: Conversation, content: str | None, calls: Sequence[tuple[str, str]], override: Mapping[str, int]
) -> Usage:
    prompt = max(1, conv.prompt_chars // 4)
    out_chars = len(content or "") + sum(len(name) + len(args) for name, args in calls)
    prefix = conv.prefix_chars // 4
    # Like OpenAI: caching starts at 1024 tokens and grows in 128-token blocks.
    cached = min(prompt, prefix // 128 * 128) if prefix >= 1024 else 0
    return Usage(
        prompt_tokens=override.get("prompt_tokens", prompt),
        completion_tokens=override.get("completion_tokens", max(1, out_chars // 4)),
        cached_tokens=override.get("cached_tokens", cached),
        reasoning_tokens=override.get("reasoning_tokens", 0),
        total_tokens=override.get("total_tokens"),
    )


def reply_for(
    conv: Conversation,
    scripts: Mapping[str, Sequence[ScriptStep]],
    responder: Callable[[Conversation], Answer] | None = None,
) -> Reply:
    """The scenario's reply to this request (the `responder`'s, when one is set: an offline
    model of durable_agent_runner.testing). Raises ApiError (404) for an unknown model."""
    override: Mapping[str, int] = {}
    keepalive = False
    delta_chars: int | None = None
    ids: tuple[str, ...] = ()
    if conv.instructions.lstrip().startswith(SUMMARY_MARKER):
        content, calls = _summarize(conv)
    elif responder is not None:
        content, calls = responder(conv)
    elif conv.model.startswith("script:"):
        content, calls, step = _script(conv, scripts)
        override, keepalive, delta_chars, ids = step.usage, step.keepalive, step.delta_chars, step.ids
    elif conv.model == "echo":
        content, calls = f"echo: {conv.last_user_text}", []
    elif conv.model.startswith("loop:"):
        content, calls = _loop(conv)
    elif conv.model == "team":
        content, calls = team.reply(conv)
    elif conv.model == "recall":
        content, calls = _recall(conv)
    else:  # "weather", "demo" and any other name: the offline demo works whatever LLM_MODEL is
        content, calls = _weather(conv)
    tool_calls = tuple(
        ToolCall(ids[i] if ids else f"call_{conv.turn}_{i}", name, args) for i, (name, args) in enumerate(calls)
    )
    return Reply(content, tool_calls, _usage(conv, content, calls, override), keepalive, delta_chars)
