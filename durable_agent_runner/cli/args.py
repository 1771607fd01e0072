"""Arguments the client checks, as the CLI takes them. A JSON object from a command-line argument
(`run --model-settings`, `approve --args`, `edit --args`, chat's edited arguments): the client's
own check (durable_agent_runner/client/checks.py), bounded by the one parser of outside data
(machine/bounds.py) and nested at most MAX_DEPTH levels; a bad one is a ValueError whose text
names the flag. A model string (`--model`, `--fallback-model`) and a name (`--by`): argparse's type,
so a bad one is argparse's one line before anything connects."""

from __future__ import annotations

import argparse

from durable_agent_runner.client import checks
from durable_agent_runner.client.checks import MAX_JSON_DEPTH as MAX_DEPTH
from durable_agent_runner.client.checks import json_object

__all__ = ["MAX_DEPTH", "by_flag", "json_object", "model_string"]


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
