"""Edited tool arguments against the tool's frozen JSON Schema, run inside the workflow.

An approval update's validator must refuse bad edited arguments before anything is recorded, and
validators can't call activities, so the check runs here, on the schema frozen into the run. It
uses `jsonschema` (Draft 2020-12, what pydantic emits) with format checking, so every keyword
pydantic can produce (`pattern`, `minItems`, `multipleOf`, `prefixItems`, `format`, `$ref` …)
is enforced; the tool activity validates again with pydantic, which stays the final word.
Pure and deterministic: no I/O (references resolve only inside the schema itself).
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MAX_PROBLEMS = 10


def check(instance: object, schema: dict[str, Any]) -> list[str]:
    """Problems with `instance` against `schema`, as `path: problem` lines; empty when valid."""
    try:
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    except SchemaError as err:  # a frozen schema no validator accepts: refuse, never wave through
        return [f"the tool's schema is invalid: {_cut(err.message)}"]
    except Exception as err:  # e.g. a $ref that resolves nowhere: the same
        return [f"the tool's schema cannot be checked: {_cut(str(err))}"]
    problems = [f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: {_cut(e.message)}" for e in errors]
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"… and {len(problems) - MAX_PROBLEMS} more"]
    return problems


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"  # messages quote the value
