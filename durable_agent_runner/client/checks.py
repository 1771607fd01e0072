"""The client's arguments, checked at the door: one set of rules that a user's code and the CLI's
flags both meet (the CLI parses its flags, then calls these), before anything is sent.

A value of the wrong type is a `TypeError`; a value of the right type out of its bounds is a
`BadArgument` (a `ValueError`) whose `field` names the argument, so the CLI can name its flag.
Each message is one line."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ValidationError
from temporalio.common import WorkflowIDReusePolicy

from durable_agent_runner.activities import wire
from durable_agent_runner.config.env import login_name
from durable_agent_runner.config.files import repeated_key
from durable_agent_runner.config.values import queue_name
from durable_agent_runner.machine import texts
from durable_agent_runner.machine.bounds import OutsideDataError, check_value, parse_json
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types.questions import MAX_CHOICES

M = TypeVar("M", bound=BaseModel)

MAX_RUN_ID = 255  # characters of the id of a run the client starts
MAX_FALLBACKS = 8  # fallback models of a run: more is a list gone wrong, not a plan
MAX_ANY_ID = 1000  # of a run that exists (Temporal's own limit): a child run's id is its parent's and more
MAX_NAME = 200  # an agent's, a tool call's or a person's name
MAX_PROMPT_CHARS = 10 * 1024 * 1024  # larger prompts belong in a tool's input, not a run's start
MAX_TURNS = 10_000
MAX_WAIT = 3600.0  # seconds: the longest any call of the client waits for a worker
MAX_JSON_DEPTH = 32  # of a JSON object a person gives (model settings, tool arguments)


class BadArgument(ValueError):
    """An argument out of its bounds; `field` names it (`max_turns`, `temperature`, ...)."""

    def __init__(self, field: str, message: str, sep: str = ": ") -> None:
        super().__init__(f"{field}{sep}{message}" if field else message)
        self.field, self.reason = field, message


def string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    return value


def name(value: object, field: str, limit: int = MAX_NAME) -> str:
    text = string(value, field)
    if not (0 < len(text) <= limit and text.isprintable()):
        raise BadArgument(field, f"must be 1-{limit} printable characters")
    return text


def model(value: object, field: str = "model") -> str:
    """A model string: a model's name, or a provider's prefix and its model ("anthropic:claude-…")."""
    text = name(value, field)
    try:
        t.split_model(text)
    except ValueError as err:
        raise BadArgument(field, str(err)) from None
    return text


def models(value: object, field: str = "fallback_models", first: str | None = None) -> list[str]:
    """Fallback models: a list of model strings, tried in order (at most 8), none of them the
    model `first` (the run's own) or another of them."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError(f"{field} must be a list of model strings, not {type(value).__name__}")
    if len(value) > MAX_FALLBACKS:
        raise BadArgument(field, f"at most {MAX_FALLBACKS} models")
    listed = [model(v, field) for v in value]
    try:
        t.check_models(first, listed)
    except ValueError as err:
        raise BadArgument(field, str(err)) from None
    return listed


def settings_fit(models: list[str], settings: t.ModelSettings | None) -> None:
    """The run's model settings against each model it names (its model, its fallbacks): a setting
    the model's provider lacks on every API it speaks is refused here, before the run starts,
    where the worker would fail the run at its start (activities/providers.py holds the rule)."""
    if settings is None or not models:
        return
    from durable_agent_runner.activities.providers import sure_problems  # its wires: only for this check

    problems = [line for m in models for line in sure_problems(m, settings)]
    if problems:
        raise BadArgument("model_settings", "; ".join(problems))


def run_id(value: object, field: str = "id", limit: int = MAX_RUN_ID) -> str:
    """A run id: 1-255 printable characters (one that exists: up to 1000, as Temporal allows)."""
    return name(value, field, limit)


# Every run the client starts takes an id no run has held, running or ended: under an ended run's
# id it would shadow that run in `status`, `export`, `diff` and the Web UI's link (a fork given its
# origin's id became "a fork of itself"). IdTaken (updates.start_new) says so.
NEW_ID = WorkflowIDReusePolicy.REJECT_DUPLICATE


def new_run_id(value: object, field: str = "id") -> str:
    """The id of a run about to start: a run id with no space at either end, which a person
    could not tell apart from the id without it (nor pass unquoted to the CLI)."""
    text = run_id(value, field)
    if text != text.strip():
        raise BadArgument(field, "must not begin or end with a space")
    return text


def task_queue(value: object, field: str = "task_queue") -> str:
    """The workers' task queue a run starts on: the rule AGENT_TASK_QUEUE meets (config/env.py)."""
    text = string(value, field)
    try:
        queue_name(text)
    except ValueError as err:
        raise BadArgument(field, f"must be {err}") from None
    return text


def call_id(value: object) -> str:
    return name(value, "call_id")


def agent(value: object) -> str:
    """An agent's name (an `Agent` is given by its name: the caller takes `.name`)."""
    return name(value, "agent")


def by(value: object) -> str:
    """Who decides or talks: a name of 1-200 characters, not blank (a record says who)."""
    text = string(value, "by")
    if not text.strip():  # "approved by " named no one: leave it out for the login name
        raise BadArgument("by", "is empty: name who it is, or leave it out (your login name)")
    if len(text) > MAX_NAME:
        raise BadArgument("by", f"must be at most {MAX_NAME} characters")
    return text


def by_or_default(value: object) -> str:
    """Who decides or talks; not given (None): the login name, as the CLI's `--by`."""
    return login_name("python") if value is None else by(value)


def prompt(value: object, field: str = "input") -> str:
    """A prompt or a message: text that is not blank, at most 10 MiB of characters."""
    text = string(value, field)
    if not text.strip():
        raise BadArgument(field, "is empty: give the agent a prompt")
    if len(text) > MAX_PROMPT_CHARS:
        raise BadArgument(field, f"is longer than {MAX_PROMPT_CHARS:,} characters: give large inputs to a tool")
    return text


def reason(value: object, field: str = "reason") -> str:
    """A reason the model is told (a rejection, a failed call in doubt): never empty."""
    text = string(value, field)
    if not text.strip():
        raise BadArgument(field, "is empty: the model is told it, so say why")
    return text


def whole(value: object, field: str, low: int = 1, high: int = MAX_TURNS) -> int:
    """A whole number in [low, high] (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise BadArgument(field, f"must be between {low} and {high:,}")
    return value


def max_turns(value: object) -> int | None:
    return None if value is None else whole(value, "max_turns")


def seconds(value: object, field: str = "wait", *, zero: bool = False) -> float:
    """A bounded wait: a finite number of seconds in (0, 3600] ([0, 3600] with `zero`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field} must be a number of seconds, not {type(value).__name__}")
    number = float(value)
    low_ok = number >= 0 if zero else number > 0
    if not (math.isfinite(number) and low_ok and number <= MAX_WAIT):
        interval = "[0, 3600]" if zero else "(0, 3600]"
        raise BadArgument(field, f"must be a number of seconds in {interval}, not {value!r}")
    return number


def flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be a bool, not {type(value).__name__}")
    return value


def json_object(text: str, field: str, what: str = "a JSON object") -> dict[str, Any]:
    """`text` as a JSON object (bounded by machine/bounds.py, at most 32 levels deep), or
    BadArgument naming `field`."""
    try:
        value = parse_json(string(text, field), max_depth=MAX_JSON_DEPTH)
    except OutsideDataError as err:
        raise BadArgument(field, _refused_json(err), " ") from None
    if not isinstance(value, dict):
        raise BadArgument(field, f"must be {what}", " ")
    if (key := repeated_key(text)) is not None:  # JSON keeps the last silently; a person meant one
        raise BadArgument(field, f"gives {key!r} twice: give each key once", " ")
    return value


def _refused_json(err: OutsideDataError) -> str:
    """Why JSON text is refused, after its field's name: `is longer than …` for a size bound,
    `is not valid JSON: NaN is not JSON` for the rest (which read as sentences of their own)."""
    sized = err.bound in ("MAX_CHARS", "MAX_DEPTH", "MAX_ITEMS") or str(err).startswith("a number longer")
    return f"is {err}" if sized else f"is not valid JSON: {err}"


def json_text(text: object, field: str = "result") -> str:
    """JSON text a person gives as a tool's result: valid, and within the bounds."""
    raw = string(text, field)
    try:
        parse_json(raw)
    except OutsideDataError as err:
        raise BadArgument(field, _refused_json(err), " ") from None
    return raw


def arguments(value: object, field: str = "args") -> dict[str, Any] | None:
    """Edited tool arguments: a dict (or None: the model's own), within the bounds a model's are."""
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"{field} must be a dict of the tool's arguments, not {type(value).__name__}")
    if value is not None:
        try:
            check_value(value)
        except OutsideDataError as err:  # named as the caller gave it, not as the contract calls it
            raise BadArgument(field, str(err)) from None
    return value


