"""A JSON object from a command-line argument: the one place the CLI parses JSON it was given
(`run --model-settings`, `approve --args`, `edit --args`, chat's edited arguments).

Bounded by the one parser of outside data (workflows/bounds.py), nested at most MAX_DEPTH levels:
what is deeper has no business in model settings or tool arguments. A bad one is a ValueError
whose text names the flag: one line for the user."""

from __future__ import annotations

from typing import Any

from durable_agent_runner.workflows.bounds import OutsideDataError, parse_json

MAX_DEPTH = 32


def json_object(text: str, flag: str, what: str = "a JSON object") -> dict[str, Any]:
    """`text` as a JSON object, or ValueError('FLAG is/must …'), one line."""
    try:
        value = parse_json(text, max_depth=MAX_DEPTH)
    except OutsideDataError as err:
        raise ValueError(f"{flag} is not valid JSON: {err}" if err.bound is None else f"{flag} is {err}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be {what}")
    return value
