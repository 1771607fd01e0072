"""The activities' inputs and results: resolve, model call, tool call, hook, compaction.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from durable_agent_runner.workflows.types.agents import AgentSpec, ModelSettings
from durable_agent_runner.workflows.types.control import Edit
from durable_agent_runner.workflows.types.transcript import AssistantMessage, Contract, Message, Usage

# ------------------------------------------------------------------------ activity contracts


class CompactInput(Contract):
    """Summarize messages[:upto] of the run's transcript (read by the `agent.model_context`
    query, like a model call) into one message the next model calls read instead."""

    agent: str
    model: str | None
    turn: int
    upto: int
    instructions: str = ""  # the agent's memory.summary_instructions; "": the default


class CompactResult(Contract):
    summary: str
    usage: Usage = Field(default_factory=Usage)


class ResolveAgentInput(Contract):
    agent: str
    max_turns: int | None = None
    model: str | None = None
    model_settings: ModelSettings | None = None
    fallback_models: list[str] | None = None  # the run's own, in place of each agent's
    # Set for a resolve on the run's own worker (a local activity): the run's prompt, so the
    # worker's context cache holds the first model call's context and the call reads it there.
    # Not for a prompt of SEED_PROMPT_CHARS or more: copying it (to the payload store, past its
    # threshold) would cost more than the query it spares.
    prompt: str | None = None


SEED_PROMPT_CHARS = 64 * 1024


HookKind = Literal["approval", "input_guardrail", "output_guardrail", "output_type", "input_filter", "breakpoint"]


class HookInput(Contract):
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


class HookResult(Contract):
    needs_approval: bool = False  # approval: a person must decide
    invalid: str | None = None  # approval: arguments invalid (told to the model); output_type: why
    arguments: dict[str, Any] | None = None  # approval: the validated arguments, as shown to a person
    tripwire: bool = False  # guardrails
    info: Any = None  # guardrails: what the guardrail returned about its decision
    output: Any = None  # output_type: the validated object, as JSON
    messages: list[Message] | None = None  # input_filter: what the next agent sees
    edits: list[Edit] = Field(default_factory=list)  # breakpoint: edits to apply, validated by the run
    pause: str | None = None  # breakpoint: pause the run, for this reason


class ModelContextQuery(Contract):
    """Asks the workflow for messages[start:upto], at most `max_bytes` of them (paging)."""

    upto: int
    start: int = 0
    max_bytes: int = 1_000_000


class ModelContext(Contract):
    agent: AgentSpec
    messages: list[Message]
    next_start: int | None = None  # set when more pages remain


class ModelCallInput(Contract):
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
    # Lower than the agent's max output tokens when what the run's budget has left cannot hold
    # the call's worst case (machine/budget.py): the request asks for at most this many.
    max_output_tokens: int | None = Field(default=None, ge=1)


class WithReply(Contract):
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


class ModelReply(Contract):
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


class ChildUsage(Contract):
    """What a child run spent, for its parent: in a failure's details, or signalled when cancelled."""

    child_id: str = ""
    usage_by_agent: dict[str, Usage] = Field(default_factory=dict)


class ToolCallInput(Contract):
    call_id: str
    tool: str
    arguments: str = ""  # the model's raw text, kept only when it is not a JSON object
    idempotency_key: str
    turn: int
    agent: str = ""
    args: dict[str, Any] | None = None  # the arguments as an object, so the Web UI shows JSON
    # The version of the agent the run froze: the same input whether the call runs routed or as a
    # local activity. Run locally (on the workflow's own worker), the activity runs it only if that
    # worker holds this very version, else it says so (TOOL_NOT_HERE) and the run makes it an
    # ordinary, routed tool activity. (1.4.5 and before: `local_version`, set for local calls alone.)
    agent_version: str | None = None
    # Set when the turn would call the model next with nothing but this call's result added:
    # the activity makes that call itself once the tool has run (see CallAhead).
    then: CallAhead | None = None

    def arguments_json(self) -> str:
        return json.dumps(self.args, ensure_ascii=False) if self.args is not None else self.arguments


TOOL_NOT_HERE = "ToolNotHere"  # the error type of a local call on a worker without the agent's version
# The error type of a resolve on the run's own worker when that worker does not serve the agent,
# or would have to reach its MCP servers to freeze it: the run resolves it routed instead.
AGENT_NOT_HERE = "AgentNotHere"


class CallAhead(Contract):
    """The model call a routed tool's activity makes once its tool has run, when the turn asked
    for nothing else (machine/calls.py `call_ahead`): one activity and one workflow task a turn
    instead of two each. `call` is the request as the turn would make it, its `digest` left for
    the worker, which reads messages[:upto] (the reply that asked for the tool included; from its
    cache, else by query) and adds the tool's result. The turn takes the reply only for exactly
    the request it would make then (machine/turn.py); a failed call brings back the tool's
    result alone, and the turn calls the model as ever."""

    upto: int
    call: ModelCallInput
    tool_timeout_seconds: float = Field(gt=0)  # the tool's own bound, kept inside the longer activity


class AheadReply(Contract):
    """The call ahead as the worker made it (its digest and length filled in) and its reply."""

    request: ModelCallInput
    reply: ModelReply
    # When the call began, by the worker's clock (the tool had run): recorded with the reply, so
    # the run's events time the tool and the call apart on every replay.
    began_at: datetime | None = None


class ToolResult(Contract):
    call_id: str
    tool: str
    output: str
    is_error: bool = False
    ahead: AheadReply | None = None  # the next model call, made with this result (CallAhead)
