"""Online scoring (issue 34, item 6): an agent's evaluators run on a share of its live runs
(`Agent(evaluators=[...], eval_sample=0.1)`). A completed run that is sampled starts a ScoreRun
(workflows/score_run.py) under the id `{run id}.scores`, abandoned when the run ends, so the run's
result never waits for its scores. Pure data, safe inside the workflow sandbox."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, JsonValue

from durable_agent_runner.evals.context import EvaluationResult
from durable_agent_runner.workflows.types.transcript import Contract, Usage

SCORE_WORKFLOW = "ScoreRun"
SCORES_SUFFIX = ".scores"  # a run's scores: the ScoreRun of id `{run id}.scores`


def scores_id(run_id: str) -> str:
    return run_id + SCORES_SUFFIX


class LiveScoreInput(Contract):
    """What a sampled run hands its ScoreRun: its answer, what it spent, and the evaluators."""

    run_id: str
    agent: str
    prompt: str
    output: str
    output_json: JsonValue = None
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    evaluators: list[JsonValue]  # the agent's, as specs (evals/registry.py's short forms)
    model: str | None = None  # an LLMJudge without a model of its own asks the agent's
    output_schema: dict[str, JsonValue] | None = None  # the answering agent's typed output, if any
    output_type_name: str | None = None


class LiveScores(Contract):
    """A run's scores: what `status`, export, the console and the scoring span show."""

    run_id: str
    scores: list[EvaluationResult] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)  # what the LLM judges spent (not the run's)
    scored_at: datetime | None = None
