"""A run's events: what watchers, lifecycle hooks, the console and `export` read of its story.

`EventKind` names each kind once; `KnownRunEvent` is one discriminated union on `kind`, one class a
kind, each a `RunEvent` (its shared fields, as watchers have always read them), so a reader that
matches a class gets the fields that kind always carries: a call's events their `call_id` and
`tool`, a reply's its `usage`. The run records events of `KnownRunEvent` alone. What a reader gets
is `AnyRunEvent`: those, or a `NewerEvent` for a kind newer than the reader's release (a worker
deployed after it), which it shows by its kind and words instead of failing, as a contract's
unknown fields are ignored. Both dump to the JSON the single model did, so a watcher of any
release reads the events of any other.

Events live in the workflow's memory (rebuilt on replay, never carried across continue-as-new), so
the union changes no history. Pure data, safe inside the workflow sandbox."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Discriminator, Field, Tag, TypeAdapter, field_validator, model_validator

from durable_agent_runner.workflows.types.transcript import Contract, Usage

__all__ = [
    "END_KINDS",
    "RUN_END_KINDS",
    "RUN_EVENT",
    "SESSION_END_KINDS",
    "STOP_KINDS",
    "AnsweredEvent",
    "AnyRunEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "BudgetRaisedEvent",
    "CallEvent",
    "CallInDoubtEvent",
    "CallResolvedEvent",
    "CancelledEvent",
    "CompactedEvent",
    "EditedEvent",
    "EndedEvent",
    "EventKind",
    "EventsPage",
    "EventsQuery",
    "FailedEvent",
    "FinalEvent",
    "GuardrailEvent",
    "HandoffEvent",
    "KnownRunEvent",
    "MessageEvent",
    "ModelDroppedEvent",
    "ModelFallbackEvent",
    "ModelFinishedEvent",
    "ModelStartedEvent",
    "NewerEvent",
    "NotifiedEvent",
    "NotifyFailedEvent",
    "OutputRefusedEvent",
    "OutsideCompletedEvent",
    "OutsideWaitingEvent",
    "PausedEvent",
    "QuestionAnsweredEvent",
    "QuestionAskedEvent",
    "ReplyEvent",
    "ResumedEvent",
    "RunEvent",
    "ToolFinishedEvent",
    "ToolStartedEvent",
    "WaitingEvent",
]


class EventKind(StrEnum):
    """What one RunEvent tells. Each value is a contract (watch streams, query results, hooks): a
    StrEnum, so it is its string on the wire and old watchers still read it."""

    MODEL_STARTED = "model_started"  # detail: model name
    MODEL_FINISHED = "model_finished"  # text: the reply's text; detail: the tool calls asked for
    MODEL_DROPPED = "model_dropped"  # detail: why a reply made ahead by a tool's activity went unused (tokens count)
    TOOL_STARTED = "tool_started"  # detail: get_weather(city=Tokyo)
    TOOL_FINISHED = "tool_finished"  # text: an excerpt of the result
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"  # detail: approved by alice / rejected by bob: reason
    FINAL = "final"  # text: the final answer
    FAILED = "failed"  # text: why
    CANCELLED = "cancelled"  # text: what was in flight
    HANDOFF = "handoff"  # detail: from → to
    GUARDRAIL = "guardrail"  # detail: which guardrail, and whether its tripwire fired
    OUTPUT_REFUSED = "output_refused"  # text: why the final output was refused, as told to the model
    MESSAGE = "message"  # sessions: text: the message; detail: "message K from BY" (+ " · steers the answer")
    ANSWERED = "answered"  # sessions: text: the answer to message K (detail: "message K"); follows "final"
    COMPACTED = "compacted"  # sessions: detail: what was summarized or dropped
    WAITING = "waiting"  # sessions: answered everything; waiting for the next message
    ENDED = "ended"  # sessions: text: why the session ended
    PAUSED = "paused"  # detail: where and why (before model call 3: breakpoint; by alice)
    EDITED = "edited"  # detail: what an edit changed, and who made it
    RESUMED = "resumed"  # detail: who resumed the run
    BUDGET_RAISED = "budget_raised"  # detail: what a person added to a budget (resume --add-usd / --add-tokens)
    CALL_IN_DOUBT = "call_in_doubt"  # detail: the call, and how its attempt ended without a result
    CALL_RESOLVED = "call_resolved"  # detail: rerun / result given / failed, by whom
    MODEL_FALLBACK = "model_fallback"  # 1.4: which model failed, why, and which one the turn goes to
    NOTIFIED = "notified"  # 1.4: detail: the channels a wait for a person was sent to (an escalation says so)
    NOTIFY_FAILED = "notify_failed"  # 1.4: detail: a channel that could not be reached within its retries, and why
    QUESTION_ASKED = "question_asked"  # 1.4: text: an `ask_person` question; detail: its choices
    QUESTION_ANSWERED = "question_answered"  # 1.4: text: the answer; detail: by whom (or the timeout's default)
    OUTSIDE_WAITING = "outside_waiting"  # 1.4: text: what the tool's start returned; detail: until when
    OUTSIDE_COMPLETED = "outside_completed"  # 1.4: text: the result or failure; detail: by whom (or the timeout)


# The kinds after which a story is over, defined once (next to the kinds):
# a plain run's: after one of these, it calls no model and records nothing more;
RUN_END_KINDS: frozenset[EventKind] = frozenset({EventKind.FINAL, EventKind.FAILED, EventKind.CANCELLED})
# a session's: its answers ("final", then "answered") don't end it;
SESSION_END_KINDS: frozenset[EventKind] = frozenset({EventKind.ENDED, EventKind.FAILED, EventKind.CANCELLED})
# either: a run or a session has ended;
END_KINDS: frozenset[EventKind] = RUN_END_KINDS | SESSION_END_KINDS
# those in both: the run stopped without its answer.
STOP_KINDS: frozenset[EventKind] = RUN_END_KINDS & SESSION_END_KINDS


class RunEvent(Contract):
    """One step of a run, for watchers: the fields every kind shares. Kept in workflow state (so
    rebuilt from history); `seq` keeps counting across continue-as-new, so a watcher resumes
    without gaps. Each kind is a subclass below (`KnownRunEvent`), which may require more."""

    seq: int
    at: datetime
    kind: EventKind
    turn: int
    text: str = ""
    detail: str = ""
    call_id: str | None = None
    tool: str | None = None
    usage: Usage | None = None

    @model_validator(mode="after")
    def _of_its_kind(self) -> Self:
        """Every event is its kind's class: a bare RunEvent (or a group's base) is refused."""
        if type(self) in _BASES:
            raise ValueError(f"a {self.kind} event is built as its kind's class: RUN_EVENT.validate_python(...)")
        return self


class CallEvent(RunEvent):
    """An event of one tool call's life: always names the call and its tool."""

    call_id: str
    tool: str


