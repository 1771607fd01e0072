"""What the workflow feeds back to the turn machine (machine/turn.py) after carrying out a step:
one union, `Outcome`, and the `Facts` only Temporal knows (the time, history's size). Pure data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from durable_agent_runner.machine.rerun import Reran
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.workflows.types import AheadReply, HookResult, ModelReply, ToolMessage

# A session continues as new between messages once its history passes either bound, far below
# Temporal's own limits, so no execution of a days-long conversation grows large.
SESSION_HISTORY_BYTES = 1_000_000
SESSION_HISTORY_EVENTS = 2_000


@dataclass(frozen=True)
class Facts:
    """What only the workflow knows when it feeds an outcome back: the time and history's size."""

    now: datetime
    continue_suggested: bool = False
    history_bytes: int = 0
    history_events: int = 0
    # Whether the run takes a patched path (1.x only: `workflow.patched`, asked only where the
    # patched rule decides otherwise). Pure tests take every patch.
    patched: Callable[[str], bool] = field(default=lambda _id: True, compare=False)
    # Whether the run started on 2.0 code (workflows/versions.py): 2.0's own rules that a 1.x run
    # replays without. Pure tests are 2.0.
    release_2: bool = True

    def continues(self, session: bool) -> bool:
        """Whether what only Temporal knows has the run continue as new at its next chance: Temporal
        suggests it, or (a session's) history passed either bound."""
        over = self.history_bytes > SESSION_HISTORY_BYTES or self.history_events > SESSION_HISTORY_EVENTS
        return self.continue_suggested or (session and over)


@dataclass(frozen=True)
class Ready:
    """Begin (or go on to) the next model call."""


@dataclass(frozen=True)
class BreakpointRan:
    why: str | None  # a reason to pause (the function asked to, or its edit was refused)


@dataclass(frozen=True)
class Resumed:
    pass


@dataclass(frozen=True)
class Steered:
    pass


@dataclass(frozen=True)
class Compacted:
    pass


@dataclass(frozen=True)
class Replied:
    reply: ModelReply


@dataclass(frozen=True)
class ModelFailed:
    """The model call failed in a way that sends the turn to the agent's next model
    (workflows/fallback.falls_back said so): `error` is the failure's type, `message` its words."""

    error: str
    message: str


@dataclass(frozen=True)
class ToolsRan:
    results: dict[str, ToolMessage]  # by call id: the calls that ran (or were decided on)
    ahead: AheadReply | None = None  # the next model call, made by the lone call's activity (CallAhead)


@dataclass(frozen=True)
class HandedOff:
    pass


@dataclass(frozen=True)
class OutputChecked:
    check: HookResult


@dataclass(frozen=True)
class GuardrailsRan:
    stop: Stop | None


Outcome = (
    Ready
    | BreakpointRan
    | Resumed
    | Steered
    | Compacted
    | Replied
    | ModelFailed
    | ToolsRan
    | HandedOff
    | OutputChecked
    | GuardrailsRan
    | Reran
)
