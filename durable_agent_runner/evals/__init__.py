"""Evals: datasets of cases and the evaluators that score an agent's output on them.

What is here is pure: cases and datasets in code and in files (pydantic-evals' layout), the
built-in and custom evaluators, the LLM judge's prompt and verdict, and `evaluate_case`. A durable
eval (workflows/eval_run.py) runs each case as a child run and scores it in the scoring activity
(activities/evals.py); docs/evals.md and docs/eval-runs.md.

Each name is imported on first use (PEP 562): a process that needs one contract (the CLI, a
workflow's payloads) does not load every evaluator, and jsonschema, with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Where `__getattr__` looks for a name, cheapest first: a contract never loads the evaluators.
_MODULES = ("cases", "context", "registry", "files", "evaluators", "judge", "scoring")


def __getattr__(name: str) -> Any:
    if name in __all__:
        for module in _MODULES:
            found = importlib.import_module(f".{module}", __name__).__dict__.get(name)
            if found is not None:
                globals()[name] = found  # later reads skip this function
                return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
