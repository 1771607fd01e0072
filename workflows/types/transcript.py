"""The transcript, API-neutral: Chat Completions and the Responses API map to and from it.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent_runner.machine.bounds import ParsedArguments


class Contract(BaseModel):
    """The base of every contract: unknown fields are ignored, so older code reads newer payloads."""

    model_config = ConfigDict(extra="ignore", frozen=False)


# --------------------------------------------------------------------------------- transcript
# One API-neutral transcript: Chat Completions and the Responses API map to and from it.


class ToolCall(Contract, ParsedArguments):
    """A function call the model asked for. `arguments` is the model's raw JSON text; `args` the
    JSON object it holds, parsed once (None: it holds none).

    `call_id` is the run's own id for the call, unique across the whole run: providers reuse
    theirs across turns, so an approval or an idempotency key must never be bound to them.
    `provider_id` is what the server called it (an excerpt), for the record only."""

    call_id: str
    name: str
    arguments: str = "{}"
    provider_id: str = ""


class UserMessage(Contract):
    role: Literal["user"] = "user"
    content: str
    # Set on the message that replaced earlier ones when a session compacted its memory: how
    # many messages it stands for (the model reads it as an ordinary message).
    summary_of: int = 0


class Thinking(Contract):
    """A block of the model's reasoning that its provider signed: kept in the transcript and sent
    back unchanged to that provider (Anthropic refuses a tool-use continuation without it),
    dropped for any other, and never shown as answer text. `kind`: Anthropic's "thinking" (its
    `text` and `signature`) or "redacted_thinking" (opaque `data`); Gemini's "signature" (a
    `thoughtSignature`, on the part of `call_id`'s function call, or on text when "")."""

    provider: Literal["anthropic", "gemini"]
    kind: Literal["thinking", "redacted_thinking", "signature"] = "thinking"
    text: str = ""
    signature: str = ""
    data: str = ""
    call_id: str = ""


class AssistantMessage(Contract):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    thinking: list[Thinking] = Field(default_factory=list)  # signed reasoning, in the order it came


class ApprovalRecord(Contract):
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


class CallResolution(Contract):
    """A person's decision on a call in doubt (its attempt ended without a result): who, when,
    what. `rerun`: the tool ran again; `result`: the result the person gave (the tool's text);
    `fail`: the model was told the call failed, with `reason`."""

    call_id: str
    tool: str
    action: Literal["rerun", "result", "fail"]
    by: str
    at: datetime
    doubt: int = 1  # which time this call was in doubt (a rerun may end in doubt again)
    result: str | None = None
    reason: str = ""


class AnswerRecord(Contract):
    """A person's answer to an `ask_person` call (or the run's, when nobody answered in time):
    who, when, what. `choice`: the 1-based number of the chosen choice, when there were choices."""

    call_id: str
    question: str
    answer: str  # the text the model reads (a choice's own text, when one was chosen)
    choice: int | None = None
    by: str
    at: datetime
    automatic: bool = False  # the run's own: the question timed out and its default was given


class ToolMessage(Contract):
    """A tool call's result as the model will read it (errors included, flagged)."""

    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    approval: ApprovalRecord | None = None  # never sent to the model; kept for the record
    resolution: CallResolution | None = None  # a person decided it after it was in doubt (for the record)
    answer: AnswerRecord | None = None  # an `ask_person` call: who answered, when (for the record)


Message = Annotated[UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class Usage(Contract):
    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0  # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to the prompt cache (Anthropic bills them higher)
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
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
            unpriced=self.unpriced + other.unpriced,
        )
