"""The weather demo's model (`weather`, `demo`, and any model name fake_llm has no other scenario
for), as a `FunctionModel`: a function of the request, as a user writes one (docs/testing.md).

  its first turn after the user spoke   get_weather for each city the user named, in parallel
                                        (Tokyo and Paris when none)
  then, once                            convert_temperature for the warmest, when offered
  then                                  the answer; with send_report offered and "send"/"email"
                                        asked for, send_report first, then the answer

An agent without get_weather (a newcomer's own, run against the demo's model) is told there is
no script for it and what to do (`no_script_text`), instead of talking about the weather.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import as_dict
from durable_agent_runner.testing.models import FunctionModel
from durable_agent_runner.testing.request import ModelRequest
from durable_agent_runner.testing.steps import Step, call, reply
from durable_agent_runner.workflows.types import ToolMessage

CITIES = ("Tokyo", "Paris", "London", "New York", "Berlin", "Sydney", "Madrid", "Rome", "Cairo", "Toronto")
DEFAULT_CITIES = ("Tokyo", "Paris")


def no_script_text(what: str) -> str:
    """The offline model's answer to an agent nobody scripted: says so, and what to do."""
    return (
        f"[offline model] There is no script for {what}. This is the offline test double, not a real "
        f"model: script your agent's replies with durable_agent_runner.testing.ScriptedModel or "
        f"FunctionModel (docs/testing.md), or set OPENAI_API_KEY (or LLM_BASE_URL) to use a real model."
    )


def weather(request: ModelRequest) -> Step:
    # Phases count from the last user message so a multi-question demo chat keeps working.
    if "get_weather" not in request.tools:
        # Not the weather demo's agent: most likely a newcomer's own, run against the demo's model.
        return reply(no_script_text(f"this agent (its tools: {', '.join(request.tools) or 'none'})"))
    if request.turn_since_prompt == 0:
        return [call("get_weather", city=city) for city in _cities(request.prompt)]
    results = request.tool_results
    facts = _weather_facts(request, results)
    if (
        request.turn_since_prompt == 1
        and facts.temps
        and facts.fahrenheit is None
        and "convert_temperature" in request.tools
    ):
        warmest = max(facts.temps, key=lambda t: t[2])
        return call("convert_temperature", celsius=warmest[2], unit="fahrenheit")
    text = _weather_text(facts)
    # "…and send the report to ops@example.com": a side effect, which the demo agent guards
    # with an approval.
    if "send_report" in request.tools and re.search(r"\b(send|email|mail)\b", request.prompt, re.I):
        sent = [r for r in results if r.name == "send_report"]
        if not sent:
            found = re.search(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", request.prompt)
            return call("send_report", to=found.group(0) if found else "team@example.com", body=text)
        return reply(f"{text} Report: {_snippet(sent[-1].content)}")
    return reply(text)


WEATHER = FunctionModel(weather)


# ------------------------------------------------------------------------------ the facts


def _cities(text: str) -> list[str]:
    found = [(m.start(), city) for city in CITIES if (m := re.search(rf"\b{re.escape(city)}\b", text, re.I))]
    return [city for _, city in sorted(found)] or list(DEFAULT_CITIES)


def _parse_result(result: ToolMessage) -> dict[str, Any] | None:
    """The tool's JSON object, or None when it is not JSON or reads like an error."""
    try:
        value = as_dict(json.loads(result.content))
    except ValueError:
        return None
    if value is None or "error" in value:
        return None
    return value


def _city_of(request: ModelRequest, result: ToolMessage, parsed: dict[str, Any] | None) -> str:
    if parsed is not None and isinstance(parsed.get("city"), str):
        return str(parsed["city"])
    asked = request.call_of(result.call_id)
    try:
        args = (as_dict(json.loads(asked.arguments)) if asked else None) or {}
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


def _weather_facts(request: ModelRequest, results: Sequence[ToolMessage]) -> _WeatherFacts:
    facts = _WeatherFacts()
    for result in results:
        parsed = _parse_result(result)
        is_convert = result.name == "convert_temperature" or (
            not result.name and parsed is not None and "unit" in parsed
        )
        if is_convert:
            value = _number((parsed or {}).get("value"))
            if value is None:
                facts.problems.append(f"The temperature conversion failed: {_snippet(result.content)}")
            else:
                facts.fahrenheit = value
            continue
        if result.name not in ("", "get_weather"):
            continue  # some other tool (e.g. get_forecast): nothing to report
        temp = _number((parsed or {}).get("temperature_c"))
        city = _city_of(request, result, parsed)
        if parsed is None or temp is None:
            facts.problems.append(f"The weather lookup for {city} failed: {_snippet(result.content)}")
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
