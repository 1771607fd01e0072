"""Shared contracts: the pydantic types and names that workflows, activities, worker and client agree on.

Pure data, no I/O, safe inside the workflow sandbox. Every field added after a release must
carry a default, so that histories recorded by older code still decode and replay.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey

from workflows import bounds

# ---------------------------------------------------------------------------------------------
# Names are contracts: renaming a Python function must never break a run already in flight.

WORKFLOW_NAME = "AgentRun"
RESOLVE_AGENT_ACTIVITY = "agent.resolve"
RESOLVE_SECONDS = 60  # an attempt of it, start to close: MCP servers are started and listed within it
MODEL_CALL_ACTIVITY = "agent.model_call"
TOOL_CALL_ACTIVITY = "agent.tool_call"
# Runs worker-side code an agent declares (approval predicates, guardrails, its output type,
# handoff input filters): one activity for all of them, so the tool activity does one thing.
HOOK_ACTIVITY = "agent.hook"
STATUS_QUERY = "agent.status"
TRANSCRIPT_QUERY = "agent.transcript"
MODEL_CONTEXT_QUERY = "agent.model_context"
EVENTS_QUERY = "agent.events"
# A person's decision on a tool call. The signal is for `temporal workflow signal` and the Web UI;
# client.py sends the update, whose validator refuses a bad decision before anything is recorded.
APPROVAL_SIGNAL = "approval"
APPROVAL_UPDATE = "approval_update"
# Sessions: one run per conversation. A message and the end of a session are updates, so a
# closed run refuses them at once; each message's answer is read back by query.
SESSION_SEND_UPDATE = "session.send"
SESSION_END_UPDATE = "session.end"
EXCHANGE_QUERY = "session.exchange"
# Summarizes a session's older turns when its transcript nears the agent's memory budget.
COMPACT_ACTIVITY = "agent.compact"
# Breakpoints: a paused run holds still until resumed; while paused, its state can be inspected
# and edited (each edit validated by the update's validator, then recorded).
PAUSE_UPDATE = "agent.pause"
RESUME_UPDATE = "agent.resume"
EDIT_UPDATE = "agent.edit"
INSPECT_QUERY = "agent.inspect"
# The state just before model call N, read by `client.py fork` to start a new run from it.
FORK_POINT_QUERY = "agent.fork_point"
# A cancelled child run tells its parent what it spent (ChildUsage), so the parent's budget counts it.
CHILD_USAGE_SIGNAL = "agent.child_usage"

# The run's search attributes, each key with its type, defined once: the workflow writes them,
# the CLI filters on them, and the dev server, the worker and docker-compose.yml register
# SEARCH_ATTRIBUTES (the compose file's copy is checked against it by tests/test_compose.py).
SA_AGENT = SearchAttributeKey.for_keyword("AgentName")
SA_PHASE = SearchAttributeKey.for_keyword("AgentPhase")  # one of Phase
SA_TURN = SearchAttributeKey.for_int("AgentTurn")
SA_TOKENS = SearchAttributeKey.for_int("AgentTotalTokens")
SA_PENDING = SearchAttributeKey.for_int("AgentPendingApprovals")
SA_VERSION = SearchAttributeKey.for_keyword("AgentVersion")  # the frozen agent's: runs an old deploy must finish
SA_COST = SearchAttributeKey.for_float("AgentCostUsd")  # what the run has cost so far, sub-agents included
SA_FORKED_FROM = SearchAttributeKey.for_keyword("AgentForkedFrom")  # the run a fork started from
_KINDS = {SearchAttributeIndexedValueType.KEYWORD: "Keyword", SearchAttributeIndexedValueType.INT: "Int",
          SearchAttributeIndexedValueType.DOUBLE: "Double"}  # fmt: skip
SEARCH_ATTRIBUTES: dict[str, str] = {
    k.name: _KINDS[k.indexed_value_type]
    for k in (SA_AGENT, SA_PHASE, SA_TURN, SA_TOKENS, SA_PENDING, SA_VERSION, SA_FORKED_FROM, SA_COST)
}

# A run's phase: the AgentPhase search attribute and `status`. The last three are final.
Phase = Literal[
    "starting", "calling_model", "running_tools", "awaiting_approval", "continuing", "completed", "failed", "cancelled",
    "waiting_for_message", "compacting", "paused",
]  # fmt: skip
FINAL_PHASES: tuple[Phase, ...] = ("completed", "failed", "cancelled")

DEFAULT_AGENT = "demo"
EMPTY_PARAMETERS: dict[str, object] = {"type": "object", "properties": {}}

# Bounds on a model call, used when neither the agent nor the worker's environment sets one
# (LLM_READ_TIMEOUT, LLM_TIMEOUT, LLM_MAX_ATTEMPTS, LLM_RETRY_SECONDS). A run never retries forever.
DEFAULT_MODEL_READ_TIMEOUT = 60.0  # seconds without a byte from the server end the attempt
DEFAULT_MODEL_TIMEOUT = 300.0  # seconds for one attempt, start to finish
DEFAULT_MODEL_MAX_ATTEMPTS = 8  # attempts of one model call, the first included
DEFAULT_MODEL_RETRY_SECONDS = 900.0  # seconds from a call's first attempt to giving up on it


def agent_task_queue(base: str, agent: str, version: str | None = None) -> str:
    """The task queue for work only a worker that knows `agent` can do.

    A worker polls `base` (workflows and model calls, which need no user code) and, for every
    agent it serves, `base@agent` (resolving the agent when a run starts) and
    `base@agent@version` (its tools and hooks). A run's tool calls therefore only ever reach
    workers that hold the exact agent the run froze, during a rolling deploy too.
    """
    return f"{base}@{agent}" if version is None else f"{base}@{agent}@{version}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


# --------------------------------------------------------------------------------- transcript
# One API-neutral transcript: Chat Completions and the Responses API map to and from it.


class ToolCall(_Model):
    """A function call the model asked for. `arguments` is the model's raw JSON text.

    `call_id` is the run's own id for the call, unique across the whole run: providers reuse
    theirs across turns, so an approval or an idempotency key must never be bound to them.
    `provider_id` is what the server called it (an excerpt), for the record only."""

    call_id: str
    name: str
    arguments: str = "{}"
    provider_id: str = ""


class UserMessage(_Model):
    role: Literal["user"] = "user"
    content: str
    # Set on the message that replaced earlier ones when a session compacted its memory: how
    # many messages it stands for (the model reads it as an ordinary message).
    summary_of: int = 0


class AssistantMessage(_Model):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ApprovalRecord(_Model):
    """A person's decision on one tool call: who, when, what."""

    call_id: str
    tool: str
    approved: bool
    by: str
    at: datetime
    reason: str = ""
    arguments: dict[str, Any] | None = None  # edited arguments, when the approver changed them
    always: bool = False
    automatic: bool = False  # made by the run itself: an approval timeout, or an earlier --always


