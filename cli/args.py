"""A JSON object from a command-line argument: the one place the CLI parses JSON it was given
(`run --model-settings`, `approve --args`, `edit --args`, chat's edited arguments).

Bounded before anything else sees it: at most MAX_BYTES of text and MAX_DEPTH levels of nesting
(Python's own parser gives up on deep nesting with a RecursionError, and what is deeper than this
has no business in model settings or tool arguments). A bad one is a ValueError whose text
names the flag: one line for the user."""

from __future__ import annotations

import json
from typing import Any

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32


def json_object(text: str, flag: str, what: str = "a JSON object") -> dict[str, Any]:
    """`text` as a JSON object, or ValueError('FLAG is/must …'), one line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ValueError(f"{flag} is larger than {MAX_BYTES // 1024} KiB")
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"{flag} is nested more than {MAX_DEPTH} levels deep")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{flag} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be {what}")
    return value


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (a scan: no recursion, no parse)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
