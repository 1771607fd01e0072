"""The run's input and result, its carry across continue-as-new, its events and status.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from durable_agent_runner.machine import bounds
from durable_agent_runner.workflows.types.agents import AgentSpec, MidTurn, ModelSettings, SessionState
from durable_agent_runner.workflows.types.budget import Budget, BudgetStatus
from durable_agent_runner.workflows.types.control import (
    BoundedArguments,
    Breakpoints,
    EditRecord,
    ForkLink,
    ForkPoint,
    HandoffRecord,
    ModelSwitch,
    PauseInfo,
)
from durable_agent_runner.workflows.types.names import DEFAULT_AGENT
from durable_agent_runner.workflows.types.outside import CompletionRecord, PendingOutside
from durable_agent_runner.workflows.types.questions import PendingQuestion
from durable_agent_runner.workflows.types.session import Exchange, SessionCarry
from durable_agent_runner.workflows.types.transcript import (
    AnswerRecord,
    ApprovalRecord,
    AssistantMessage,
    CallResolution,
    Contract,
    Message,
    ToolMessage,
    Usage,
    UserMessage,
)


class Carry(Contract):
    """What a run takes with it when it continues as new: everything but the history."""

    agent: AgentSpec  # the run's first agent, with its frozen team
    current: str | None = None  # the agent in charge now; None: the first
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    refusals: dict[str, int] = Field(default_factory=dict)  # refused final outputs, per agent
    messages: list[Message]
    turn: int
    usage: Usage
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)  # by model string: cost per provider
    switches: list[ModelSwitch] = Field(default_factory=list)  # durable fallbacks, oldest first
    decisions: list[ApprovalRecord] = Field(default_factory=list)  # "always" approvals among them
    answers: list[AnswerRecord] = Field(default_factory=list)  # `ask_person` answers (1.4)
    completions: list[CompletionRecord] = Field(default_factory=list)  # outside completions (1.4)
    next_event: int = 0
    previous_run_id: str | None = None
    executions: int = 1
    session: SessionCarry | None = None
    breakpoints: Breakpoints | None = None
    edits: list[EditRecord] = Field(default_factory=list)
    # Transcript length before each model call, by turn, where the transcript since is only appended
    # to; a rewrite (handoff filter, compaction, edit) drops the marks before it. Read by fork.
    marks: dict[int, int] = Field(default_factory=dict)
    forked_from: ForkLink | None = None
    dropped_calls: dict[str, str] = Field(default_factory=dict)  # call id → who dropped it
    paused: PauseInfo | None = None
    # A fork of a session's answer: the model calls made before that answer (max_turns counts after them).
    answer_base: int = 0
    # A fork made with --live-tools: before its first model call, the run runs the calls of the
    # carried replies again (tools and child runs) and takes their fresh results (machine/rerun.py).
    live_tools: bool = False
    budget: Budget | None = None  # the run's budget across its tree, as raised (tree-budget-1.1)

    @classmethod
    def for_fork(cls, point: ForkPoint, link: ForkLink, prompt: str | None) -> Carry:
        """What a fork starts from (`client.py fork`): its origin's state just before model call
        `link.turn`, with `prompt` added as a user message when given, and no usage of its own."""
        messages = list(point.messages) + ([UserMessage(content=prompt)] if prompt else [])
        return cls(
            agent=point.agent,
            current=point.current,
            handoffs=point.handoffs,
            messages=messages,
            turn=point.turn,
            usage=Usage(),
            forked_from=link,
            answer_base=point.answer_base,  # a session's answer: its turns count from its start
            live_tools=link.live_tools,
        )


class RunInput(Contract):
    prompt: str
    agent: str = DEFAULT_AGENT
    max_turns: int | None = None  # overrides the agent's
    model: str | None = None  # overrides the agent's
    fallback_models: list[str] | None = None  # overrides the agent's: tried in order when `model` fails
    carry: Carry | None = None  # set only by the run itself, when it continues as new (prompt is then "")
    capture: bool = False  # keep each model call's raw request and response (see activities/capture.py)
    # How long the run waits for a worker that serves its agent before failing with a clear error.
    agent_wait_seconds: float = Field(default=120.0, gt=0)
    model_settings: ModelSettings | None = None  # overrides the agent's, frozen into the run
    # A child run (an agent run as a tool): its agent comes frozen from the parent, never resolved.
    frozen: AgentSpec | None = None
    # A conversation: the run answers `prompt` (if any), then each message sent to it, until
    # `client.py end`, its agent's idle timeout, or a cancel.
    session: bool = False
    breakpoints: Breakpoints | None = None
    # A cap on what this run and its children may spend, below its agent's own budgets: a child
    # run's share of what its parent had left when it started (machine/budget.py).
    budget: Budget | None = None


class RunResult(Contract):
    run_id: str
    agent: str  # the agent that gave the final answer
    output: str  # the final answer's text (for typed output: its JSON)
    turns: int
    usage: Usage
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)  # this run's own calls, by model string
    output_object: Any = None  # typed output: the validated object
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    messages: int = 0  # sessions: messages answered; the output is the last answer
    ended_by: str = ""  # sessions: "ended by alice", "idle for 1 h"


def chain_digest(previous: str, message: UserMessage | AssistantMessage | ToolMessage) -> str:
    """The transcript hash extended by one message (only what the model sees counts)."""
    # The records beside a message (who approved, who answered) are not what the model sees, and
    # `answer` (1.4) came after recorded digests: neither counts.
    dumped = message.model_dump(mode="json", exclude={"approval", "answer"})
    if not dumped.get("thinking", True):  # no thinking: hashed as before the field was (recorded digests hold)
        del dumped["thinking"]
    seen = json.dumps(dumped, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{previous}\n{seen}".encode()).hexdigest()


class ModelProgress(Contract):
    """The model activity's heartbeat details: the streamed text so far, read live by watchers
    through `describe()`, and how many malformed replies earlier attempts got (heartbeat details
    outlive a failed attempt). Never written to history: a completed activity's heartbeats
    leave no event."""

    turn: int
    attempt: int
    text: str = ""  # the tail of the text so far (bounded): characters from `offset` on
    offset: int = 0  # how many characters of the text came before `text`
    tool_calls: list[str] = Field(default_factory=list)
    malformed: int = 0


class PendingApproval(Contract):
    call_id: str
    tool: str
    arguments: dict[str, Any]
    since: datetime
    turn: int


class ApprovalDecision(Contract):
    """The body of the `approval` signal and update, e.g.
    {"call_id": "call_abc", "approve": true, "by": "alice"}
    {"call_id": "call_abc", "approve": true, "arguments": {"amount": 50}, "always": true}
    {"call_id": "call_abc", "approve": false, "reason": "wrong account"}"""

    call_id: str = Field(max_length=200)
    approve: bool
    arguments: BoundedArguments | None = None
    always: bool = False
    reason: str = Field(default="", max_length=4000)
    by: str = Field(default="someone", max_length=200)
    turn: int | None = None  # when set, the call must be waiting in this turn (what the person saw)


class DecisionReceipt(Contract):
    call_id: str
    approved: bool
    recorded_at: datetime


class InDoubtCall(Contract):
    """A call of a `once` tool whose attempt ended without a result: it may or may not have run.
    It waits for a person (`ResolveCall`)."""

    call_id: str
    tool: str
    arguments: Any  # as an object (the raw text when it is not JSON)
    turn: int
    doubt: int = 1  # which time this call is in doubt (a rerun may end in doubt again)
    scheduled_at: datetime  # when the run asked for the attempt
    started_at: datetime | None = None  # when a worker began it (its first heartbeat), if known
    ended_at: datetime  # when the run learnt it ended
    ended: str  # how: "heartbeat timeout", "start-to-close timeout", "its worker shut down before it finished"
    idempotency_key: str = ""
    # A --live-tools fork's once call, asked about before it runs again: the run it ran in (no
    # attempt of it has run in this fork; `ended` says so).
    fork_of: str | None = None


class ResolveCall(Contract):
    """The body of the `resolve_call` signal and update: a person's decision on a call in doubt.
    {"call_id": "call_1_0", "action": "rerun", "by": "alice"}
    {"call_id": "call_1_0", "action": "result", "result": "{\"id\": 42}", "by": "alice"}  (JSON text)
    {"call_id": "call_1_0", "action": "fail", "reason": "the bank has no such payment", "by": "alice"}"""

    call_id: str = Field(max_length=200)
    action: Literal["rerun", "result", "fail"]
    result: str | None = None  # JSON text: what the tool returned (a JSON string is its text)
    reason: str = Field(default="", max_length=4000)
    by: str = Field(default="someone", max_length=200)
    doubt: int | None = None  # when set, the call must be in doubt for this time (what the person saw)

    @model_validator(mode="after")
    def _bounded(self) -> ResolveCall:
        """A result is JSON within the bounds (workflows.bounds), refused at decoding."""
        if self.action == "result":
            if self.result is None:
                raise ValueError("a result decision needs `result`: JSON text of what the tool returned")
            try:
                bounds.parse_json(self.result)
            except bounds.OutsideDataError as err:
                raise ValueError(f"result is not JSON within the bounds: {err}") from None
        elif self.result is not None:
            raise ValueError(f"`result` only goes with action 'result', not '{self.action}'")
        if self.action == "fail" and not self.reason.strip():
            raise ValueError("a fail decision needs `reason`: what the model is told")
        return self


class ResolveReceipt(Contract):
    call_id: str
    action: str
    by: str
    recorded_at: datetime


class RunStatus(Contract):
    run_id: str
    agent: str | None = None
    status: str  # running | awaiting_approval | completed | failed | ...
    phase: str
    turn: int
    max_turns: int | None = None
    usage: Usage
    last_step: str = ""
    output: str | None = None
    error: str | None = None
    error_type: str | None = None
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    decisions: list[ApprovalRecord] = Field(default_factory=list)
    ignored_signals: list[str] = Field(default_factory=list)
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)  # this run's own calls, by model string
    model: str | None = None  # the model the agent in charge calls now
    switches: list[ModelSwitch] = Field(default_factory=list)  # durable fallbacks, oldest first
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    session: SessionStatus | None = None  # set for a session run
    paused: PauseInfo | None = None
    forked_from: ForkLink | None = None
    budget: BudgetStatus | None = None  # runs with a budget (tree-budget-1.1): spent, reserved, left
    in_doubt: list[InDoubtCall] = Field(default_factory=list)  # calls waiting for a person to resolve them
    resolutions: list[CallResolution] = Field(default_factory=list)
    questions: list[PendingQuestion] = Field(default_factory=list)  # `ask_person` calls waiting for an answer
    answers: list[AnswerRecord] = Field(default_factory=list)
    outside: list[PendingOutside] = Field(default_factory=list)  # calls waiting for an outside completion
    completions: list[CompletionRecord] = Field(default_factory=list)


class SessionStatus(Contract):
    messages: int  # received
    answered: int
    state: SessionState
    queued: int = 0
    last: Exchange | None = None  # the last exchange (the one in progress while answering)
    idle_deadline: datetime | None = None  # while waiting: when the session ends unless a message comes
    compactions: int = 0
    mid_turn: MidTurn = "queue"
