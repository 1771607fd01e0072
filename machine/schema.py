"""Edited tool arguments against the tool's frozen JSON Schema, run inside the workflow.

An approval update's validator must refuse bad edited arguments before anything is recorded, and
validators can't call activities, so the check runs here, on the schema frozen into the run. It
uses `jsonschema` (Draft 2020-12, what pydantic emits) with format checking, so every keyword
pydantic can produce (`pattern`, `minItems`, `multipleOf`, `prefixItems`, `format`, `$ref` …)
is enforced; the tool activity validates again with pydantic, which stays the final word.
Pure and deterministic: no I/O (references resolve only inside the schema itself).

`pattern` and `patternProperties` run on Rust's regex engine (pydantic-core's), whose time is
linear in the text: a schema comes from a tool's author or an MCP server, an edit from a person,
and Python's backtracking `re` would let a pattern such as `^(a+)+$` hold the workflow task (and
the run) for hours. A pattern that engine cannot take (lookaround, backreferences, too large)
refuses the arguments, saying so, rather than be checked unsafely or waved through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from pydantic_core import SchemaError as PatternError
from pydantic_core import SchemaValidator, core_schema
from pydantic_core import ValidationError as NoMatch

MAX_PROBLEMS = 10


@functools.lru_cache(maxsize=256)
def _search(pattern: str) -> Callable[[str], bool] | None:
    """Whether a text holds a match of `pattern` anywhere (JSON Schema's reading), on Rust's
    engine; None when it cannot take the pattern."""
    try:
        compiled = SchemaValidator(
            core_schema.str_schema(pattern=pattern), config=core_schema.CoreConfig(regex_engine="rust-regex")
        )
    except PatternError:
        return None

    def search(text: str) -> bool:
        try:
            compiled.validate_python(text)
        except NoMatch:
            return False
        return True

    return search


def _unsafe(pattern: str) -> ValidationError:
    return ValidationError(
        f"the pattern {_cut(pattern, 80)!r} cannot be checked safely (lookaround, backreference or size)"
    )


def _pattern(validator: Any, pattern: str, instance: object, schema: object) -> Iterator[ValidationError]:
    if not isinstance(instance, str):
        return
    search = _search(pattern)
    if search is None:
        yield _unsafe(pattern)
    elif not search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: object, schema: object
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    assert isinstance(instance, dict)
    for pattern, subschema in patterns.items():
        search = _search(pattern)
        if search is None:
            yield _unsafe(pattern)
            continue
        for key, value in instance.items():
            if search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


Validator = validators.extend(  # type: ignore[no-untyped-call]  # jsonschema's extend is untyped
    Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def check(instance: object, schema: dict[str, Any], root: str = "") -> list[str]:
    """Problems with `instance` against `schema`, as `path: problem` lines (a problem of the whole
    value: `root: problem`, or the bare problem); empty when valid."""
    try:
        Draft202012Validator.check_schema(schema)
        validator = Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    except SchemaError as err:  # a frozen schema no validator accepts: refuse, never wave through
        return [f"the tool's schema is invalid: {_cut(err.message)}"]
    except Exception as err:  # e.g. a $ref that resolves nowhere: the same
        return [f"the tool's schema cannot be checked: {_cut(str(err))}"]
    problems = []
    for e in errors:
        path = ".".join(map(str, e.absolute_path)) or root
        problems.append(f"{path}: {_cut(e.message)}" if path else _cut(e.message))
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more"]
    return problems


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"  # messages quote the value
