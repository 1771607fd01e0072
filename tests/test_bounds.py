"""machine/bounds.py, the one parser of outside data: properties over generated values."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from durable_agent_runner.agents.tools import validate_arguments
from durable_agent_runner.machine import bounds
from durable_agent_runner.machine.bounds import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    OutsideDataError,
    check_value,
    clean_text,
    parse_json,
)

# JSON values within the bounds: text without lone surrogates, finite floats, short integers,
# nesting well under MAX_DEPTH.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10 ** (MAX_NUMBER_CHARS - 2)), max_value=10 ** (MAX_NUMBER_CHARS - 2))
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5), max_leaves=40
)


@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans())
def test_any_value_within_the_bounds_comes_back_as_it_was(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert parse_json(text) == value
    check_value(value)  # the check of decoded values agrees


def nest(depth: int, kinds: list[bool], closed: bool) -> str:
    """`depth` levels of arrays and objects (`kinds`, cycled), closed or cut off."""
    opens = "".join("[" if kinds[i % len(kinds)] else '{"k":' for i in range(depth))
    closes = "".join("]" if kinds[i % len(kinds)] else "}" for i in reversed(range(depth)))
    return opens + ("0" + closes if closed else "")


@settings(max_examples=60, deadline=None)
@given(st.integers(MAX_DEPTH + 1, 20_000), st.lists(st.booleans(), min_size=1, max_size=4), st.booleans())
def test_any_nesting_past_the_limit_is_refused_never_a_recursion_error(depth: int, kinds: list[bool], closed: bool):
    with pytest.raises(OutsideDataError, match=f"nested deeper than {MAX_DEPTH} levels") as caught:
        parse_json(nest(depth, kinds, closed))
    assert caught.value.bound == "MAX_DEPTH"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, MAX_DEPTH), st.lists(st.booleans(), min_size=1, max_size=4))
def test_nesting_up_to_the_limit_is_read(depth: int, kinds: list[bool]) -> None:
    assert parse_json(nest(depth, kinds, True)) is not None


@given(st.text(st.sampled_from('[]{}",:\\ ab'), max_size=200))
def test_brackets_inside_strings_are_text(inner: str) -> None:
    value = {"s": inner * 50}
    assert parse_json(json.dumps(value)) == value


@settings(max_examples=50, deadline=None)
@given(st.integers(MAX_NUMBER_CHARS + 1, 6000), st.sampled_from(["", "-", "0.", "1e"]))
def test_a_number_too_long_is_refused_by_its_bound(digits: int, form: str) -> None:
    """Python's own limit (4,300 digits) raises a bare ValueError; ours is named, and lower."""
    with pytest.raises(OutsideDataError, match="a number longer than") as caught:
        parse_json('{"n": ' + form + "7" * digits + "}")
    assert caught.value.bound == "MAX_NUMBER_CHARS"
    with pytest.raises(OutsideDataError, match="a number longer than"):
        check_value({"n": int("7" * digits)}) if digits <= 4300 else check_value({"n": 7 ** (digits * 2)})


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "1e999"])
def test_what_is_not_a_json_number_is_refused(text: str) -> None:
    with pytest.raises(OutsideDataError):
        parse_json(text)


