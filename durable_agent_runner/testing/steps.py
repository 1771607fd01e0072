"""What an offline model answers in one turn: text, tool calls, a handoff, or typed output.

    reply("Refunded.")                     a final answer in text
    call("refund", order="42")             a tool call (a list of calls: parallel calls in one turn)
    hand_off("billing")                    a call to the transfer tool that hands off to that agent
    output(Verdict(passed=True))           a typed final answer: the value as JSON text

A script lists one of these per model turn; a `FunctionModel`'s function returns one (or a str,
which is `reply(str)`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter


@dataclass(frozen=True)
class Reply:
    """A final answer in text."""

    text: str

    def __post_init__(self) -> None:  # a script's slip is said where it is written, not as a run's failure
        if not isinstance(self.text, str):
            raise TypeError(f"reply takes the answer's text, not {type(self.text).__name__}: reply(str(...))")


@dataclass(frozen=True)
class Call:
    """A call to one of the agent's tools, with these arguments (sent as JSON)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: {})

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"call takes the tool's name first, not {self.name!r}")
        if not isinstance(self.arguments, Mapping):
            raise TypeError(f"call {self.name!r}: its arguments are a mapping, not {type(self.arguments).__name__}")
        try:
            self.arguments_json()
        except (TypeError, ValueError) as err:
            raise TypeError(f"call {self.name!r}: its arguments are not JSON: {err}") from None

    def arguments_json(self) -> str:
        return json.dumps(dict(self.arguments), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class HandOff:
    """A call to the transfer tool that hands the run to the agent named `agent`."""

    agent: str


@dataclass(frozen=True)
class Output:
    """A typed final answer: `value` (a pydantic model, or anything pydantic can dump) as JSON."""

    value: Any

    def __post_init__(self) -> None:
        try:
            self.json_text()
        except Exception as err:  # pydantic's own error for a value it cannot dump: said at once
            raise TypeError(f"output takes a value pydantic dumps as JSON: {type(err).__name__}: {err}") from None

    def json_text(self) -> str:
        if isinstance(self.value, BaseModel):
            return self.value.model_dump_json()
        dumped = TypeAdapter(type(self.value)).dump_python(self.value, mode="json")
        return json.dumps(dumped, ensure_ascii=False)


# One model turn's answer. A sequence of calls is several calls in the same turn.
Step = Reply | Call | HandOff | Output | Sequence[Call] | str


def reply(text: str) -> Reply:
    """A final answer in text."""
    return Reply(text)


def call(name: str, arguments: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Call:
    """A call to the tool `name`: `call("refund", order="42")` or `call("refund", {"order": "42"})`."""
    if arguments is not None and not isinstance(arguments, Mapping):
        raise TypeError(f"call {name!r}: its arguments are a mapping, not {type(arguments).__name__}")
    return Call(name, {**(arguments or {}), **kwargs})


def hand_off(agent: Any) -> HandOff:
    """A handoff to `agent` (its name, or the Agent): the model calls the transfer tool to it."""
    name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"hand_off takes an agent or its name, not {agent!r}")
    return HandOff(name)


def output(value: Any) -> Output:
    """A typed final answer, for an agent with `output_type`: `output(Verdict(passed=True))`."""
    return Output(value)
