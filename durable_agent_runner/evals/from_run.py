"""Cases made from recorded runs (`client.py eval add-case DATASET RUN_ID --at-turn N`): the run's
transcript just before model call N, kept in the case itself, so the case still runs when the run
it came from is long gone from Temporal's retention.

An eval runs such a case as a fork of that point (workflows/eval_run.py): the agent under test
starts from the recorded messages, tool results and child runs' answers included, and only the
model is asked again, from call N on. No recorded tool runs a second time."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError, field_validator

from durable_agent_runner.machine.texts import said
from durable_agent_runner.workflows import types as t

MAX_POINT_MESSAGES = 10_000

_TRANSCRIPT: TypeAdapter[list[t.Message]] = TypeAdapter(list[t.Message])


class RunPoint(BaseModel):
    """Where a case came from: run `run_id` before model call `at_turn`, and the transcript the
    model read there (`messages`, in the run's own message shapes, as JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    run_id: str = Field(min_length=1, max_length=1000)
    at_turn: int = Field(ge=1)
    messages: list[JsonValue] = Field(min_length=1, max_length=MAX_POINT_MESSAGES)

    @field_validator("messages")
    @classmethod
    def _messages_are_a_transcript(cls, messages: list[JsonValue]) -> list[JsonValue]:
        try:
            _TRANSCRIPT.validate_python(messages)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"message {where}: {said(first)}") from None
        return messages

    def transcript(self) -> list[t.Message]:
        """The messages as the run's types (checked when the point was made or loaded)."""
        return _TRANSCRIPT.validate_python(self.messages)


def point_of(run_id: str, at_turn: int, messages: list[t.Message]) -> RunPoint:
    return RunPoint(run_id=run_id, at_turn=at_turn, messages=_TRANSCRIPT.dump_python(messages, mode="json"))


def first_prompt(messages: list[t.Message]) -> str:
    """The case's `inputs`: the run's first user message (what evaluators read as the input)."""
    return next((m.content for m in messages if isinstance(m, t.UserMessage)), "")
