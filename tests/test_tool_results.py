"""A tool's result reaches the model as valid JSON, whatever floats it holds (docs/bounds.md):
NaN and the infinities, which no JSON parser reads, become null wherever they sit."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from durable_agent_runner import ToolContext, tool

CTX = ToolContext(run_id="wf-1", call_id="call-1", idempotency_key="wf-1/call-1", turn=1, attempt=1)


def strict_json(text: str) -> Any:
    """What a provider's parser reads: plain JSON, no NaN or Infinity constants."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def result_of(value: object) -> str:
    @tool
    def give() -> object:
        """Gives the value."""
        return value

    result = asyncio.run(give.invoke("{}", CTX))
    assert not result.is_error, result.output
    return result.output


def nulled(value: Any) -> Any:
    """`value` as the model should read it: NaN and infinities as None, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: nulled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nulled(v) for v in value]
    return value


def test_nan_and_infinities_become_null() -> None:
    assert strict_json(result_of(float("nan"))) is None
    assert strict_json(result_of({"a": float("inf"), "b": [float("-inf"), 1.5]})) == {"a": None, "b": [None, 1.5]}


class Reading(BaseModel):
    value: float


class Loud(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")  # asks pydantic for NaN in its JSON
    value: float
    label: str = "NaN or Infinity"


@dataclasses.dataclass
class Point:
    x: float


def test_inside_models_and_dataclasses_even_one_that_asks_for_constants() -> None:
    out = strict_json(result_of([Reading(value=float("nan")), Point(x=float("inf")), Loud(value=float("-inf"))]))
    assert out == [{"value": None}, {"x": None}, {"value": None, "label": "NaN or Infinity"}]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_any_nesting_of_floats_is_valid_json(value: Any) -> None:
    if isinstance(value, str):
        return  # a string is the result's text as it is
    assert strict_json(result_of(value)) == nulled(value)


def test_bytes_that_are_not_utf8_and_lone_surrogates_are_text_not_an_error() -> None:
    """The tool has run: a result it cannot spell is mended (U+FFFD), never told to the model
    as the tool's failure, which would have it call a tool that already acted again."""
    assert strict_json(result_of(b"caf\xc3\xa9")) == "café"
    assert strict_json(result_of(b"\xff\xfeok")) == "\ufffd\ufffdok"
    out = strict_json(result_of({"raw": b"\x80", "name": "x\udc80", "n": float("nan"), "p": Point(x=1.0)}))
    assert out == {"raw": "\ufffd", "name": "x\ufffd", "n": None, "p": {"x": 1.0}}
    assert result_of("lone \ud800") == "lone \ufffd"


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.binary(max_size=6) | st.floats(), lambda inner: st.lists(inner, max_size=4), max_leaves=12))
def test_any_bytes_anywhere_make_valid_json(value: Any) -> None:
    strict_json(result_of(value))
