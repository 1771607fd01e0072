"""The bounds on data from outside a run, and the one place that enforces them.

Model replies and the tool-call arguments in them, tool and MCP results, approval decisions and
edits are parsed here once, where they enter (the activity that received them, the update's
types), into bounded values: workflow code never meets data it could not walk, dump or send on.

    MAX_DEPTH         64 levels of arrays and objects. Real tool schemas nest under ten; Python's
                      json (and anything that walks a value) recurses once per level, and the
                      workflow sandbox's stack is shallower than a plain thread's.
    MAX_CHARS         1 MiB of one value's JSON text (a call's arguments, a decision's edited
                      arguments): twice the most a model writes in one reply (128 k tokens are
                      about 512 k characters).
    MAX_NUMBER_CHARS  100 characters of one number literal (a 100-digit integer is past 2**330).
                      Python refuses integers of more than 4,300 digits with a bare ValueError.
    MAX_ITEMS         100,000 values in all the arrays and objects of one value together
                      (counted by the scan as their brackets and commas).
    text              lone surrogates (a "\\ud800" escape, a tool's str) become U+FFFD: no
                      payload and no HTTP body can carry them. NaN and infinities are not JSON.

`parse_json` reads JSON text; `ParsedArguments.args` is a call's arguments as an object, parsed
once per text (a tool call, the machine's record of it and the steps that carry it all read it
there, never parse it again); `check_value` checks a value decoded elsewhere (pydantic's JSON
in a signal or update); `clean_text` mends text; `result_text` makes a tool's return value the
text the model reads. Each refusal is one `OutsideDataError` with a
one-line message naming the bound. Pure: no I/O, no Temporal, safe inside the workflow sandbox.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import TYPE_CHECKING

import pydantic_core
from pydantic import BaseModel, PrivateAttr

MAX_DEPTH = 64
MAX_CHARS = 1024 * 1024
MAX_NUMBER_CHARS = 100
MAX_ITEMS = 100_000
# Text refused at the door stands in for the arguments it replaced, saying why (`refused`).
# It is not JSON, so the workflow passes it on like any unparseable arguments, and the activity
# that tells the model reads the reason back from it (`parse_json`).
REFUSED = "(refused: "

# A whole JSON string (brackets in it are text), or one bracket or comma.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|,')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class OutsideDataError(ValueError):
    """Data from outside that is not JSON or passes a bound. `bound` names the bound it passed
    (None: it is not JSON at all)."""

    def __init__(self, message: str, bound: str | None = None) -> None:
        super().__init__(message)
        self.bound = bound


def refused(reason: str) -> str:
    """The text that replaces arguments refused for `reason`."""
    return f"{REFUSED}{reason})"


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (surrogate pairs are joined)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def escapes_surrogates(text: str) -> bool:
    """Whether JSON `text` may decode to a lone surrogate (it escapes one, perhaps in a pair)."""
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def parse_json(
    text: str, *, max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH, max_items: int | None = MAX_ITEMS
) -> object:
    """JSON text from outside as a bounded value, its strings clean. Raises OutsideDataError.
    The depth is scanned first, without recursion: json.loads recurses once per level."""
    if len(text) > max_chars:
        raise OutsideDataError(f"longer than {max_chars:,} characters", "MAX_CHARS")
    if text.startswith(REFUSED) and text.endswith(")"):
        raise OutsideDataError(text[len(REFUSED) : -1][:200], "refused")
    text = clean_text(text)
    _scan(text, max_depth, max_items)
    try:
        value = _DECODER.decode(text)
    except RecursionError:  # not reachable past the scan; kept so no caller ever meets one
        raise OutsideDataError(f"nested deeper than {max_depth} levels", "MAX_DEPTH") from None
    except json.JSONDecodeError as err:
        at = "" if err.msg.endswith(" at") else " at"  # "Unterminated string starting at": not "at at"
        raise OutsideDataError(f"{err.msg}{at} position {err.pos}") from None
    return _cleaned(value) if escapes_surrogates(text) else value


def json_object(text: str) -> dict[str, object] | None:
    """`text` as a JSON object within the bounds, or None when it is not one ("" reads as {})."""
    try:
        value = parse_json(text or "{}")
    except OutsideDataError:
        return None
    return value if isinstance(value, dict) else None


class ParsedArguments(BaseModel):
    """Mixed into a model with `arguments: str` (a call's JSON text, from the model or as a person
    edited it): `args` is that text as a JSON object within the bounds, or None when it is not one.
    Parsed on first read and kept while the text stays the same object (an edit or a copy with new
    arguments parses again). Read-only: a caller that changes it changes every other reader's."""

    _parsed: tuple[str, dict[str, object] | None] | None = PrivateAttr(default=None)
    if TYPE_CHECKING:  # declared by each model, in its own place among its fields
        arguments: str

    @property
    def args(self) -> dict[str, object] | None:
        text = self.arguments
        if self._parsed is None or self._parsed[0] is not text:
            self._parsed = (text, json_object(text))
        return self._parsed[1]