class ReplyEvent(RunEvent):
    """A model reply, used or dropped: its tokens always count."""

    usage: Usage


_BASES: tuple[type[RunEvent], ...] = (RunEvent, CallEvent, ReplyEvent)

# --------------------------------------------------------------------------- one class a kind


class ModelStartedEvent(RunEvent):
    kind: Literal[EventKind.MODEL_STARTED] = EventKind.MODEL_STARTED


class ModelFinishedEvent(ReplyEvent):
    kind: Literal[EventKind.MODEL_FINISHED] = EventKind.MODEL_FINISHED


class ModelDroppedEvent(ReplyEvent):
    kind: Literal[EventKind.MODEL_DROPPED] = EventKind.MODEL_DROPPED


class ModelFallbackEvent(RunEvent):
    kind: Literal[EventKind.MODEL_FALLBACK] = EventKind.MODEL_FALLBACK


class ToolStartedEvent(CallEvent):
    kind: Literal[EventKind.TOOL_STARTED] = EventKind.TOOL_STARTED


class ToolFinishedEvent(CallEvent):
    kind: Literal[EventKind.TOOL_FINISHED] = EventKind.TOOL_FINISHED


class ApprovalRequestedEvent(CallEvent):
    kind: Literal[EventKind.APPROVAL_REQUESTED] = EventKind.APPROVAL_REQUESTED


class ApprovalDecidedEvent(CallEvent):
    kind: Literal[EventKind.APPROVAL_DECIDED] = EventKind.APPROVAL_DECIDED


class CallInDoubtEvent(CallEvent):
    kind: Literal[EventKind.CALL_IN_DOUBT] = EventKind.CALL_IN_DOUBT


class CallResolvedEvent(CallEvent):
    kind: Literal[EventKind.CALL_RESOLVED] = EventKind.CALL_RESOLVED


class QuestionAskedEvent(CallEvent):
    kind: Literal[EventKind.QUESTION_ASKED] = EventKind.QUESTION_ASKED


class QuestionAnsweredEvent(CallEvent):
    kind: Literal[EventKind.QUESTION_ANSWERED] = EventKind.QUESTION_ANSWERED


class OutsideWaitingEvent(CallEvent):
    kind: Literal[EventKind.OUTSIDE_WAITING] = EventKind.OUTSIDE_WAITING


class OutsideCompletedEvent(CallEvent):
    kind: Literal[EventKind.OUTSIDE_COMPLETED] = EventKind.OUTSIDE_COMPLETED


class HandoffEvent(RunEvent):
    """Names the call that handed off (its tool is the handoff's own)."""

    kind: Literal[EventKind.HANDOFF] = EventKind.HANDOFF
    call_id: str


class GuardrailEvent(RunEvent):
    kind: Literal[EventKind.GUARDRAIL] = EventKind.GUARDRAIL