class ToolMessage(_Model):
    """A tool call's result as the model will read it (errors included, flagged)."""

    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    approval: ApprovalRecord | None = None  # never sent to the model; kept for the record


Message = Annotated[UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class Usage(_Model):
    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0  # from the worker's price table (activities/prices.py)
    unpriced: int = 0  # model calls to a model the price table lacks (their cost is not in cost_usd)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
            unpriced=self.unpriced + other.unpriced,
        )


# ------------------------------------------------------------------------------------- agents


class ModelSettings(_Model):
    """How the model is asked: per agent, overridable per run, frozen into the run, and mapped
    onto both wires (activities/chat_wire.py, activities/responses_wire.py). None: not sent."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | None = None  # "auto" | "required" | "none" | the name of one tool
    parallel_tool_calls: bool | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    seed: int | None = None
    stop: list[str] | None = Field(default=None, max_length=4)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # provider-specific fields, sent as given

    def over(self, base: ModelSettings) -> ModelSettings:
        """These settings on top of `base`: each field set here wins; extra_body merges."""
        mine = self.model_dump(exclude_unset=True, exclude_none=True)
        extra = {**base.extra_body, **self.extra_body}
        return base.model_copy(update={**mine, "extra_body": extra})


class HandoffSpec(_Model):
    """A transfer the model may make: the tool `tool_name` hands the run to agent `agent`."""

    agent: str
    tool_name: str  # transfer_to_<agent>
    description: str = ""
    # What the next agent sees: None, the whole conversation; a built-in filter's name
    # (workflows/turn.HANDOFF_FILTERS), or "hook:<name>" for a worker-side callable.
    input_filter: str | None = None


class ToolSpec(_Model):
    """What the model is told about a tool, plus how the workflow runs it."""

    name: str
    description: str = ""
    parameters: dict[str, object] = Field(default_factory=lambda: dict(EMPTY_PARAMETERS))
    timeout_seconds: float = 300.0
    heartbeat_seconds: float = 30.0
    max_attempts: int = 5
    # never | always | conditional (the agent's predicate, run by the hook activity, decides)
    approval: Literal["never", "always", "conditional"] = "never"
    # Set when the tool runs another agent (`Agent.as_tool`): a child run of that agent, frozen
    # into this run's `team`, whose final output is the tool's result.
    agent: str | None = None
    # Set when the tool is an MCP server's, listed when the run started: the server's name (its
    # URL or command, and headers, stay on the worker's agent; activities/mcp_tools.py).
    mcp_server: str | None = None
    # A cheap, idempotent tool (`@tool(local=True)`): run as a local activity in the workflow task
    # that handles the model's reply, on a worker holding the agent's version (else as usual).
    local: bool = False


MidTurn = Literal["queue", "steer"]
SessionState = Literal["answering", "waiting", "ending", "ended"]


class MemoryPolicy(_Model):
    """How a session keeps its transcript within budget. Before a model call, when the transcript
    nears either budget, every exchange but the last `keep_exchanges` is compacted: summarized by
    the model (an `agent.compact` activity) or dropped. History keeps every message (`export`)."""

    budget_tokens: int | None = Field(default=None, ge=1)  # the last model call's input tokens
    budget_bytes: int = Field(default=400_000, ge=1_000)  # the transcript's size as JSON
    strategy: Literal["summarize", "trim"] = "summarize"
    keep_exchanges: int = Field(default=2, ge=0)  # the most recent exchanges kept word for word
    summary_instructions: str = ""  # "": a default asking for facts, names, numbers and decisions


class AgentOptions(_Model):
    """What an agent's author sets that its frozen spec keeps as it is: declared once, here.
    `activities.Agent` (the agent as written) and `AgentSpec` (as frozen) both extend it, so a
    new option is one edit; the fields they transform (tools, handoffs, output type, …) are theirs."""

    name: str = Field(min_length=1)
    instructions: str = ""
    model: str | None = None  # None: the worker's LLM_MODEL
    max_turns: int = Field(default=10, ge=1)
    temperature: float | None = None  # a shortcut for settings.temperature
    # Bounds on each model call; None: the worker's LLM_READ_TIMEOUT, LLM_MAX_ATTEMPTS and
    # LLM_RETRY_SECONDS, filled in when a run starts (runs recorded earlier: DEFAULT_MODEL_*).
    model_read_timeout_seconds: float | None = Field(default=None, gt=0)
    model_max_attempts: int | None = Field(default=None, ge=1)
    model_retry_seconds: float | None = Field(default=None, gt=0)
    api: Literal["chat", "responses"] | None = None  # None: the worker's LLM_API
    approval_timeout_seconds: float | None = Field(default=None, gt=0)  # None: wait as long as it takes
    approval_timeout_outcome: Literal["reject", "fail"] = "reject"
    approval_timeout_reason: str = "no one decided on this call in time"
    token_budget: int | None = Field(default=None, ge=1)  # input + output tokens for the whole run
    cost_budget_usd: float | None = Field(default=None, gt=0)  # US dollars for the whole run, sub-agents included
    # Continue as new after this many turns in one execution (Temporal may suggest it sooner).
    continue_as_new_after: int = Field(default=200, ge=1)
    handoff_description: str = ""  # what other agents' transfer tools (and as_tool) say about this one
    output_retries: int = Field(default=2, ge=0)  # invalid final outputs sent back, before failing
    # Run the model call as a local activity, in the workflow task that starts the turn: one
    # dispatch less per turn. For agents whose replies need not stream: watchers see no text until
    # the reply is whole, queries, approvals and messages wait while it runs, and a worker that
    # dies mid-call has the call re-run from the start after the workflow task times out.
    local_model_call: bool = False
    # Sessions (`client.py chat`): the run ends after this long without a message.
    idle_timeout_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    # A message that arrives while the run is still answering: "queue" answers it next, in
    # order; "steer" adds it to the conversation before the next model call of this answer.
    mid_turn: MidTurn = "queue"
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy)


class AgentSpec(AgentOptions):
    """An agent frozen into a run's history when the run starts."""

    tools: list[ToolSpec] = Field(default_factory=list)
    model_timeout_seconds: float = DEFAULT_MODEL_TIMEOUT  # one attempt; LLM_TIMEOUT when the agent sets none
    # A digest of the agent as its author wrote it: routes its tool calls (see agent_task_queue).
    # "" in runs recorded before routing: their activities go to the run's own task queue.
    version: str = ""
    settings: ModelSettings = Field(default_factory=ModelSettings)
    handoffs: list[HandoffSpec] = Field(default_factory=list)
    # Typed output: the JSON schema sent as the response format, validated worker-side by the
    # hook activity; an invalid output goes back to the model up to `output_retries` times.
    output_schema: dict[str, Any] | None = None
    output_name: str = ""
    input_guardrails: list[str] = Field(default_factory=list)  # names, run by the hook activity
    output_guardrails: list[str] = Field(default_factory=list)
    # A worker-side function called before each model call with the run's state; it may edit
    # the state or pause the run (the hook activity, kind "breakpoint"). None: no function.
    breakpoint: str | None = None
    # Every other agent this run may reach (handoff targets, agents run as tools, theirs in
    # turn), frozen at start; members carry no team of their own. Only the run's first agent has one.
    team: list[AgentSpec] = Field(default_factory=list)

    def settings_now(self) -> ModelSettings:
        """The model settings to send, with the older `temperature` field folded in."""
        if self.temperature is not None and self.settings.temperature is None:
            return self.settings.model_copy(update={"temperature": self.temperature})
        return self.settings

    def member(self, name: str) -> AgentSpec | None:
        """This agent or a frozen team member, by name: nothing else is reachable."""
        return self if name == self.name else next((a for a in self.team if a.name == name), None)

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


