"""One tool call's records, pure data: its stage, the steps the interpreter carries out for it,
what the interpreter feeds back, and the events watchers see (machine/call.py moves it on).

No Temporal, no I/O, no clocks, no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent_runner.machine.bounds import ParsedArguments
from durable_agent_runner.machine.calls import AttemptEnd, PlannedCall, Runs
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AnswerRecord,
    ApprovalRecord,
    CallResolution,
    CompletionRecord,
    EventKind,
    HookResult,
    InDoubtCall,
    ToolMessage,
)

# How long a call in doubt waits for a person when the agent sets no approval timeout; then the run fails.
DOUBT_LIMIT = timedelta(days=30)


class Stage(StrEnum):
    CHECKING = "checking"  # the agent's approval check runs (its arguments validated, its policy asked)
    ASKING = "asking"  # waits for a person to approve or reject it
    RUNNING = "running"  # the tool, or the agent behind it as a child run
    IN_DOUBT = "in_doubt"  # a once call's attempt ended without a result: waits for a person
    QUESTION = "question"  # an `ask_person` call: waits for a person's answer, which is its result
    OUTSIDE = "outside"  # its tool started the work: waits for an outside completion, which is its result
    DONE = "done"  # its message for the model is set


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Call(_Frozen, ParsedArguments):
    planned: PlannedCall
    turn: int
    stage: Stage
    arguments: str  # as the model asked for them, or as a person edited them
    asked: dict[str, object] | None = None  # the validated arguments shown to a person
    approval: ApprovalRecord | None = None
    doubt: InDoubtCall | None = None  # the open doubt (IN_DOUBT), or the last one
    reruns: int = 0  # attempts a person asked for after a doubt
    doubted: int = 0  # times in doubt before this life (a --live-tools fork carries its origin's)
    scheduled_at: datetime | None = None  # when the run last asked for an attempt
    message: ToolMessage | None = None  # DONE: what the model reads
    question: str = ""  # QUESTION: what the model asked a person, and the choices it gave (None: free text)
    choices: tuple[str, ...] | None = None
    started: str = ""  # OUTSIDE: what the tool's start returned
    completion: CompletionRecord | None = None  # how its outside wait ended (the run's own on a timeout)

    @property
    def call_id(self) -> str:
        return self.planned.call.call_id

    @property
    def tool(self) -> str:
        return self.planned.call.name

    def waits_for(self) -> str:
        """What the run waits for on this call, in words for `status`."""
        what = f"{self.tool} ({self.call_id})"
        return {
            Stage.CHECKING: f"checking whether {what} needs approval",
            Stage.ASKING: f"waiting for a person to approve {what}",
            Stage.RUNNING: f"running {what}",
            Stage.IN_DOUBT: f"in doubt, waiting for a person to resolve {what}",
            Stage.QUESTION: f"waiting for an answer to: {self.question[:200]}",
            Stage.OUTSIDE: f"waiting for outside completion of {what}",
            Stage.DONE: f"{what} done",
        }[self.stage]


# ------------------------------------------------------------------------------------- steps


class CheckApproval(_Frozen, ParsedArguments):
    """Run the agent's approval check (the `approval` hook) on the call's arguments."""

    kind: Literal["check_approval"] = "check_approval"
    call_id: str
    tool: str
    arguments: str


class AskPerson(_Frozen):
    """Wait for a person: to approve the call, to resolve it in doubt, or to answer its question.
    `timeout`: then `TimedOut`."""

    kind: Literal["ask_person"] = "ask_person"
    call_id: str
    about: Literal["approval", "doubt", "question"]
    timeout: timedelta | None


class AwaitOutside(_Frozen):
    """Wait for an outside system to complete the call (`complete_call`); `timeout`: then `TimedOut`."""

    kind: Literal["await_outside"] = "await_outside"
    call_id: str
    timeout: timedelta


class RunTool(_Frozen, ParsedArguments):
    """Run the tool once more (its retries are Temporal's: `attempts`); `how` is the tool's own setting."""

    kind: Literal["run_tool"] = "run_tool"
    call_id: str
    tool: str
    arguments: str
    how: Runs
    attempts: int
    activity_id: str
    idempotency_key: str


class StartChild(_Frozen, ParsedArguments):
    """Run the agent behind the tool as a child run; its answer is the call's result."""

    kind: Literal["start_child"] = "start_child"
    call_id: str
    target: str
    arguments: str


class FailRun(_Frozen):
    """The run fails: nobody decided within the agent's bound."""

    kind: Literal["fail_run"] = "fail_run"
    error: Literal["ApprovalTimedOut", "CallInDoubt"]
    message: str


Step = Annotated[CheckApproval | AskPerson | AwaitOutside | RunTool | StartChild | FailRun, Field(discriminator="kind")]


# ---------------------------------------------------------------------------------- happened


class Checked(_Frozen):
    kind: Literal["checked"] = "checked"
    call_id: str
    result: HookResult


class Decided(_Frozen):
    """A person's decision, checked and recorded at the door (the update's validator and handler)."""

    kind: Literal["decided"] = "decided"
    record: ApprovalRecord


class Ran(_Frozen):
    """The tool (or child run) gave its result: the tool's error too, which the model reads."""

    kind: Literal["ran"] = "ran"
    call_id: str
    content: str
    is_error: bool = False


class Lost(_Frozen):
    """The tool's activity ended without a result, its retries spent: `end` says how."""

    kind: Literal["lost"] = "lost"
    call_id: str
    end: AttemptEnd
    why: str
    ended: str  # in words: "heartbeat timeout", "its worker shut down before it finished"
    started_at: datetime | None = None


class Resolved(_Frozen):
    """A person's resolution of the call in doubt, checked and recorded at the door."""

    kind: Literal["resolved"] = "resolved"
    record: CallResolution


class Answered(_Frozen):
    """A person's answer to the call's question, checked and recorded at the door."""

    kind: Literal["answered"] = "answered"
    record: AnswerRecord


class Completed(_Frozen):
    """An outside system's completion of the call, checked and recorded at the door."""

    kind: Literal["completed"] = "completed"
    record: CompletionRecord


class TimedOut(_Frozen):
    """An `AskPerson` or `AwaitOutside` wait ran out."""

    kind: Literal["timed_out"] = "timed_out"
    call_id: str


Happened = Annotated[
    Checked | Decided | Ran | Lost | Resolved | Answered | Completed | TimedOut, Field(discriminator="kind")
]


class Note(_Frozen):
    """An event for watchers; the run numbers it."""

    kind: EventKind
    call_id: str
    tool: str
    text: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Ctx:
    """What a transition needs besides the call: the agent in charge, the time, the run's id
    (idempotency keys), the tools a person approved for the rest of the run, and the run a
    --live-tools fork was taken from (its once calls go to a person before they run again)."""

    agent: AgentSpec
    now: datetime
    run_id: str
    always: Mapping[str, ApprovalRecord] = field(default_factory=dict)
    forked_from: str | None = None
    # Whether the run takes a patched path (1.x only: `workflow.patched`, asked where the 1.x code
    # asked it, so its marker lands where recorded histories have it). 2.0 has no patches.
    patched: Callable[[str], bool] = field(default=lambda _id: True)


@dataclass(frozen=True)
class Transition:
    call: Call
    steps: tuple[Step, ...] = ()
    notes: tuple[Note, ...] = ()


class Unexpected(RuntimeError):
    """What happened does not fit the call's stage: a bug in the interpreter, never outside data
    (decisions are checked at the door by `refusal`)."""