def first_error(err: ValidationError) -> tuple[str, str]:
    """A pydantic error as (the field it is about, its message), for one line."""
    first = err.errors(include_url=False)[0]
    return ".".join(str(x) for x in first["loc"]), texts.said(first)


def body(model: type[M], **values: object) -> M:
    """What the client sends a run (a decision, a pause, an edit, an end), built from checked
    values: one past its contract's bounds (a 5,000-character reason) is a BadArgument naming its
    field, not pydantic's several lines."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        raise BadArgument(*first_error(err)) from None


def model_settings(value: object) -> t.ModelSettings | None:
    """Model settings: a ModelSettings or a mapping of its fields. An unknown field is refused (a
    typo would otherwise be dropped silently), and so is a bad value or an `extra_body` that
    overrides what the wire itself sends."""
    if value is None:
        return None
    if isinstance(value, t.ModelSettings):
        given = value.model_dump(exclude_unset=True)
    elif isinstance(value, Mapping):
        given = dict(value)
    else:
        raise TypeError(f"model_settings must be a ModelSettings or a dict, not {type(value).__name__}")
    unknown = sorted(str(k) for k in set(given) - set(t.ModelSettings.model_fields))
    if unknown:
        known = ", ".join(t.ModelSettings.model_fields)
        raise BadArgument("model_settings", f"unknown field {', '.join(unknown)} (known: {known})")
    try:
        settings = t.ModelSettings.model_validate(given)
    except ValidationError as err:
        field, message = first_error(err)
        raise BadArgument(field.split(".")[0], message) from None
    try:
        wire.check_sendable(settings)
    except wire.BadSettings as err:
        raise BadArgument(err.field, str(err).removeprefix(f"{err.field}: ")) from None
    return settings


def budget_cap(usd: object, tokens: object) -> t.Budget | None:
    """A cap a person puts on runs (each run of a schedule, all the cases of an eval): dollars above
    0 and tokens from 1, as an Agent's `cost_budget_usd` and `token_budget`, bounded and finite
    (None: no cap given). A cap of 0 would stop every run before its first model call."""
    if usd is None and tokens is None:
        return None
    for field, value in (("budget_usd", usd), ("budget_tokens", tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"{field} must be a number, not {type(value).__name__}")
    if isinstance(tokens, float):
        raise TypeError("budget_tokens must be an int, not float")
    if isinstance(tokens, int) and tokens < 1:
        raise BadArgument("budget_tokens", f"must be at least 1 (a cap of {tokens} stops every run at once)")
    if isinstance(usd, int | float) and usd <= 0:  # NaN is not: the budget's own bounds refuse it below
        raise BadArgument("budget_usd", f"must be more than 0 (a cap of {usd:g} stops every run at once)")
    try:
        return t.Budget.model_validate({"usd": usd, "tokens": tokens})
    except ValidationError as err:
        field, message = first_error(err)
        raise BadArgument(f"budget_{field}" if field else "budget", message) from None


def budget_raise(add_tokens: object = None, add_usd: object = None) -> t.BudgetRaise:
    """What a resume adds to a run's budget: bounded, positive, finite (NaN and inf refused)."""
    for field, value in (("add_tokens", add_tokens), ("add_usd", add_usd)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"{field} must be a number, not {type(value).__name__}")
    if isinstance(add_tokens, float):
        raise TypeError("add_tokens must be an int, not float")
    try:
        return t.BudgetRaise.model_validate({"add_tokens": add_tokens, "add_usd": add_usd})
    except ValidationError as err:
        field, message = first_error(err)
        raise BadArgument(field or "add_usd/add_tokens", message) from None