# ------------------------------------------------------------------------- workflow contracts


class HandoffRecord(_Model):
    """One transfer of the run from one agent to another."""

    from_agent: str
    to_agent: str
    turn: int
    at: datetime
    call_id: str


MAX_MESSAGE_CHARS = 200_000  # a session message or edited text; larger inputs belong in a tool's input


class Breakpoints(_Model):
    """Where a run pauses by itself: before model call N (the run's turn numbers), before every
    model call, before any tool call or before calls of the named tools."""

    at_turns: list[int] = Field(default_factory=list, max_length=1000)
    every_turn: bool = False
    before_tools: bool = False
    tools: list[str] = Field(default_factory=list, max_length=100)


class PauseRequest(_Model):
    """`client.py pause`: the run pauses at its next safe point (before a model or tool call)."""

    by: str = Field(default="someone", max_length=200)
    reason: str = Field(default="", max_length=1000)


PauseWhere = Literal["before_model", "before_tools"]


class PauseInfo(_Model):
    where: PauseWhere
    turn: int  # before model call `turn`, or before the tools model call `turn` asked for
    why: str  # "breakpoint at turn 3", "pause by alice: …", "breakpoint function: …"
    at: datetime


class ResumeRequest(_Model):
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


class Edit(_Model):
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


class EditRecord(_Model):
    """An edit as applied: who, when, what (in words), at which pause."""

    edit: Edit
    at: datetime
    turn: int
    summary: str


