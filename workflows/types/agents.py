"""An agent as the run freezes it: its tools, handoffs, model settings and options.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from durable_agent_runner.workflows.types.names import DEFAULT_MODEL_TIMEOUT, EMPTY_PARAMETERS, WireName
from durable_agent_runner.workflows.types.notify import MAX_ESCALATE_SECONDS, NotifyOptions, NotifyPlan
from durable_agent_runner.workflows.types.outside import OutsideSpec
from durable_agent_runner.workflows.types.questions import AskSpec
from durable_agent_runner.workflows.types.transcript import Contract

# ------------------------------------------------------------------------------------- agents


class ModelSettings(Contract):
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
    # Tokens the model may think before it answers: Anthropic's `thinking.budget_tokens`, Gemini's
    # `thinkingConfig.thinkingBudget`. OpenAI's models take `reasoning_effort` instead.
    thinking_tokens: int | None = Field(default=None, ge=1024)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # provider-specific fields, sent as given

    def over(self, base: ModelSettings) -> ModelSettings:
        """These settings on top of `base`: each field set here wins; extra_body merges."""
        mine = self.model_dump(exclude_unset=True, exclude_none=True)
        extra = {**base.extra_body, **self.extra_body}
        return base.model_copy(update={**mine, "extra_body": extra})


class HandoffSpec(Contract):
    """A transfer the model may make: the tool `tool_name` hands the run to agent `agent`."""

    agent: str
    tool_name: str  # transfer_to_<agent>
    description: str = ""
    # What the next agent sees: None, the whole conversation; a built-in filter's name
    # (machine/memory.HANDOFF_FILTERS), or "hook:<name>" for a worker-side callable.
    input_filter: str | None = None


class ToolSpec(Contract):
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
    # Running it twice is harmful (`@tool(once=True)`): one attempt, never retried. An attempt
    # that ends without a result (a worker killed, a timeout, a lost heartbeat) puts the call in
    # doubt, and a person decides (`client.py resolve`). Never local, never with the reply.
    once: bool = False
    # Seconds a wait for a person on this tool's call may last before the escalation channel hears
    # of it (`@tool(escalate_after=...)`); None: the agent's `notify.escalate_after`.
    escalate_after: float | None = Field(default=None, gt=0, le=MAX_ESCALATE_SECONDS)
    # Set for `ask_person`: no activity runs the call; a person's answer is its result.
    ask: AskSpec | None = None
    # Set for `@tool(completes="outside")`: its activity starts the work; an outside system's
    # completion (`complete_call`) is the call's result (docs/outside-completion.md).
    outside: OutsideSpec | None = None


MidTurn = Literal["queue", "steer"]
SessionState = Literal["answering", "waiting", "ending", "ended"]


class MemoryPolicy(Contract):
    """How a session keeps its transcript within budget. Before a model call, when the transcript
    nears either budget, every exchange but the last `keep_exchanges` is compacted: summarized by
    the model (an `agent.compact` activity) or dropped. History keeps every message (`export`)."""

    budget_tokens: int | None = Field(default=None, ge=1)  # the last model call's input tokens
    budget_bytes: int = Field(default=400_000, ge=1_000)  # the transcript's size as JSON
    strategy: Literal["summarize", "trim"] = "summarize"
    keep_exchanges: int = Field(default=2, ge=0)  # the most recent exchanges kept word for word
    summary_instructions: str = ""  # "": a default asking for facts, names, numbers and decisions


class AgentOptions(Contract):
    """What an agent's author sets that its frozen spec keeps as it is: declared once, here.
    `activities.Agent` (the agent as written) and `AgentSpec` (as frozen) both extend it, so a
    new option is one edit; the fields they transform (tools, handoffs, output type, …) are theirs."""

    name: str = Field(min_length=1)
    instructions: str = ""
    model: str | None = None  # None: the worker's LLM_MODEL; "anthropic:…", "gemini:…", "openai:…" name a provider
    # Models to try in order when a call to `model` has used its retries (activities/providers.py).
    fallback_models: list[str] = Field(default_factory=list)
    # Prompt caching where the provider needs marks (Anthropic's cache_control): "5m" or "1h" TTL
    # breakpoints on the stable prefix, or "off". OpenAI and Gemini cache on their own.
    prompt_cache: Literal["5m", "1h", "off"] = "5m"
    max_turns: int = Field(default=10, ge=1)
    temperature: float | None = None  # a shortcut for settings.temperature
    # Bounds on each model call; None: the worker's LLM_READ_TIMEOUT, LLM_MAX_ATTEMPTS and
    # LLM_RETRY_SECONDS, filled in when a run starts (runs recorded earlier: DEFAULT_MODEL_*).
    model_read_timeout_seconds: float | None = Field(default=None, gt=0)
    model_max_attempts: int | None = Field(default=None, ge=1)
    model_retry_seconds: float | None = Field(default=None, gt=0)
    api: WireName | None = None  # None: the worker's LLM_API
    approval_timeout_seconds: float | None = Field(default=None, gt=0)  # None: wait as long as it takes
    approval_timeout_outcome: Literal["reject", "fail"] = "reject"
    approval_timeout_reason: str = "no one decided on this call in time"
    token_budget: int | None = Field(default=None, ge=1)  # input + output tokens for the whole run
    cost_budget_usd: float | None = Field(default=None, gt=0)  # US dollars for the whole run, sub-agents included
    # When a budget is spent: "fail" ends the run; "pause" holds it for a person, who raises the
    # budget (`client.py resume RUN_ID --add-usd X`) or cancels it (docs/what-runs-once.md).
    on_budget: Literal["fail", "pause"] = "fail"
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
    # The agent's own notification channels and escalation (docs/notifications.md); None: the worker's.
    notify: NotifyOptions | None = None
    # Online scoring (docs/eval-runs.md): these evaluators (as specs: evals/registry.py's short
    # forms) score this share (0..1) of the agent's completed runs, chosen by run id. 0: none.
    evaluators: list[JsonValue] = Field(default_factory=list)
    eval_sample: float = Field(default=0.0, ge=0, le=1)


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
    # US dollars per million output tokens of `model`, from the resolving worker's price table
    # (None: no price known): what a model call reserves of a cost budget (machine/budget.py).
    output_price: float | None = None
    # Who hears of the run's waits for a person, as the resolving worker saw it (names of channels,
    # no secrets): filled in when a run starts. None (runs recorded before 1.4 too): no one.
    notify_plan: NotifyPlan | None = None

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
