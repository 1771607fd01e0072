"""A durable eval: the EvalRun workflow's contracts (workflows/eval_run.py). An eval runs each case
of a dataset (× repeat) as a child run of one agent, scores each finished case in an activity, and
keeps one small result per case. Pure data, safe inside the workflow sandbox. A field added after
a release carries a default, so older histories still decode."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue

from durable_agent_runner.evals.cases import Case, Dataset
from durable_agent_runner.evals.context import EvaluationResult
from durable_agent_runner.evals.registry import EvaluatorSpec
from durable_agent_runner.workflows.types.agents import AgentSpec
from durable_agent_runner.workflows.types.budget import (
    MAX_BUDGET_TOKENS,
    MAX_BUDGET_USD,
    Budget,
    BudgetStatus,
    OnBudget,
)
from durable_agent_runner.workflows.types.transcript import Contract, Usage

EVAL_WORKFLOW = "EvalRun"
EVAL_SCORE_ACTIVITY = "eval.score"
EVAL_STATUS_QUERY = "eval.status"
EVAL_RESUME_UPDATE = "eval.resume"  # a person raises a paused eval's budget (BudgetRaise)
# Bounds: an eval's input (its dataset) rides in its history and through each continue-as-new.
MAX_EVAL_RUNS = 2_000  # cases × repeat
MAX_REPEAT = 20
MAX_CONCURRENCY = 50
MAX_OUTPUT_CHARS = 2_000  # of a case's answer kept in its result: a report shows a line of it

EvalPhase = Literal["running", "paused", "completed", "failed", "cancelled"]
EVAL_ENDED: frozenset[EvalPhase] = frozenset({"completed", "failed", "cancelled"})  # an eval's final phases
# How a case's run ended: answered, failed (its error), its budget spent, or cancelled.
CaseEnd = Literal["completed", "failed", "budget", "cancelled"]


class CaseResult(Contract):
    """One case's run and scores: what a report's row shows, small enough to carry by the hundred."""

    case: str
    repeat: int = 1
    run_id: str
    end: CaseEnd = "completed"
    error: str | None = None  # why the run ended without an answer
    output: str = ""  # its answer, cut at MAX_OUTPUT_CHARS
    scores: list[EvaluationResult] = Field(default_factory=list)
    passed: bool = False
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)  # the run's, its children's and the judge's
    seconds: float = 0.0  # from the case's start to its scores
    started_at: datetime | None = None


class EvalCarry(Contract):
    """What an eval carries through continue-as-new: the finished cases, the frozen agent, the budget."""

    results: list[CaseResult] = Field(default_factory=list)
    budget: Budget | None = None
    agent_version: str = ""
    started_at: datetime | None = None
    frozen: AgentSpec | None = None  # the agent, resolved once: every case runs this version


class EvalInput(Contract):
    """The input of an EvalRun: the dataset (inline, or loaded by the client from its file), the
    agent every case runs, how many at once, how often each, what all of them may spend, and
    the eval a report compares with. `carry`: set only by the eval itself (continue-as-new)."""

    dataset: Dataset
    agent: str = Field(min_length=1, max_length=200)
    concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)
    repeat: int = Field(default=1, ge=1, le=MAX_REPEAT)
    # What all cases may spend (their runs and the judges' calls). On overrun the eval pauses or
    # fails the cases left, as `on_budget` says (None: as the agent's own on_budget says).
    budget_usd: float | None = Field(default=None, ge=0, le=MAX_BUDGET_USD, allow_inf_nan=False)
    budget_tokens: int | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)
    on_budget: OnBudget | None = None
    model: str | None = Field(default=None, max_length=200)  # overrides the agent's, for every case
    baseline: str | None = Field(default=None, max_length=1000)  # an eval id, for the report
    agent_wait_seconds: float = Field(default=120.0, gt=0, le=3600)
    # Score a case whose evaluators are all cheap pure built-ins (evaluators.INLINE) in the eval's
    # workflow task, with no scoring activity: about half the eval's events. Off: every case is
    # scored by the activity, its scores recorded in history as that activity's result.
    inline_scoring: bool = False
    carry: EvalCarry | None = None


class ScoreInput(Contract):
    """The scoring activity's input: one finished case and the evaluators it runs."""

    case: Case
    evaluators: list[EvaluatorSpec] = Field(default_factory=list)  # the dataset's; the case's own ride in `case`
    run_id: str
    output: str
    output_json: JsonValue = None
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    judge_model: str | None = None  # an LLMJudge without a model of its own asks this one (None: the worker's)
    # The answering agent's typed output, for MatchesSchema and IsInstance (None: it answers text).
    output_schema: dict[str, JsonValue] | None = None
    output_type_name: str | None = None


class Scored(Contract):
    """The scoring activity's result: the scores, and what the LLM judges' calls spent."""

    scores: list[EvaluationResult] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class EvalStatus(Contract):
    """The `eval.status` query: the eval's progress and the results so far."""

    eval_id: str
    dataset: str
    agent: str
    agent_version: str = ""
    phase: EvalPhase = "running"
    why: str = ""  # paused on budget, failed: the line that says so
    total: int = 0
    done: int = 0
    passed: int = 0
    failed: int = 0
    running: list[str] = Field(default_factory=list)  # run ids of the cases whose run goes on
    # Run ids of the cases whose run ended, being scored (1.4.4): they take no `concurrency` place,
    # and what their runs spent is in `usage` already.
    scoring: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)  # the finished cases' and the scoring cases' runs
    budget: BudgetStatus | None = None
    baseline: str | None = None
    concurrency: int = 1
    repeat: int = 1
    started_at: datetime | None = None
    results: list[CaseResult] = Field(default_factory=list)
    # The cases in flight that wait for a person (an approval, a call in doubt, a pause): the
    # client fills it from the runs' search attributes; the workflow cannot see its children's.
    waiting: list[str] = Field(default_factory=list)
    # What the cases in flight spent so far (`usage` counts finished cases), as the client reads
    # it from their search attributes, a moment behind.
    in_flight_tokens: int = 0
    in_flight_usd: float = 0.0
    # What the eval waits for that no worker takes (its agent's resolve, a case's scoring), each
    # {queue, waiting, message}: the client fills it from the eval's description (client/stuck.py).
    unserved: list[dict[str, str]] = Field(default_factory=list)


class EvalResult(Contract):
    """What an EvalRun returns: its final status, results included."""

    status: EvalStatus


__all__ = [
    "EVAL_ENDED",
    "EVAL_RESUME_UPDATE",
    "EVAL_SCORE_ACTIVITY",
    "EVAL_STATUS_QUERY",
    "EVAL_WORKFLOW",
    "MAX_CONCURRENCY",
    "MAX_EVAL_RUNS",
    "MAX_OUTPUT_CHARS",
    "MAX_REPEAT",
    "AgentSpec",
    "Budget",
    "BudgetStatus",
    "CaseEnd",
    "CaseResult",
    "EvalCarry",
    "EvalInput",
    "EvalPhase",
    "EvalResult",
    "EvalStatus",
    "EvaluationResult",
    "JsonValue",
    "OnBudget",
    "ScoreInput",
    "Scored",
    "Usage",
]