@given(st.text(max_size=50))
def test_clean_text_is_valid_utf8_and_leaves_valid_text_alone(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    assert clean_text(cleaned) == cleaned
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert cleaned == text


def test_lone_surrogates_become_the_replacement_character_and_pairs_join() -> None:
    assert clean_text("a\ud800b\udc00c") == "a\ufffdb\ufffdc"
    assert clean_text("\ud83d\ude00") == "\U0001f600"
    assert parse_json('{"\\ud800": ["\\udfff", "\\ud83d\\ude00"]}') == {"\ufffd": ["\ufffd", "\U0001f600"]}


def test_length_and_values_are_bounded() -> None:
    with pytest.raises(OutsideDataError, match="longer than 1,048,576 characters"):
        parse_json(json.dumps("x" * bounds.MAX_CHARS))
    with pytest.raises(OutsideDataError, match="more than 100,000 values"):
        parse_json("[" + "0," * bounds.MAX_ITEMS + "0]")
    with pytest.raises(OutsideDataError, match="more than 100,000 values"):
        check_value({"a": [0] * bounds.MAX_ITEMS})


def test_refused_text_reads_back_as_its_reason() -> None:
    with pytest.raises(OutsideDataError, match=r"^nested deeper than 64 levels$") as caught:
        parse_json(bounds.refused("nested deeper than 64 levels"))
    assert caught.value.bound == "refused"
    with pytest.raises(OutsideDataError, match="Expecting value at position 0") as not_json:
        parse_json("oops")
    assert not_json.value.bound is None  # not JSON at all: no bound passed
    with pytest.raises(OutsideDataError, match=r"^Unterminated string starting at position 6$"):
        parse_json('{"a": "x')  # said "starting at at position 6"


def test_check_value_refuses_what_is_not_json_at_any_depth() -> None:
    deep: object = 0
    for _ in range(100_000):  # far past Python's recursion limit: the walk does not recurse
        deep = [deep]
    with pytest.raises(OutsideDataError, match="nested deeper"):
        check_value(deep)
    for bad, why in [({"a": "\ud800"}, "lone surrogate"), ({"a": math.inf}, "NaN"), ({"a": {1, 2}}, "not a JSON")]:
        with pytest.raises(OutsideDataError, match=why):
            check_value(bad)


class Weather(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    days: int = 1
    tags: list[str] = []


ARGUMENTS = st.dictionaries(st.sampled_from(["city", "days", "tags", "other"]), VALUES, max_size=4) | VALUES


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS)
def test_the_argument_check_agrees_with_pydantic_within_the_bounds(value: object) -> None:
    """A tool accepts arguments (bounded parse, then its pydantic model) exactly when pydantic,
    reading the same JSON itself, does."""
    text = json.dumps(value)
    ours = validate_arguments("get_weather", Weather, text)
    try:
        theirs: Weather | None = Weather.model_validate_json(text)
    except ValidationError:
        theirs = None
    assert (ours if isinstance(ours, BaseModel) else None) == theirs


# ------------------------------------------------------------------ a call's arguments, typed once


def test_a_calls_arguments_are_parsed_once_per_text(monkeypatch: pytest.MonkeyPatch):
    """`ToolCall.args` is the one reading of a call's arguments: every reader after the first gets
    the same value; an edit or a copy with new arguments is read again."""
    from durable_agent_runner.machine.calls import describe_call
    from durable_agent_runner.workflows.types import ToolCall

    parsed: list[str] = []
    real = bounds.json_object
    monkeypatch.setattr(bounds, "json_object", lambda text: parsed.append(text) or real(text))
    call = ToolCall(call_id="c1", name="get_weather", arguments='{"city": "Tokyo"}')
    assert call.args == {"city": "Tokyo"} and call.args is call.args
    assert describe_call(call) == "get_weather(city=Tokyo)"
    assert parsed == ['{"city": "Tokyo"}']
    call.arguments = '{"city": "Paris"}'  # a person's edit (machine/edits.py)
    assert call.args == {"city": "Paris"} and len(parsed) == 2
    copy = call.model_copy(update={"arguments": "[1, 2]"})
    assert copy.args is None and call.args == {"city": "Paris"}  # not an object: None, the text kept
    assert ToolCall.model_validate_json(call.model_dump_json()).args == {"city": "Paris"}
    assert "_parsed" not in call.model_dump_json()  # the payload is the text alone, as before


def test_no_workflow_or_machine_module_parses_json_but_the_bounds():
    """Outside values become typed once: workflow and machine code reads `args` or calls
    bounds.parse_json, never json.loads or a second json_object of a call's arguments."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in [*(root / "workflows").rglob("*.py"), *(root / "machine").rglob("*.py")]:
        if path.name == "bounds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                if name in ("loads", "json_object", "validate_json", "model_validate_json"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    assert found == []


def test_an_answer_nested_past_the_bounds_is_text_to_an_eval():
    from durable_agent_runner.machine.eval_plan import output_json

    assert output_json('{"a": [1, 2]}') == {"a": [1, 2]}
    assert output_json("[" * 200_000 + "]" * 200_000) is None  # not a RecursionError in the workflow
    assert output_json("[1, NaN]") is None and output_json("plain words") is None