class EditReceipt(_Model):
    summary: str
    items: int  # transcript items after the edit


class ForkLink(_Model):
    run_id: str
    turn: int  # the new run started just before this model call of `run_id`


class SessionMessage(_Model):
    """A message sent to a session: the `session.send` update's body.
    {"text": "and tomorrow?", "by": "alice", "message_id": "7f3c…"}"""

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    by: str = Field(default="someone", max_length=200)
    # The sender's id for this message: sending it again (a retry after a timeout) counts once.
    message_id: str = Field(default="", max_length=200)


class MessageReceipt(_Model):
    message: int  # K: this message's number in the session, from 1
    queued: int  # messages queued ahead of it (0: it is answered next, or now)
    steer: bool = False  # it joins the answer in progress instead of waiting its turn
    duplicate: bool = False  # the same message_id was sent before: nothing new was recorded


class EndSession(_Model):
    by: str = Field(default="someone", max_length=200)
    reason: str = Field(default="", max_length=1000)


class EndReceipt(_Model):
    messages: int  # messages received in all
    unanswered: int  # accepted messages still to be answered before the run ends


class Queued(_Model):
    """An accepted message not yet answered (carried across continue-as-new)."""

    message: int
    text: str
    by: str
    at: datetime
    message_id: str = ""


class Exchange(_Model):
    """One message of a session and its answer. A steered message joins the exchange in progress."""

    message: int  # K of the message that opened the exchange
    steered: list[int] = Field(default_factory=list)  # later messages folded into this answer
    prompt: str  # the message (an excerpt)
    by: str = ""
    output: str | None = None  # None while it is being answered
    output_object: Any = None
    error: str | None = None  # set when answering failed (the run failed with it)
    first_turn: int
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    started: datetime
    finished: datetime | None = None
    # The execution (run id) that holds it whole; older exchanges are carried as excerpts and
    # read back from there by query (a closed execution still answers queries).
    execution: str = ""