def check_value(value: object, *, max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH) -> None:
    """Raises OutsideDataError unless `value`, decoded from JSON elsewhere, meets the bounds
    `parse_json` enforces. Walks without recursion, so any depth is safe to check."""
    stack: list[tuple[object, int]] = [(value, 1)]
    items = 0
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > max_depth:
                raise OutsideDataError(f"nested deeper than {max_depth} levels", "MAX_DEPTH")
            items += len(v) + 1
            if items > MAX_ITEMS:
                raise OutsideDataError(f"more than {MAX_ITEMS:,} values", "MAX_ITEMS")
            members = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
            for key, member in members:
                if key is not None:
                    _check_scalar(key)
                stack.append((member, depth + 1))
        else:
            _check_scalar(v)
    if len(json.dumps(value, ensure_ascii=False)) > max_chars:  # safe now: the depth is bounded
        raise OutsideDataError(f"longer than {max_chars:,} characters of JSON", "MAX_CHARS")


def _check_scalar(v: object) -> None:
    if isinstance(v, str):
        if clean_text(v) != v:
            raise OutsideDataError("a string holds a lone surrogate, which is not text", "text")
    elif isinstance(v, bool) or v is None:
        return
    elif isinstance(v, int):
        if v.bit_length() > 4 * MAX_NUMBER_CHARS or len(str(abs(v))) > MAX_NUMBER_CHARS:
            raise OutsideDataError(f"a number longer than {MAX_NUMBER_CHARS} digits", "MAX_NUMBER_CHARS")
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise OutsideDataError("NaN and infinities are not JSON", "text")
    else:
        raise OutsideDataError(f"a {type(v).__name__} is not a JSON value", "text")


def _scan(text: str, max_depth: int, max_items: int | None) -> None:
    opens = text.count("[") + text.count("{")
    if opens <= max_depth and (max_items is None or opens + text.count(",") <= max_items):
        return  # too few brackets and commas to pass either bound: no scan needed
    depth = items = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            items += 1
            if depth > max_depth:
                raise OutsideDataError(f"nested deeper than {max_depth} levels", "MAX_DEPTH")
        elif token in "]}":
            depth = max(depth - 1, 0)
        elif token == ",":
            items += 1
        if max_items is not None and items > max_items:
            raise OutsideDataError(f"more than {max_items:,} values", "MAX_ITEMS")


def _int(literal: str) -> int:
    if len(literal) > MAX_NUMBER_CHARS:
        raise OutsideDataError(f"a number longer than {MAX_NUMBER_CHARS} characters", "MAX_NUMBER_CHARS")
    return int(literal)


def _float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise OutsideDataError(f"a number longer than {MAX_NUMBER_CHARS} characters", "MAX_NUMBER_CHARS")
    value = float(literal)
    if not math.isfinite(value):
        raise OutsideDataError(f"the number {literal[:20]} is too large for a float", "MAX_NUMBER_CHARS")
    return value


def _constant(literal: str) -> object:
    raise OutsideDataError(f"{literal} is not JSON", "text")


# Built once: json.loads with hooks builds a decoder per call, which costs more than the parse.
_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def _cleaned(value: object) -> object:
    """`value` with lone surrogates out of its strings and keys (its depth is bounded)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k): _cleaned(v) for k, v in value.items()}
    return value


def result_text(value: object) -> str:
    """A tool's return value as the text the model reads: a string as it is, anything else as JSON.

    NaN and the infinities are not JSON (no provider parses them), so they become `null`
    wherever they sit; a model whose own config asks for them as constants is re-encoded. Bytes
    that are not UTF-8 and lone surrogates become U+FFFD rather than an error: the tool has run."""
    if isinstance(value, str):
        return clean_text(value)
    # pydantic's encoder also handles models inside lists and dicts, dataclasses, enums and dates.
    try:
        text = pydantic_core.to_json(value, fallback=str, inf_nan_mode="null").decode()  # None -> "null"
    except pydantic_core.PydanticSerializationError:  # bytes that are not UTF-8, a lone surrogate
        text = pydantic_core.to_json(_mended(value, MAX_DEPTH), fallback=str, inf_nan_mode="null").decode()
    if "NaN" in text or "Infinity" in text:  # rare: a model's `ser_json_inf_nan` won over ours, or plain text
        parsed = json.loads(text, parse_constant=lambda _: None)
        text = json.dumps(parsed, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text


def _mended(value: object, depth: int) -> object:
    """`value` with its bytes decoded as UTF-8 and its strings made text, U+FFFD for what is not."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        return clean_text(value)
    if depth <= 0:
        return "..."
    if isinstance(value, BaseModel):
        value = value.model_dump()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {_mended(k, 0) if isinstance(k, str | bytes) else k: _mended(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_mended(v, depth - 1) for v in value]
    return value
