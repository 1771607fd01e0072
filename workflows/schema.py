"""A small JSON Schema check for edited tool arguments, run inside the workflow.

An approval update's validator must refuse bad edited arguments before anything is recorded, and
validators can't call activities, so the check runs here, on the schema frozen into the run.
It covers what pydantic generates for tool signatures (types, required, additionalProperties,
enum/const, anyOf/oneOf, $ref into $defs, items, numeric and length bounds). The tool activity
validates again with pydantic, which stays the final word. Pure and deterministic.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check(instance: object, schema: dict[str, Any]) -> list[str]:
    """Problems with `instance` against `schema`, as `path: problem` lines; empty when valid."""
    return _check(instance, schema, schema.get("$defs", {}), "")


def _check(value: object, schema: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    where = path or "arguments"
    if ref := schema.get("$ref"):
        target = defs.get(str(ref).rsplit("/", 1)[-1])
        return _check(value, target, defs, path) if isinstance(target, dict) else []
    for key in ("anyOf", "oneOf"):
        if options := schema.get(key):
            if any(not _check(value, option, defs, path) for option in options):
                return []
            return [f"{where}: does not match any allowed form"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: must be {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: must be one of {', '.join(repr(v) for v in schema['enum'])}"]
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds and not any(_is(value, k) for k in kinds):
        return [f"{where}: expected {' or '.join(kinds)}, got {type(value).__name__}"]
    problems: list[str] = []
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        problems += [f"{path + '.' if path else ''}{k}: required" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if key in props:
                problems += _check(item, props[key], defs, sub)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{sub}: not a parameter of this tool")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += _check(item, schema["additionalProperties"], defs, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += _check(item, schema["items"], defs, f"{where}[{i}]")
    if isinstance(value, int | float) and not isinstance(value, bool):
        problems += _bounds(value, schema, where)
    if isinstance(value, str | list):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']}")
    return problems


def _is(value: object, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _bounds(value: float, schema: dict[str, Any], where: str) -> list[str]:
    tests = {
        "minimum": value >= schema.get("minimum", value),
        "maximum": value <= schema.get("maximum", value),
        "exclusiveMinimum": "exclusiveMinimum" not in schema or value > schema["exclusiveMinimum"],
        "exclusiveMaximum": "exclusiveMaximum" not in schema or value < schema["exclusiveMaximum"],
    }
    return [f"{where}: must satisfy {key} {schema[key]}" for key, ok in tests.items() if not ok]
