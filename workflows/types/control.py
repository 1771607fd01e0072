"""What a person does to a run: breakpoints, pauses, edits, forks, and what `inspect` shows.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from durable_agent_runner.machine import bounds
from durable_agent_runner.workflows.types.agents import AgentSpec
from durable_agent_runner.workflows.types.budget import BudgetRaise
from durable_agent_runner.workflows.types.transcript import Contract, Message

# ------------------------------------------------------------------------- workflow contracts


class HandoffRecord(Contract):
    """One transfer of the run from one agent to another."""

    from_agent: str
    to_agent: str
    turn: int
    at: datetime
    call_id: str


class ModelSwitch(Contract):
    """One durable fallback: agent `agent`'s model call of turn `turn` failed for good on
    `from_model` (`why`), and the turn went to `to_model` (machine/fallback.py)."""

    agent: str
    turn: int
    from_model: str
    to_model: str
    why: str
    at: datetime


MAX_MESSAGE_CHARS = 200_000  # a session message or edited text; larger inputs belong in a tool's input


class Breakpoints(Contract):
    """Where a run pauses by itself: before model call N (the run's turn numbers), before every
    model call, before any tool call or before calls of the named tools."""

    at_turns: list[int] = Field(default_factory=list, max_length=1000)
    every_turn: bool = False
    before_tools: bool = False
    tools: list[str] = Field(default_factory=list, max_length=100)


class PauseRequest(Contract):
    """`client.py pause`: the run pauses at its next safe point (before a model or tool call)."""

    by: str = Field(default="someone", max_length=200)
    reason: str = Field(default="", max_length=1000)


PauseWhere = Literal["before_model", "before_tools"]


class PauseInfo(Contract):
    where: PauseWhere
    turn: int  # before model call `turn`, or before the tools model call `turn` asked for
    why: str  # "breakpoint at turn 3", "pause by alice: …", "breakpoint function: …"
    at: datetime
    reason: Literal["", "budget"] = ""  # "budget": spent (on_budget="pause"); resume raises it


class ResumeRequest(BudgetRaise):
    by: str = Field(default="someone", max_length=200)


EditOp = Literal["text", "drop", "insert", "args", "drop_call", "agent"]


def _bounded(arguments: dict[str, Any]) -> dict[str, Any]:
    """A person's arguments meet the bounds a model's do (workflows.bounds)."""
    try:
        bounds.check_value(arguments)
    except bounds.OutsideDataError as err:
        raise ValueError(f"arguments refused: {err}") from None
    return arguments


# Arguments from a person (an edit, an edited approval): refused at decoding, before any handler.
BoundedArguments = Annotated[dict[str, Any], AfterValidator(_bounded)]


class Edit(Contract):
    """One change to a paused run's state. `index` is an item's stable index in `inspect`.
    text: {"op": "text", "index": 3, "text": "…"}       drop: {"op": "drop", "index": 3}
    insert: {"op": "insert", "index": 3, "role": "user", "text": "…"}
    args: {"op": "args", "call_id": "call_1", "arguments": {…}}   drop_call: {"op": "drop_call", "call_id": "call_1"}
    agent: {"op": "agent", "agent": "billing"}"""

    op: EditOp
    index: int | None = Field(default=None, ge=0)
    text: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS)
    role: Literal["user", "assistant"] | None = None
    call_id: str | None = Field(default=None, max_length=200)
    arguments: BoundedArguments | None = None
    agent: str | None = Field(default=None, max_length=200)
    by: str = Field(default="someone", max_length=200)


class EditRecord(Contract):
    """An edit as applied: who, when, what (in words), at which pause."""

    edit: Edit
    at: datetime
    turn: int
    summary: str


class EditReceipt(Contract):
    summary: str
    items: int  # transcript items after the edit


class ForkLink(Contract):
    run_id: str
    turn: int  # the new run started just before this model call of `run_id`
    live_tools: bool = False  # it ran the calls of the turns before that again (`fork --live-tools`)


class Item(Contract):
    """A transcript item with its stable index (what edits refer to)."""

    index: int
    message: Message


class PendingCall(Contract):
    call_id: str
    tool: str
    arguments: Any  # the arguments as an object (the raw text when it is not JSON)
    dropped_by: str | None = None


class Inspection(Contract):
    run_id: str
    agent: str | None  # the agent in charge
    agents: list[str] = Field(default_factory=list)  # every agent this run froze (for edits of the agent)
    turn: int
    phase: str
    paused: PauseInfo | None = None
    items: list[Item] = Field(default_factory=list)
    pending_calls: list[PendingCall] = Field(default_factory=list)
    edits: list[EditRecord] = Field(default_factory=list)
    breakpoints: Breakpoints | None = None


class ForkQuery(Contract):
    turn: int = Field(ge=1)


class ForkPoint(Contract):
    """A run's state just before model call `turn`: what `client.py fork` starts a new run from."""

    agent: AgentSpec  # the run's first agent, with its frozen team
    current: str | None = None
    messages: list[Message]
    turn: int  # model calls made before the fork point (turn - 1)
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    answer_base: int = 0  # of a session: the model calls before the answer the fork continues


class TranscriptQuery(Contract):
    start: int = 0


class Transcript(Contract):
    agent: AgentSpec | None = None
    messages: list[Message] = Field(default_factory=list)
