"""The CLI's arguments, checked as argparse takes them, so what needs no server is refused before
anything connects, in argparse's one line naming the flag (`argument --at-turn: must be from 1 to
1,000,000, not 0`). Each rule is the client's own (durable_agent_runner/client/checks.py), made an
argparse type by `checked`: ids, names, model strings, JSON flags (bounded by the one parser of
outside data, machine/bounds.py, at most MAX_DEPTH levels). `bounded` takes a number within its
bounds, `reason_of` a reason within its record's; numbers are read in ASCII digits
(config/values.in_digits, as the settings read theirs; the console refuses others too)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from durable_agent_runner.client import checks
from durable_agent_runner.client.checks import MAX_JSON_DEPTH as MAX_DEPTH
from durable_agent_runner.client.checks import json_object
from durable_agent_runner.config.values import in_digits

__all__ = [
    "MAX_DEPTH", "agent_name", "bounded", "by_flag", "call_arguments", "call_id", "checked", "in_digits", "integer",
    "json_object", "json_result", "model_string", "new_id", "number", "positive_int", "reason_of", "run_id",
]  # fmt: skip


def _utf8(text: str) -> str:
    """The shell passes raw bytes: ones that are not UTF-8 arrive as lone surrogates, said so."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("is not valid UTF-8 text") from None
    return text


def integer(text: str) -> int:
    """An int flag's value, in ASCII digits, as argparse's `type=int` says a bad one."""
    if not in_digits(text, int):
        raise argparse.ArgumentTypeError(f"invalid int value: {text[:40]!r}")
    return int(text)


def number(text: str) -> float:
    """A float flag's value, in ASCII digits, as argparse's `type=float` says a bad one."""
    if not in_digits(text, float):
        raise argparse.ArgumentTypeError(f"invalid float value: {text[:40]!r}")
    return float(text)


def checked(check: Callable[[str], Any], *, value: bool = False) -> Callable[[str], Any]:
    """An argparse type from one of the client's checks: its refusal becomes argparse's one line
    (`argument --agent: must be 1-200 printable characters`), before anything connects. The flag's
    value is the text given, or with `value` what the check made of it (a JSON object)."""

    def parse(text: str) -> Any:
        try:
            made = check(_utf8(text))
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(getattr(err, "reason", err))) from None
        return made if value else text

    return parse


# Each the client's own rule, said before connecting (a model string "anthropic:NAME", a new id, a
# name not blank, a positional id, approve's edited arguments, a result given as JSON).
agent_name = checked(checks.agent)
model_string = checked(checks.model, value=True)
new_id = checked(checks.new_run_id, value=True)  # --id of a run, session, fork or eval about to start
by_flag = checked(checks.by, value=True)  # --by: who decides or talks
run_id = checked(lambda text: checks.run_id(text, "run_id", checks.MAX_ANY_ID), value=True)  # RUN_ID, EVAL_ID
call_id = checked(checks.call_id, value=True)
call_arguments = checked(
    lambda text: checks.json_object(text, "args", "a JSON object of the tool's arguments"), value=True
)
json_result = checked(lambda text: checks.json_text(text, "result"), value=True)  # resolve/complete --result


def positive_int(text: str) -> int:
    """A count or a number of turns: a whole number of at least 1."""
    if not in_digits(text, int):
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]!r}")
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def bounded(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], Any]:
    """A number flag's argparse type, in ASCII digits and within [low, high] (a `low` just above 0:
    more than 0), so a value the client would refuse is refused before anything connects."""

    def parse(text: str) -> Any:
        if not in_digits(text, kind):
            raise argparse.ArgumentTypeError(f"not a {'whole ' if kind is int else ''}number: {text[:40]!r}")
        value = kind(text)
        if not low <= value <= high:
            span = f"more than 0 and at most {_said(high)}" if 0 < low < 1e-6 else f"from {_said(low)} to {_said(high)}"
            raise argparse.ArgumentTypeError(f"must be {span}, not {text[:40]}")
        return value

    return parse


def reason_of(contract: type[BaseModel], *, told: bool = False) -> Callable[[str], str]:
    """A `--reason` (or `--fail REASON`) as argparse's type, within the bound of the `reason` of
    the contract it is sent in (one source: PauseRequest's 1,000, ApprovalDecision's 4,000);
    `told`: the model is told it, so it is not blank (the client's check)."""
    limit = next(m.max_length for m in contract.model_fields["reason"].metadata if hasattr(m, "max_length"))

    def parse(text: str) -> str:
        if told and not _utf8(text).strip():
            raise argparse.ArgumentTypeError("is empty: the model is told it, so say why")
        if len(text) > limit:
            raise argparse.ArgumentTypeError(f"is longer than {limit:,} characters ({len(text):,})")
        return text

    return parse


def _said(bound: float) -> str:
    """A bound as a person reads it: 1,000,000, not 1e+06."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


# What a command's positional ids are, as `-h` says them (and a refusal names them: `run_id: …`).
RUN_ID = "the run's id, as `run` and `list` print it"
CALL_ID = "the tool call's id, as `status` and `list --waiting` show it (e.g. call_3_0)"
EVAL_ID = "the eval's id, as `eval run` and `eval list` print it"
SCHEDULE = "the schedule's name, as `schedule list` shows it"


def add_ids(p: argparse.ArgumentParser, *, call: str | None = None) -> None:
    """A command's `run_id` (and, with `call`, its `call_id`: which call, in the command's words)."""
    p.add_argument("run_id", type=run_id, help=RUN_ID)
    if call is not None:
        p.add_argument("call_id", type=call_id, help=f"{call}: {CALL_ID}")