def answer_question(call: object, text: object, choice: object, who: str) -> t.AnswerQuestion:
    """A person's answer to an `ask_person` question: its `text`, or the 1-based `choice` (one of them).
    Whether the choice is one of the question's, or the text may be empty, the run says (its validator)."""
    if (text is None) == (choice is None):
        raise BadArgument("answer", "give the answer as text or as a choice number, one of them")
    given = string(text, "text") if text is not None else None
    number = whole(choice, "choice", 1, MAX_CHOICES) if choice is not None else None
    try:
        return t.AnswerQuestion(call_id=call_id(call), text=given, choice=number, by=who)
    except ValidationError as err:
        raise BadArgument(*first_error(err)) from None


def complete_call(call: object, result: object, fail: object, who: str) -> t.CompleteCall:
    """An outside completion of a waiting call: its `result` (any JSON value, a pydantic model too)
    or a `fail` reason the model is told, one of them. Whether the result is of the tool's result
    type, the run says (its validator)."""
    if (result is None) == (fail is None):
        raise BadArgument("result", "give a result or a fail reason, one of them")
    text = None
    if result is not None:
        try:
            text = pydantic_core.to_json(result, inf_nan_mode="constants").decode()
            parse_json(text)
        except pydantic_core.PydanticSerializationError as err:
            raise TypeError(f"result must be a JSON value: {err}") from None
        except OutsideDataError as err:
            raise BadArgument("result", f"is not JSON within the bounds: {err}") from None
    why = reason(fail, "fail") if fail is not None else None
    try:
        return t.CompleteCall(call_id=call_id(call), result=text, fail=why, by=who)
    except ValidationError as err:
        raise BadArgument(*first_error(err)) from None


def resolve_call(
    call: object, action: object, result: object, why: object, who: str, doubt: object = None
) -> t.ResolveCall:
    """A person's decision on a call in doubt: `rerun` it, give the `result` it returned (JSON text
    within the bounds) or `fail` it with a reason the model is told (`why`); `doubt`: the time the
    call is in doubt that the person saw (None: now)."""
    if action not in ("rerun", "result", "fail"):
        raise BadArgument("action", f"must be rerun, result or fail, not {action!r}")
    if action == "result":
        json_text(result, "result")
    if action == "fail":
        reason(why)
    seen = None if doubt is None else whole(doubt, "doubt", 1, 10**6)
    try:
        decision = t.ResolveCall.model_validate(
            {"call_id": call_id(call), "action": action, "result": result, "reason": why, "by": who}
        )
    except ValidationError as err:
        raise BadArgument(*first_error(err)) from None
    decision.doubt = seen
    return decision