class ExchangeSpan(_Model):
    """Exchanges from message `first` on were answered in execution `execution` (a run id)."""

    first: int
    execution: str


class SessionCarry(_Model):
    """A session's state across continue-as-new: the queue whole, the last exchanges whole, and
    where the older ones are held (each execution still answers queries after it closes)."""

    messages: int = 0  # received so far
    queue: list[Queued] = Field(default_factory=list)
    # The most recent exchanges; the last one is still being answered when `finished` is None.
    exchanges: list[Exchange] = Field(default_factory=list)
    spans: list[ExchangeSpan] = Field(default_factory=list)
    recent: dict[str, int] = Field(default_factory=dict)  # message_id → K, for the latest ids (bounded)
    ending: EndSession | None = None
    compactions: int = 0
    idle_since: datetime | None = None


class Carry(_Model):
    """What a run takes with it when it continues as new: everything but the history."""

    agent: AgentSpec  # the run's first agent, with its frozen team
    current: str | None = None  # the agent in charge now; None: the first
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    refusals: dict[str, int] = Field(default_factory=dict)  # refused final outputs, per agent
    messages: list[Message]
    turn: int
    usage: Usage
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)
    decisions: list[ApprovalRecord] = Field(default_factory=list)  # "always" approvals among them
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


class RunInput(_Model):
    prompt: str
    agent: str = DEFAULT_AGENT
    max_turns: int | None = None  # overrides the agent's
    model: str | None = None  # overrides the agent's
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


class RunResult(_Model):
    run_id: str
    agent: str  # the agent that gave the final answer
    output: str  # the final answer's text (for typed output: its JSON)
    turns: int
    usage: Usage
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)
    output_object: Any = None  # typed output: the validated object
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    messages: int = 0  # sessions: messages answered; the output is the last answer
    ended_by: str = ""  # sessions: "end by alice", "idle for 3600s"


EventKind = Literal[
    "model_started",  # detail: model name
    "model_finished",  # text: the reply's text; detail: the tool calls asked for
    "tool_started",  # detail: get_weather(city=Tokyo)
    "tool_finished",  # text: an excerpt of the result
    "approval_requested",
    "approval_decided",  # detail: approved by alice / rejected by bob: reason
    "final",  # text: the final answer
    "failed",  # text: why
    "cancelled",  # text: what was in flight
    "handoff",  # detail: from → to
    "guardrail",  # detail: which guardrail, and whether its tripwire fired
    "output_refused",  # text: why the final output was refused, as told to the model
    "message",  # sessions: text: the message; detail: "message K from BY" (+ " · steers the answer")
    "answered",  # sessions: text: the answer to message K (detail: "message K"); follows "final"
    "compacted",  # sessions: detail: what was summarized or dropped
    "waiting",  # sessions: answered everything; waiting for the next message
    "ended",  # sessions: text: why the session ended
    "paused",  # detail: where and why (before model call 3: breakpoint; by alice)
    "edited",  # detail: what an edit changed, and who made it
    "resumed",  # detail: who resumed the run
]


class RunEvent(_Model):
    """One step of a run, for watchers. Kept in workflow state (so rebuilt from history);
    `seq` keeps counting across continue-as-new, so a watcher resumes without gaps."""

    seq: int
    at: datetime
    kind: EventKind
    turn: int
    text: str = ""
    detail: str = ""
    call_id: str | None = None
    tool: str | None = None
    usage: Usage | None = None


class EventsQuery(_Model):
    since: int = 0
    limit: int = 500


