"""A session's messages, their exchanges and what carries them across continue-as-new.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from durable_agent_runner.workflows.types.control import MAX_MESSAGE_CHARS
from durable_agent_runner.workflows.types.transcript import Contract, Usage


class SessionMessage(Contract):
    """A message sent to a session: the `session.send` update's body.
    {"text": "and tomorrow?", "by": "alice", "message_id": "7f3c…"}"""

    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    by: str = Field(default="someone", max_length=200)
    # The sender's id for this message: sending it again (a retry after a timeout) counts once.
    message_id: str = Field(default="", max_length=200)


class MessageReceipt(Contract):
    message: int  # K: this message's number in the session, from 1
    queued: int  # messages queued ahead of it (0: it is answered next, or now)
    steer: bool = False  # it joins the answer in progress instead of waiting its turn
    duplicate: bool = False  # the same message_id was sent before: nothing new was recorded


class EndSession(Contract):
    by: str = Field(default="someone", max_length=200)
    reason: str = Field(default="", max_length=1000)


class EndReceipt(Contract):
    messages: int  # messages received in all
    unanswered: int  # accepted messages still to be answered before the run ends


class Queued(Contract):
    """An accepted message not yet answered (carried across continue-as-new)."""

    message: int
    text: str
    by: str
    at: datetime
    message_id: str = ""


class Exchange(Contract):
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


class ExchangeSpan(Contract):
    """Exchanges from message `first` on were answered in execution `execution` (a run id)."""

    first: int
    execution: str


class SessionCarry(Contract):
    """A session's state across continue-as-new: the queue whole, the last exchanges whole, and
    where the older ones are held (each execution still answers queries after it closes)."""

    messages: int = 0  # received so far
    queue: list[Queued] = Field(default_factory=list)
    # The most recent exchanges; the last one is still being answered when `finished` is None.
    exchanges: list[Exchange] = Field(default_factory=list)
    spans: list[ExchangeSpan] = Field(default_factory=list)
    recent: dict[str, int] = Field(default_factory=dict)  # message_id → K, for the latest ids (bounded)
    recent_texts: dict[str, str] = Field(default_factory=dict)  # message_id → a digest of its text
    ending: EndSession | None = None
    compactions: int = 0
    idle_since: datetime | None = None


class ExchangeQuery(Contract):
    message: int = 0  # K; 0: the last exchange


class ExchangeAnswer(Contract):
    exchange: Exchange | None = None
    messages: int = 0  # received so far
    # When message K was answered in an earlier execution: its run id, to query there.
    execution: str | None = None
