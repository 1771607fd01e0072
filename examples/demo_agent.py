"""The demo agent: three weather-style tools, as in the classic tool-loop exercise.

This is also the template for your own module: define tools with `@tool` and agents with
`Agent(...)` at module level, then start a worker with `python worker.py --tools your_module`.
The data is made up and deterministic, so the demo needs no network.
"""

from __future__ import annotations

import json
import os
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from durable_agent_runner import Agent, ToolContext, tool

_KNOWN = {
    "tokyo": ("sunny", 22.0),
    "paris": ("cloudy", 15.0),
    "london": ("light rain", 12.0),
    "new york": ("windy", 18.0),
    "berlin": ("overcast", 11.0),
    "sydney": ("clear", 25.0),
}
_CONDITIONS = ["sunny", "cloudy", "light rain", "windy", "clear", "overcast"]


class Weather(BaseModel):
    city: str
    condition: str
    temperature_c: float


def _weather(city: str, day: int = 0) -> Weather:
    key = city.strip().lower()
    if key in _KNOWN and day == 0:
        condition, temp = _KNOWN[key]
    else:
        seed = zlib.crc32(f"{key}:{day}".encode())
        condition, temp = _CONDITIONS[seed % len(_CONDITIONS)], float(seed % 30)
    return Weather(city=city.strip().title(), condition=condition, temperature_c=temp)


# Pure lookups: local activities, run in the same workflow task as the model's reply.
@tool(local=True)
def get_weather(city: str) -> Weather:
    """Get the current weather for a city.

    Args:
        city: The city's name, for example "Tokyo".
    """
    if not city.strip():
        raise ValueError("city must not be empty")
    return _weather(city)


@tool(local=True)
def get_forecast(city: str, days: int = 3) -> list[Weather]:
    """Get a daily weather forecast for a city.

    Args:
        city: The city's name.
        days: How many days ahead, 1 to 7.
    """
    if not 1 <= days <= 7:
        raise ValueError("days must be between 1 and 7")
    return [_weather(city, day) for day in range(1, days + 1)]


@tool(local=True)
def convert_temperature(celsius: float, unit: Literal["fahrenheit", "kelvin"] = "fahrenheit") -> dict[str, object]:
    """Convert a temperature from degrees Celsius.

    Args:
        celsius: The temperature in degrees Celsius.
        unit: The unit to convert to.
    """
    value = celsius * 9 / 5 + 32 if unit == "fahrenheit" else celsius + 273.15
    return {"value": round(value, 2), "unit": unit}


@tool
def send_report(to: str, body: str, ctx: ToolContext) -> str:
    """Send a weather report by email. This has a side effect, so a person approves each call.

    Args:
        to: The recipient's email address.
        body: The report's text.
    """
    if "@" not in to:
        raise ValueError(f"not an email address: {to!r}")
    # The demo's "mail server" is a file. The idempotency key makes a retried send a no-op.
    outbox = Path(os.environ.get("DEMO_OUTBOX", ".state/outbox.jsonl"))
    outbox.parent.mkdir(parents=True, exist_ok=True)
    if outbox.exists() and ctx.idempotency_key in outbox.read_text(encoding="utf-8"):
        return f"already sent to {to}"
    line = {"key": ctx.idempotency_key, "to": to, "body": body, "at": datetime.now(UTC).isoformat()}
    with outbox.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    return f"sent to {to}"


demo = Agent(
    name="demo",
    instructions=(
        "You are a concise weather assistant. Use the tools to look up real figures; "
        "never guess a temperature. Answer in one or two sentences."
    ),
    tools=[get_weather, get_forecast, convert_temperature, send_report],
    approvals={"send_report": "always"},
    max_turns=8,
)
