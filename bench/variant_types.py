"""Contracts of the bench-only workflow variant (`bench.local_variant`). Pure data, like
`workflows.types`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from durable_agent_runner.workflows.types import AgentSpec, Message, RunInput

VARIANT_WORKFLOW = "bench.AgentRunVariant"
INLINE_MODEL_ACTIVITY = "bench.inline_model_call"

How = Literal["activity", "inline", "local"]


class VariantInput(BaseModel):
    run: RunInput
    # "activity": the product's model activity (reads the transcript by query);
    # "inline": a regular activity given the whole transcript (no query; history grows);
    # "local": a local activity given the transcript inline (a query cannot be answered
    # while the workflow task that waits on a local activity is still open).
    model: How = "activity"
    tools: How = "activity"
    upsert_phase: bool = True  # search attributes and current details per phase, as AgentRun does


class InlineModelCall(BaseModel):
    """The inline model call's input. As a local activity it is not written to history (only
    the result is, in a marker), so history stays flat; as a regular activity it is, every turn."""

    agent: AgentSpec
    messages: list[Message] = Field(default_factory=list)
    model: str
    turn: int


# The rival: the same loop through Temporal's OpenAI Agents integration (bench.rival).
RIVAL_WORKFLOW = "bench.RivalRun"
RIVAL_MODEL_ACTIVITY = "invoke_model_activity"  # the integration's model activity


class RivalInput(BaseModel):
    prompt: str = ""
    model: str = "demo"
    max_turns: int = 10


class RivalResult(BaseModel):
    output: str
    turns: int  # model calls, as RunResult.turns counts them


# Temporal's own floor: the least loop of AgentRun's shape (bench.bare).
BARE_WORKFLOW = "bench.BareLoop"
BARE_MODEL_ACTIVITY = "bench.bare_model"


class BareInput(BaseModel):
    prompt: str = ""
    model: str = "demo"
    max_turns: int = 10


class BareResult(BaseModel):
    turns: int  # model calls, as RunResult.turns counts them
