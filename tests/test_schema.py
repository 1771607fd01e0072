"""Edited arguments are checked against every JSON Schema keyword pydantic emits (pure, no server)."""

from __future__ import annotations

import time
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from durable_agent_runner import tool
from durable_agent_runner.machine import schema


class Line(BaseModel):
    sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d+$")]
    qty: Annotated[int, Field(ge=1, multiple_of=5)]


@tool
def order(
    lines: Annotated[list[Line], Field(min_length=1, max_length=3)],
    pair: tuple[int, str],
    when: Literal["now", "later"] = "now",
    note: Annotated[str, Field(max_length=10)] = "",
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5,
) -> str:
    """Place an order."""
    return "ok"


PARAMS = order.spec().parameters
GOOD = {"lines": [{"sku": "ABC-1", "qty": 5}], "pair": [1, "a"]}


def test_valid_arguments_pass():
    assert schema.check(GOOD, PARAMS) == []
    assert order.validate('{"lines": [{"sku": "ABC-1", "qty": 5}], "pair": [1, "a"]}') is not None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"lines": []}, "lines: [] should be non-empty"),
        ({"lines": [GOOD["lines"][0]] * 4}, "is too long"),
        ({"lines": [{"sku": "abc", "qty": 5}]}, "lines.0.sku: 'abc' does not match"),
        ({"lines": [{"sku": "ABC-1", "qty": 7}]}, "lines.0.qty: 7 is not a multiple of 5"),
        ({"lines": [{"sku": "ABC-1", "qty": 0}]}, "lines.0.qty: 0 is less than the minimum of 1"),
        ({"pair": ["x", "a"]}, "pair.0: 'x' is not of type 'integer'"),
        ({"pair": [1, "a", 3]}, "pair: [1, 'a', 3] is too long"),
        ({"when": "soon"}, "when: 'soon' is not one of ['now', 'later']"),
        ({"note": "x" * 11}, "note: 'xxxxxxxxxxx' is too long"),
        ({"ratio": 1}, "ratio: 1 is greater than or equal to the maximum of 1"),
        ({"extra": 1}, "('extra' was unexpected)"),
    ],
)
def test_each_keyword_is_enforced(change: dict[str, object], problem: str):
    problems = schema.check({**GOOD, **change}, PARAMS)
    assert any(problem in p for p in problems), problems


def test_formats_are_checked():
    params = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}
    assert schema.check({"d": "2026-11-23"}, params) == []
    assert schema.check({"d": "23/11/2026"}, params) == ["d: '23/11/2026' is not a 'date'"]


def test_problems_are_bounded():
    params = {"type": "object", "additionalProperties": {"type": "integer"}}
    problems = schema.check({f"k{i}": "x" * 5000 for i in range(50)}, params)
    assert len(problems) == schema.MAX_PROBLEMS + 1 and problems[-1] == "… and 40 more"
    assert all(len(p) < 300 for p in problems)


def test_a_broken_schema_refuses_rather_than_waving_through():
    assert schema.check({"a": 1}, {"type": "nonsense"})[0].startswith("the tool's schema is invalid")


def test_a_catastrophic_pattern_cannot_hold_the_workflow():
    """`^(a+)+$` against n a's and a '!' takes Python's backtracking `re` about 2**n steps (a few
    seconds at 24, hours at 40); a pattern comes from a tool's author or an MCP server, the text
    from a person's edit."""
    params = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
    }
    started = time.monotonic()
    problems = schema.check({"s": "a" * 24 + "!", "b" * 24 + "!": "x", "b" * 24: "y"}, params)
    assert time.monotonic() - started < 1.0
    assert problems == [f"{'b' * 24}: 'y' is not of type 'integer'", f"s: '{'a' * 24}!' does not match '^(a+)+$'"]
    assert schema.check({"s": "aaa", "b": 1}, params) == []


def test_a_pattern_the_safe_engine_cannot_take_refuses():
    params = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"^(?=a)(a)\1$"}}}
    assert schema.check({"s": "aa"}, params) == [
        "s: the pattern '^(?=a)(a)\\\\1$' cannot be checked safely (lookaround, backreference or size)"
    ]
    assert schema.check({"s": 1}, params) == ["s: 1 is not of type 'string'"]  # only strings meet a pattern
