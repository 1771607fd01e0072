"""`@tool(completes="outside", ...)`: the options of a tool whose call an outside system completes
(docs/outside-completion.md), checked when the tool is made, as the `OutsideSpec` frozen into runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from durable_agent_runner.machine.texts import said
from durable_agent_runner.workflows.types import OutsideSpec

OPTIONS = ("outside_timeout_seconds", "on_outside_timeout", "outside_result")


def outside_spec(name: str, options: Mapping[str, Any]) -> OutsideSpec | None:
    """The outside wait of a tool that completes outside (None: it completes inside, as its
    activity returns); its options checked here, so a bad one fails at import."""
    outside = {k: v for k, v in options.items() if k in OPTIONS}
    completes = options.get("completes", "inside")
    if completes not in ("inside", "outside"):
        raise ValueError(f"tool '{name}': completes must be 'inside' or 'outside', not {completes!r}")
    if completes == "inside":
        if outside:
            raise ValueError(f"tool '{name}': {', '.join(outside)} only go with completes='outside'")
        return None
    if options.get("local"):
        raise ValueError(f"tool '{name}': completes='outside' cannot be local (its wait is the run's, not a task's)")
    result: dict[str, object] | None = None
    if "outside_result" in outside:
        try:
            result = TypeAdapter(outside["outside_result"]).json_schema()
        except Exception as exc:
            raise TypeError(f"tool '{name}': cannot build a JSON schema for its outside_result: {exc}") from exc
    try:
        return OutsideSpec.model_validate(
            {"result_schema": result}
            | ({"timeout_seconds": outside["outside_timeout_seconds"]} if "outside_timeout_seconds" in outside else {})
            | ({"on_timeout": outside["on_outside_timeout"]} if "on_outside_timeout" in outside else {})
        )
    except ValidationError as exc:
        raise ValueError(f"tool '{name}': {'; '.join(said(e) for e in exc.errors(include_url=False))}") from None