class EventsPage(_Model):
    events: list[RunEvent]
    next: int  # the `since` to ask for next
    first: int  # the oldest seq this execution holds; older ones are in `previous_run_id`
    previous_run_id: str | None = None
    done: bool = False  # the run has ended: no events will follow


def chain_digest(previous: str, message: UserMessage | AssistantMessage | ToolMessage) -> str:
    """The transcript hash extended by one message (only what the model sees counts)."""
    seen = json.dumps(message.model_dump(mode="json", exclude={"approval"}), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{previous}\n{seen}".encode()).hexdigest()


class ModelProgress(_Model):
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


class PendingApproval(_Model):
    call_id: str
    tool: str
    arguments: dict[str, Any]
    since: datetime
    turn: int


class ApprovalDecision(_Model):
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


class DecisionReceipt(_Model):
    call_id: str
    approved: bool
    recorded_at: datetime


class RunStatus(_Model):
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
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    session: SessionStatus | None = None  # set for a session run
    paused: PauseInfo | None = None
    forked_from: ForkLink | None = None


class SessionStatus(_Model):
    messages: int  # received
    answered: int
    state: SessionState
    queued: int = 0
    last: Exchange | None = None  # the last exchange (the one in progress while answering)
    idle_deadline: datetime | None = None  # while waiting: when the session ends unless a message comes
    compactions: int = 0
    mid_turn: MidTurn = "queue"


class ExchangeQuery(_Model):
    message: int = 0  # K; 0: the last exchange


class ExchangeAnswer(_Model):
    exchange: Exchange | None = None
    messages: int = 0  # received so far
    # When message K was answered in an earlier execution: its run id, to query there.
    execution: str | None = None


class Item(_Model):
    """A transcript item with its stable index (what edits refer to)."""

    index: int
    message: Message


class PendingCall(_Model):
    call_id: str
    tool: str
    arguments: Any  # the arguments as an object (the raw text when it is not JSON)
    dropped_by: str | None = None


class Inspection(_Model):
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


class ForkQuery(_Model):
    turn: int = Field(ge=1)


class ForkPoint(_Model):
    """A run's state just before model call `turn`: what `client.py fork` starts a new run from."""

    agent: AgentSpec  # the run's first agent, with its frozen team
    current: str | None = None
    messages: list[Message]
    turn: int  # model calls made before the fork point (turn - 1)
    handoffs: list[HandoffRecord] = Field(default_factory=list)
    answer_base: int = 0  # of a session: the model calls before the answer the fork continues


class TranscriptQuery(_Model):
    start: int = 0


class Transcript(_Model):
    agent: AgentSpec | None = None
    messages: list[Message] = Field(default_factory=list)


# ------------------------------------------------------------------------ activity contracts


class CompactInput(_Model):
    """Summarize messages[:upto] of the run's transcript (read by the `agent.model_context`
    query, like a model call) into one message the next model calls read instead."""

    agent: str
    model: str | None
    turn: int
    upto: int
    instructions: str = ""  # the agent's memory.summary_instructions; "": the default


class CompactResult(_Model):
    summary: str
    usage: Usage = Field(default_factory=Usage)


class ResolveAgentInput(_Model):
    agent: str
    max_turns: int | None = None
    model: str | None = None
    model_settings: ModelSettings | None = None
    # Set for a resolve on the run's own worker (a local activity): the run's prompt, so the
    # worker's context cache holds the first model call's context and the call reads it there.
    # Not for a prompt of SEED_PROMPT_CHARS or more: copying it (to the payload store, past its
    # threshold) would cost more than the query it spares.
    prompt: str | None = None


SEED_PROMPT_CHARS = 64 * 1024


HookKind = Literal["approval", "input_guardrail", "output_guardrail", "output_type", "input_filter", "breakpoint"]


class HookInput(_Model):
    """Asks the hook activity to run one piece of an agent's worker-side code."""

    agent: str  # whose code (a member of the run's team)
    version: str = ""  # the frozen agent's version, for routing
    kind: HookKind
    name: str  # the tool (approval), guardrail, or filter name; the output type's name
    turn: int
    call_id: str = ""  # approval: the call
    arguments: str = ""  # approval: the model's raw arguments
    text: str = ""  # guardrails: the input or final output; output_type: the final output
    transcript_len: int = 0  # input_filter, breakpoint: messages[:transcript_len], read by query


class HookResult(_Model):
    needs_approval: bool = False  # approval: a person must decide
    invalid: str | None = None  # approval: arguments invalid (told to the model); output_type: why
    arguments: dict[str, Any] | None = None  # approval: the validated arguments, as shown to a person
    tripwire: bool = False  # guardrails
    info: Any = None  # guardrails: what the guardrail returned about its decision
    output: Any = None  # output_type: the validated object, as JSON
    messages: list[Message] | None = None  # input_filter: what the next agent sees
    edits: list[Edit] = Field(default_factory=list)  # breakpoint: edits to apply, validated by the run
    pause: str | None = None  # breakpoint: pause the run, for this reason


class ModelContextQuery(_Model):
    """Asks the workflow for messages[start:upto], at most `max_bytes` of them (paging)."""

    upto: int
    start: int = 0
    max_bytes: int = 1_000_000


class ModelContext(_Model):
    agent: AgentSpec
    messages: list[Message]
    next_start: int | None = None  # set when more pages remain


class ModelCallInput(_Model):
    """Small on purpose: the transcript is read from the workflow, so each message enters
    history exactly once and per-turn history stays flat however long the run gets."""

    agent: str
    model: str | None
    turn: int
    transcript_len: int
    capture: bool = False
    # A hash of messages[:transcript_len] as the model will see them: a worker that still holds
    # them (it made the last reply and ran the tools) checks it and skips reading the context.
    digest: str = ""
    # Set for a local model call (AgentOptions.local_model_call): the context itself, since a
    # local activity's input never enters history and a query could not be answered meanwhile.
    context: ModelContext | None = None
    # Which of the reply's calls the activity may run itself once the reply is whole (None: none).
    with_reply: WithReply | None = None


class WithReply(_Model):
    """The cheap calls a model call may run with its reply, so the turn needs no dispatch of its
    own for them: calls of `tools` (`@tool(local=True)`, no approval, no child run), on a worker
    holding the agent's exact `version`, unless the reply also calls a tool of `pause_on` (a
    breakpoint pauses before it) or its tokens or cost reach what the run has left (the turn
    would stop). The turn still decides: it takes a result only for a call it runs as the model
    asked it (same id, same arguments), and runs any other call as before."""

    version: str
    tools: list[str]
    pause_on: list[str] = Field(default_factory=list)
    tokens_left: int | None = None
    cost_left: float | None = None


class ModelReply(_Model):
    message: AssistantMessage
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None  # as reported by the server
    response_id: str | None = None
    capture: str | None = None  # the key of this call's wire capture, when captured
    # When the reply arrived, by the worker's clock: recorded with the reply, so the run reads
    # the same time on every replay (the run's clock for its throttled search attributes).
    received_at: datetime | None = None
    # The results of the calls the activity ran with the reply (ModelCallInput.with_reply), by
    # the call ids the model gave; history records them here instead of a marker per call.
    tool_results: list[ToolResult] = Field(default_factory=list)


def idempotency_key(run_id: str, call_id: str) -> str:
    """The key a tool gets for one call (ToolContext.idempotency_key): the same on every attempt."""
    return f"{run_id}:{call_id}"


class ChildUsage(_Model):
    """What a child run spent, for its parent: in a failure's details, or signalled when cancelled."""

    child_id: str = ""
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)


class ToolCallInput(_Model):
    call_id: str
    tool: str
    arguments: str = ""  # the model's raw text, kept only when it is not a JSON object
    idempotency_key: str
    turn: int
    agent: str = ""
    args: dict[str, Any] | None = None  # the arguments as an object, so the Web UI shows JSON
    # Set for a local call: the worker runs it only if it holds this very version of the agent,
    # else it says so (NOT_HERE) and the run makes it an ordinary, routed tool activity.
    local_version: str | None = None

    def arguments_json(self) -> str:
        return json.dumps(self.args, ensure_ascii=False) if self.args is not None else self.arguments


TOOL_NOT_HERE = "ToolNotHere"  # the error type of a local call on a worker without the agent's version
# The error type of a resolve on the run's own worker when that worker does not serve the agent,
# or would have to reach its MCP servers to freeze it: the run resolves it routed instead.
AGENT_NOT_HERE = "AgentNotHere"


class ToolResult(_Model):
    call_id: str
    tool: str
    output: str
    is_error: bool = False
