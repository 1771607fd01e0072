"""Calls completed from outside (`@tool(completes="outside")`): how such a call waits, the update
that completes it, and what status shows of it (machine/outside.py keeps the run's book of them).

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from durable_agent_runner.machine import bounds
from durable_agent_runner.workflows.types.transcript import Contract

# How long a call waits for its completion when its tool sets no timeout, and the most it may set.
DEFAULT_OUTSIDE_SECONDS = 7 * 24 * 3600.0
MAX_OUTSIDE_SECONDS = 30 * 24 * 3600.0
MAX_FAIL_CHARS = 4000
OnTimeout = Literal["tell_model", "person"]


class OutsideSpec(Contract):
    """How a call of a tool that completes outside waits (`@tool(completes="outside", ...)`): at
    most `timeout_seconds`, then the model is told (`tell_model`) or the call goes to a person, in
    doubt (`person`). `result_schema`: the JSON Schema a completion's result must match (None: any JSON)."""

    timeout_seconds: float = Field(default=DEFAULT_OUTSIDE_SECONDS, gt=0, le=MAX_OUTSIDE_SECONDS)
    on_timeout: OnTimeout = "tell_model"
    result_schema: dict[str, object] | None = None


class PendingOutside(Contract):
    """A call whose tool started the work and returned, waiting for an outside system to complete it."""

    call_id: str
    tool: str
    turn: int
    since: datetime
    deadline: datetime
    started: str = ""  # what the tool's start returned (a job id, …): in the story, not yet the model's
    on_timeout: OnTimeout = "tell_model"


class CompleteCall(Contract):
    """The body of the `complete_call` update: an outside system's completion of a waiting call.
    {"call_id": "call_1_0", "result": "{\"pages\": 12}", "by": "renderer"}   (JSON text)
    {"call_id": "call_1_0", "fail": "the printer is out of paper", "by": "renderer"}"""

    call_id: str = Field(max_length=200)
    result: str | None = Field(default=None, max_length=bounds.MAX_CHARS)
    fail: str | None = Field(default=None, max_length=MAX_FAIL_CHARS)
    by: str = Field(default="outside", max_length=200)

    @model_validator(mode="after")
    def _one(self) -> CompleteCall:
        if (self.result is None) == (self.fail is None):
            raise ValueError("give the completion as a result (JSON text) or as a fail reason, one of them")
        return self


class CompletionRecord(Contract):
    """How a call completed from outside ended: its result or failure, by whom and when; or, with
    `automatic`, no completion came within the tool's timeout."""

    call_id: str
    tool: str
    result: str | None = None  # JSON text, as checked
    fail: str | None = None
    by: str
    at: datetime
    automatic: bool = False


class CompleteReceipt(Contract):
    call_id: str
    outcome: Literal["result", "fail"]
    by: str
    recorded_at: datetime
