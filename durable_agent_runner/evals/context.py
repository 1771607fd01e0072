"""What an evaluator is given and what it gives back: plain pydantic models, so a workflow can
fill the context from a run's result and transcript and pass it to an activity, and record the
result, without either side holding a live object."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

MAX_REASON_CHARS = 2_000  # a reason is a line in a report, not a document


class ToolCallFact(BaseModel):
    """One tool call the run made: its name and its parsed arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class RunFacts(BaseModel):
    """What the run that produced the output cost and did."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0
    tool_calls: list[ToolCallFact] = Field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class EvaluatorContext(BaseModel):
    """One case's run, as every evaluator sees it.

    `output` is the run's final text; `output_json` is that text parsed when it is JSON (an agent
    with an `output_type` answers in JSON), else None. `output_schema` is the agent's
    output_type's JSON schema, when the eval knows it (MatchesSchema uses it by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    case_name: str
    inputs: JsonValue
    output: str
    output_json: JsonValue = None
    expected_output: JsonValue = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    facts: RunFacts = Field(default_factory=RunFacts)
    output_schema: dict[str, JsonValue] | None = None
    output_type_name: str | None = None

    @property
    def output_value(self) -> JsonValue:
        """The output as a value: its parsed JSON when it is JSON, else its text."""
        return self.output if self.output_json is None else self.output_json


class EvaluationReason(BaseModel):
    """A verdict with the reason for it: what a custom evaluator may return instead of a bare value."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    value: bool | float | str
    reason: str | None = None


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text` on one line, at most `limit` characters: what a report and a terminal can show."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class EvaluationResult(BaseModel):
    """One evaluator's verdict on one case: a pass/fail (bool), a score (float) or a label (str),
    with a reason; or `error` (one line) when the evaluator raised or could not run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    value: bool | float | str | None = None
    reason: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _value_or_error(self) -> EvaluationResult:
        if (self.value is None) == (self.error is None):
            raise ValueError("a result has a value or an error, not both and not neither")
        return self

    @property
    def kind(self) -> Literal["pass", "score", "label", "error"]:
        if self.error is not None:
            return "error"
        if isinstance(self.value, bool):
            return "pass"
        return "score" if isinstance(self.value, float | int) else "label"