class OutputRefusedEvent(RunEvent):
    kind: Literal[EventKind.OUTPUT_REFUSED] = EventKind.OUTPUT_REFUSED


class FinalEvent(RunEvent):
    kind: Literal[EventKind.FINAL] = EventKind.FINAL


class FailedEvent(RunEvent):
    kind: Literal[EventKind.FAILED] = EventKind.FAILED


class CancelledEvent(RunEvent):
    kind: Literal[EventKind.CANCELLED] = EventKind.CANCELLED


class MessageEvent(RunEvent):
    kind: Literal[EventKind.MESSAGE] = EventKind.MESSAGE


class AnsweredEvent(RunEvent):
    kind: Literal[EventKind.ANSWERED] = EventKind.ANSWERED


class CompactedEvent(RunEvent):
    kind: Literal[EventKind.COMPACTED] = EventKind.COMPACTED


class WaitingEvent(RunEvent):
    kind: Literal[EventKind.WAITING] = EventKind.WAITING


class EndedEvent(RunEvent):
    kind: Literal[EventKind.ENDED] = EventKind.ENDED


class PausedEvent(RunEvent):
    kind: Literal[EventKind.PAUSED] = EventKind.PAUSED


class EditedEvent(RunEvent):
    kind: Literal[EventKind.EDITED] = EventKind.EDITED


class ResumedEvent(RunEvent):
    kind: Literal[EventKind.RESUMED] = EventKind.RESUMED


class BudgetRaisedEvent(RunEvent):
    kind: Literal[EventKind.BUDGET_RAISED] = EventKind.BUDGET_RAISED


class NotifiedEvent(RunEvent):
    """`call_id` and `tool`: the call whose wait was told of (none for a budget's pause)."""

    kind: Literal[EventKind.NOTIFIED] = EventKind.NOTIFIED


class NotifyFailedEvent(RunEvent):
    kind: Literal[EventKind.NOTIFY_FAILED] = EventKind.NOTIFY_FAILED


KnownRunEvent = Annotated[
    ModelStartedEvent
    | ModelFinishedEvent
    | ModelDroppedEvent
    | ModelFallbackEvent
    | ToolStartedEvent
    | ToolFinishedEvent
    | ApprovalRequestedEvent
    | ApprovalDecidedEvent
    | CallInDoubtEvent
    | CallResolvedEvent
    | QuestionAskedEvent
    | QuestionAnsweredEvent
    | OutsideWaitingEvent
    | OutsideCompletedEvent
    | HandoffEvent
    | GuardrailEvent
    | OutputRefusedEvent
    | FinalEvent
    | FailedEvent
    | CancelledEvent
    | MessageEvent
    | AnsweredEvent
    | CompactedEvent
    | WaitingEvent
    | EndedEvent
    | PausedEvent
    | EditedEvent
    | ResumedEvent
    | BudgetRaisedEvent
    | NotifiedEvent
    | NotifyFailedEvent,
    Field(discriminator="kind"),
]
"""One of the run's events, as its kind's class (pydantic picks it by `kind`): what a run records."""

RUN_EVENT: TypeAdapter[KnownRunEvent] = TypeAdapter(KnownRunEvent)
"""Builds an event of its kind's class from its fields: `RUN_EVENT.validate_python({...})`. A kind
this release does not know is refused here: the run records only the kinds it defines."""


MAX_KIND_CHARS = 100  # of a newer kind's name, as a reader keeps it


class NewerEvent(RunEvent):
    """An event of a kind this release does not know, read from a newer worker: its `kind` is the
    plain string it came with. Watchers show it by its kind and words; a run never records one."""

    kind: str  # type: ignore[assignment]  # wider than EventKind: the one class that may hold any kind

    @field_validator("kind", mode="before")
    @classmethod
    def _a_short_name(cls, value: object) -> object:
        """A kind is a short name; from outside it may be anything: what a watcher prints is cut."""
        return value[:MAX_KIND_CHARS] if isinstance(value, str) else value


def _known_or_newer(value: object) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "known" if kind in _KNOWN_KINDS else "newer"


_KNOWN_KINDS = frozenset(k.value for k in EventKind)

AnyRunEvent = Annotated[
    Annotated[KnownRunEvent, Tag("known")] | Annotated[NewerEvent, Tag("newer")],
    Discriminator(_known_or_newer),
]
"""Any event a reader may meet: a known kind as its class (a known kind short of what it always
carries is refused, not taken as newer), or a `NewerEvent`."""


class EventsQuery(Contract):
    since: int = 0
    limit: int = 500


class EventsPage(Contract):
    events: list[AnyRunEvent]
    next: int  # the `since` to ask for next
    first: int  # the oldest seq this execution holds; older ones are in `previous_run_id`
    previous_run_id: str | None = None
    done: bool = False  # the run has ended: no events will follow
