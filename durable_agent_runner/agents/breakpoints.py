"""A programmatic breakpoint: a function an agent declares (`Agent(breakpoint=fn)`) that sees the
run's state before each model call and may let it go on, edit it, or pause it.

    def watch_costs(state: BreakpointState) -> BreakpointVerdict:
        if state.turn > 5 and "refund" in state.messages[-1].content:
            return Pause("a refund after turn 5: a person should look")
        if state.turn == 3:
            return Edit(op="insert", index=len(state.messages), role="user", text="Be brief.")
        return None

It runs on a worker, in the hook activity (kind "breakpoint"), with a summary the Web UI shows;
the run applies its edits through the same validated path as a person's (`client.py edit`), and
an edit it refuses pauses the run with the reason, so a person can look.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Union

from durable_agent_runner.workflows.types import Edit, HookResult, Message


@dataclass(frozen=True)
class Pause:
    reason: str = ""


@dataclass(frozen=True)
class BreakpointState:
    run_id: str
    agent: str  # the agent in charge
    turn: int  # the model call about to be made
    messages: list[Message]  # the transcript; item i is what `client.py inspect` shows as [i]


BreakpointVerdict = Union[None, Pause, Edit, list[Edit]]  # noqa: UP007 (a runtime alias)
BreakpointFn = Callable[[BreakpointState], BreakpointVerdict | Awaitable[BreakpointVerdict]]


def verdict(value: object) -> HookResult:
    """What the function returned, as the hook's result; TypeError names what is wrong."""
    if value is None:
        return HookResult()
    if isinstance(value, Pause):
        return HookResult(pause=value.reason or "pause")
    if isinstance(value, Edit):
        return HookResult(edits=[value])
    if isinstance(value, list) and all(isinstance(e, Edit) for e in value):
        return HookResult(edits=list(value))
    raise TypeError(f"returned {type(value).__name__}: a breakpoint returns None, Pause(…), an Edit or a list of Edits")
