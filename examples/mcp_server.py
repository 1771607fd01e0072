"""A tiny MCP server for examples/mcp_agent.py: weather lookups and a report "sender", over stdio.

    python examples/mcp_server.py          # speaks MCP on standard input and output

The data is made up and deterministic (no network), as in the demo agent. Any MCP server works
the same way; this one exists so the example runs offline.
"""

from __future__ import annotations

import zlib

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather", log_level="WARNING")
_KNOWN = {"tokyo": ("sunny", 22.0), "paris": ("cloudy", 15.0), "london": ("light rain", 12.0)}
_CONDITIONS = ("sunny", "cloudy", "light rain", "windy", "clear", "overcast")


@server.tool()
def get_weather(city: str) -> dict[str, object]:
    """Get the current weather for a city."""
    key = city.strip().lower()
    seed = zlib.crc32(key.encode())
    condition, temp = _KNOWN.get(key, (_CONDITIONS[seed % len(_CONDITIONS)], float(seed % 30)))
    return {"city": city.strip().title(), "condition": condition, "temperature_c": temp}


@server.tool()
def convert_temperature(celsius: float, unit: str = "fahrenheit") -> dict[str, object]:
    """Convert a temperature from degrees Celsius to "fahrenheit" or "kelvin"."""
    value = celsius * 9 / 5 + 32 if unit == "fahrenheit" else celsius + 273.15
    return {"value": round(value, 2), "unit": unit}


@server.tool()
def send_report(to: str, body: str) -> str:
    """Send a weather report by email (a side effect: the agent asks a person first)."""
    return f"sent to {to} ({len(body)} characters)"


if __name__ == "__main__":
    server.run("stdio")
