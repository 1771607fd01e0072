"""Datasets and cases: plain pydantic models, so a dataset is a payload a workflow can carry.

A case's evaluators are specs (names with arguments, registry.py), not live objects; in code you
may pass evaluator instances (`Contains(value="x")`) and they are stored as their specs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from .from_run import RunPoint
from .registry import EvaluatorSpec

MAX_CASES = 10_000
MAX_NAME_CHARS = 200


class Case(BaseModel):
    """One case: its `inputs` (text, or a JSON value for an agent with typed input), the
    `expected_output` if any, free `metadata`, `evaluators` run besides the dataset's, and
    `from_run` for a case made from a recorded run (this project's own field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    inputs: JsonValue
    expected_output: JsonValue = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    evaluators: list[EvaluatorSpec] = Field(default_factory=list)
    # A case made from a recorded run (from_run.py): it starts there, and only the model is asked again.
    from_run: RunPoint | None = None

    @field_validator("metadata", mode="before")
    @classmethod
    def _null_metadata(cls, v: object) -> object:
        return {} if v is None else v  # pydantic-evals writes `metadata: null` for a case without


class Dataset(BaseModel):
    """A named list of cases, unique by name, and the evaluators every case runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    cases: list[Case] = Field(max_length=MAX_CASES)
    evaluators: list[EvaluatorSpec] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _name_unnamed_cases(cls, data: Any) -> Any:
        """pydantic-evals' cases may have no name: such a case is named `Case N` (its 1-based
        place), as pydantic-evals' reports name it."""
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            cases = [
                {**c, "name": f"Case {i}"} if isinstance(c, dict) and c.get("name") is None else c
                for i, c in enumerate(data["cases"], 1)
            ]
            data = {**data, "cases": cases}
        return data

    @field_validator("cases")
    @classmethod
    def _unique_names(cls, cases: list[Case]) -> list[Case]:
        seen: set[str] = set()
        for case in cases:
            if case.name in seen:
                raise ValueError(f"two cases are named {case.name!r}: a case's name is its key in reports")
            seen.add(case.name)
        return cases

    def case(self, name: str) -> Case:
        """The case named `name`. Raises KeyError."""
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)
