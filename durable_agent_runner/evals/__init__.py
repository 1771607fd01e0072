"""Evals: datasets of cases and the evaluators that score an agent's output on them.

What is here is pure: cases and datasets in code and in files (pydantic-evals' layout), the
built-in and custom evaluators, the LLM judge's prompt and verdict, and `evaluate_case`. A durable
eval (workflows/eval_run.py) runs each case as a child run and scores it in the scoring activity
(activities/evals.py); docs/evals.md and docs/eval-runs.md."""

from .cases import MAX_CASES, Case, Dataset
from .context import EvaluationReason, EvaluationResult, EvaluatorContext, RunFacts, ToolCallFact
from .evaluators import (
    CalledTool,
    Contains,
    Equals,
    EqualsExpected,
    IsInstance,
    MatchesSchema,
    MaxCostUSD,
    MaxDuration,
    MaxSeconds,
    MaxTokens,
    MaxTurns,
    Regex,
)
from .files import MAX_FILE_BYTES, DatasetError, dataset_from_value, dataset_to_value, load_dataset, save_dataset
from .judge import JudgeRequest, LLMJudge, judge_request, parse_verdict
from .registry import Evaluator, EvaluatorSpec, EvaluatorSpecError, build, register, registered, to_spec
from .scoring import evaluate_case, run_evaluator

__all__ = [
    "MAX_CASES",
    "MAX_FILE_BYTES",
    "CalledTool",
    "Case",
    "Contains",
    "Dataset",
    "DatasetError",
    "Equals",
    "EqualsExpected",
    "EvaluationReason",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "EvaluatorSpec",
    "EvaluatorSpecError",
    "IsInstance",
    "JudgeRequest",
    "LLMJudge",
    "MatchesSchema",
    "MaxCostUSD",
    "MaxDuration",
    "MaxSeconds",
    "MaxTokens",
    "MaxTurns",
    "Regex",
    "RunFacts",
    "ToolCallFact",
    "build",
    "dataset_from_value",
    "dataset_to_value",
    "evaluate_case",
    "judge_request",
    "load_dataset",
    "parse_verdict",
    "register",
    "registered",
    "run_evaluator",
    "save_dataset",
    "to_spec",
]
