"""The demo agent: three weather-style tools, as in the classic tool-loop exercise.

This is also the template for your own module: define tools with `@tool` and agents with
`Agent(...)` at module level, then start a worker with `python worker.py --tools your_module`.
The data is made up and deterministic, so the demo needs no network.
"""

from __future__ import annotations

import zlib
from typing import Literal

from pydantic import BaseModel

from activities import Agent, tool

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


@tool
def get_weather(city: str) -> Weather:
    """Get the current weather for a city.

    Args:
        city: The city's name, for example "Tokyo".
    """
    if not city.strip():
        raise ValueError("city must not be empty")
    return _weather(city)


@tool
def get_forecast(city: str, days: int = 3) -> list[Weather]:
    """Get a daily weather forecast for a city.

    Args:
        city: The city's name.
        days: How many days ahead, 1 to 7.
    """
    if not 1 <= days <= 7:
        raise ValueError("days must be between 1 and 7")
    return [_weather(city, day) for day in range(1, days + 1)]


@tool
def convert_temperature(celsius: float, unit: Literal["fahrenheit", "kelvin"] = "fahrenheit") -> dict[str, object]:
    """Convert a temperature from degrees Celsius.

    Args:
        celsius: The temperature in degrees Celsius.
        unit: The unit to convert to.
    """
    value = celsius * 9 / 5 + 32 if unit == "fahrenheit" else celsius + 273.15
    return {"value": round(value, 2), "unit": unit}


demo = Agent(
    name="demo",
    instructions=(
        "You are a concise weather assistant. Use the tools to look up real figures; "
        "never guess a temperature. Answer in one or two sentences."
    ),
    tools=[get_weather, get_forecast, convert_temperature],
    max_turns=8,
)
