"""Arguments the client checks, as the CLI takes them. A JSON object from a command-line argument
(`run --model-settings`, `approve --args`, `edit --args`, chat's edited arguments): the client's
own check (durable_agent_runner/client/checks.py), bounded by the one parser of outside data
(machine/bounds.py) and nested at most MAX_DEPTH levels; a bad one is a ValueError whose text
names the flag. A model string (`--model`, `--fallback-model`) and a name (`--by`): argparse's type,
so a bad one is argparse's one line before anything connects. Numbers are read in ASCII digits:
Python's int() and float() also read other scripts' digits ('٣' is 3) and underscores ('1_0'), which
no person means in a flag (the console refuses them too)."""

from __future__ import annotations

import argparse
import re

from durable_agent_runner.client import checks
from durable_agent_runner.client.checks import MAX_JSON_DEPTH as MAX_DEPTH
from durable_agent_runner.client.checks import json_object

INTEGER = re.compile(r"[+-]?[0-9]+")
# NaN and infinity pass as words, for the bound of the flag to refuse by name
NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)", re.IGNORECASE)

__all__ = ["MAX_DEPTH", "by_flag", "in_digits", "integer", "json_object", "model_string", "number"]


def model_string(text: str) -> str:
    """A model string ("anthropic:NAME", …) as argparse's type: the client's check, in one line."""
    try:
        return checks.model(text)
    except checks.BadArgument as err:
        raise argparse.ArgumentTypeError(err.reason) from None


def by_flag(text: str) -> str:
    """`--by NAME` as argparse's type: who decides or talks, not blank (the client's check)."""
    try:
        return checks.by(text)
    except checks.BadArgument as err:
        raise argparse.ArgumentTypeError(err.reason) from None


def in_digits(text: str, kind: type[int] | type[float]) -> bool:
    """Whether `text` is a `kind` written in ASCII digits (a float's NaN and infinity as words)."""
    return (INTEGER if kind is int else NUMBER).fullmatch(text.strip()) is not None


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
