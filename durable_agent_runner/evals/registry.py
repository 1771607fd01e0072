"""Evaluators by name: the base class, the spec a file or a payload names one by, and the registry
that turns a spec back into an evaluator.

A spec takes pydantic-evals' three forms, in files and in payloads alike:
    `EqualsExpected`                                  no arguments
    `{Contains: "x"}`                                 one argument: the evaluator's first field
    `{Contains: {value: "x", case_sensitive: false}}` keyword arguments
Cases carry specs, not live evaluators, so a case is a plain payload; `build` makes the evaluator
where it runs (the scoring activity, activities/evals.py), from the registry of that process.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, overload

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, model_serializer, model_validator
from pydantic_core import ErrorDetails

from durable_agent_runner.machine.texts import said

from .context import EvaluationReason, EvaluatorContext, one_line

EvaluatorOutput = bool | int | float | str | EvaluationReason
EvaluatorFunction = Callable[..., EvaluatorOutput]


class EvaluatorSpecError(ValueError):
    """A spec that names no registered evaluator, or gives it arguments it refuses. One line."""


class Evaluator(BaseModel):
    """A class-based evaluator: its fields are its arguments, `evaluate` its verdict. Subclass it
    and decorate the subclass with `@register` so files can name it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    evaluation_name: str | None = None  # pydantic-evals' field: the result's name instead of the class's
    needs_model: ClassVar[bool] = False  # an LLM judge: its verdict needs a model call first

    def evaluate(self, ctx: EvaluatorContext) -> EvaluatorOutput:
        raise NotImplementedError


class FunctionEvaluator(Evaluator):
    """A registered function with the arguments its spec gave: `function(ctx, *args, **kwargs)`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    function: EvaluatorFunction
    args: tuple[JsonValue, ...] = ()
    kwargs: dict[str, JsonValue] = {}

    def evaluate(self, ctx: EvaluatorContext) -> EvaluatorOutput:
        return self.function(ctx, *self.args, **self.kwargs)


class EvaluatorSpec(BaseModel):
    """An evaluator by name, with its arguments: one positional (`args`) or keywords (`kwargs`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    args: tuple[JsonValue] | None = None
    kwargs: dict[str, JsonValue] | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, Evaluator):
            return dict(to_spec(data))
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and len(data) == 1 and "name" not in data:
            ((name, arguments),) = data.items()
            if isinstance(arguments, dict):
                return {"name": name, "kwargs": arguments}
            return {"name": name, "args": (arguments,)}
        if isinstance(data, dict) and "name" in data:
            return data
        raise ValueError("an evaluator is a name, or a mapping of one name to its argument or arguments")

    @model_serializer(mode="plain")
    def _to_short_form(self) -> JsonValue:
        if self.args is not None:
            return {self.name: self.args[0]}
        if self.kwargs:
            return {self.name: self.kwargs}
        return self.name

    def label(self) -> str:
        """The name its results carry: its `evaluation_name` when it gives one."""
        given = (self.kwargs or {}).get("evaluation_name")
        return given if isinstance(given, str) and given else self.name


_REGISTRY: dict[str, type[Evaluator] | EvaluatorFunction] = {}
T = TypeVar("T", bound=type[Evaluator] | EvaluatorFunction)
BUILT_IN = ("evaluators", "judge")  # the modules whose evaluators register themselves on import


def _with_built_ins() -> None:
    """The built-in evaluators are registered before a name is looked up or another registers
    (the package imports its modules on first use: nothing else may have imported them yet)."""
    for module in BUILT_IN:
        importlib.import_module(f"{__package__}.{module}")  # one being imported (its @register) is returned as is


@overload
def register(obj: T, *, name: str | None = None) -> T: ...
@overload
def register(obj: None = None, *, name: str | None = None) -> Callable[[T], T]: ...
def register(obj: T | None = None, *, name: str | None = None) -> T | Callable[[T], T]:
    """Register an Evaluator subclass or a function `f(ctx, ...)` under `name` (default: its own
    name), so specs can name it. Use as `@register` or `@register(name="...")`."""
    _with_built_ins()

    def add(target: T) -> T:
        key = name or target.__name__
        known = _REGISTRY.get(key)
        if known is not None and known is not target and _qualname(known) != _qualname(target):
            raise ValueError(f"an evaluator named {key!r} is already registered ({_qualname(known)})")
        _REGISTRY[key] = target
        return target

    return add(obj) if obj is not None else add


def registered() -> dict[str, type[Evaluator] | EvaluatorFunction]:
    """The registry's names and what they make (a copy)."""
    _with_built_ins()
    return dict(_REGISTRY)


def build(spec: EvaluatorSpec) -> Evaluator:
    """The evaluator `spec` names, with its arguments. Raises EvaluatorSpecError (one line)."""
    _with_built_ins()
    target = _REGISTRY.get(spec.name)
    if target is None:
        close = difflib.get_close_matches(spec.name, list(_REGISTRY), n=1)
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(_REGISTRY))}"
        raise EvaluatorSpecError(f"no evaluator named {spec.name!r} is registered ({hint})")
    if isinstance(target, type) and issubclass(target, Evaluator):
        fields = [f for f in target.model_fields if f != "evaluation_name"]
        kwargs = dict(spec.kwargs or {})
        if spec.args is not None:
            if not fields:
                raise EvaluatorSpecError(f"{spec.name} takes no arguments")
            kwargs = {fields[0]: spec.args[0]}
        try:
            return target(**kwargs)
        except ValidationError as err:
            first = first_error(err)
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            raise EvaluatorSpecError(one_line(f"{spec.name}: {where}: {said(first)}", 300)) from None
    if isinstance(target, type):
        raise EvaluatorSpecError(f"{spec.name} is a class that is not an Evaluator")
    args: tuple[JsonValue, ...] = spec.args or ()
    kwargs = {k: v for k, v in (spec.kwargs or {}).items() if k != "evaluation_name"}
    try:
        inspect.signature(target).bind(None, *args, **kwargs)
    except TypeError as err:
        raise EvaluatorSpecError(one_line(f"{spec.name}: {err}", 300)) from None
    return FunctionEvaluator(function=target, args=args, kwargs=kwargs)


def to_spec(evaluator: Evaluator) -> EvaluatorSpec:
    """The spec that builds `evaluator` again: its registered name and its non-default fields."""
    if isinstance(evaluator, FunctionEvaluator):
        fname = next((k for k, v in _REGISTRY.items() if v is evaluator.function), None)
        if fname is None:
            raise EvaluatorSpecError(f"{evaluator.function.__name__} is not registered: decorate it with @register")
        arg = evaluator.args[0] if evaluator.args else None
        return EvaluatorSpec(name=fname, args=(arg,) if evaluator.args else None, kwargs=evaluator.kwargs or None)
    name = next((k for k, v in _REGISTRY.items() if v is type(evaluator)), None)
    if name is None:
        raise EvaluatorSpecError(f"{type(evaluator).__name__} is not registered: decorate it with @register")
    values = evaluator.model_dump(mode="json", exclude_defaults=True)
    fields = [f for f in type(evaluator).model_fields if f != "evaluation_name"]
    if len(values) == 1 and fields and fields[0] in values and not isinstance(values[fields[0]], dict):
        return EvaluatorSpec(name=name, args=(values[fields[0]],))
    return EvaluatorSpec(name=name, kwargs=values or None)


def first_error(err: ValidationError) -> ErrorDetails:
    """The error to name first: an unknown field (most likely a typo, which also causes the
    "required" error of the field meant), else the first."""
    errors = err.errors()
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}"
