"""Scoring one case: every evaluator of the dataset and of the case, each on its own, so one
that raises marks its own result errored (with the reason, one line) and never the others."""

from __future__ import annotations

from collections.abc import Mapping

from .cases import Case, Dataset
from .context import EvaluationReason, EvaluationResult, EvaluatorContext, one_line
from .judge import LLMJudge, parse_verdict
from .registry import EvaluatorSpec, EvaluatorSpecError, build


def run_evaluator(spec: EvaluatorSpec, ctx: EvaluatorContext, judge_reply: str | None = None) -> list[EvaluationResult]:
    """One evaluator's results on one case (an LLM judge gives up to two: pass and score).
    `judge_reply` is the judge model's reply, for an LLMJudge. Never raises for the evaluator."""
    name = spec.label()
    try:
        evaluator = build(spec)
    except EvaluatorSpecError as err:
        return [EvaluationResult(name=name, error=str(err))]
    if isinstance(evaluator, LLMJudge):
        if judge_reply is None:
            return [EvaluationResult(name=name, error="LLM judge not run: no reply from its model")]
        return parse_verdict(evaluator, name, judge_reply)
    try:
        out = evaluator.evaluate(ctx)
    except Exception as err:  # an evaluator's own fault is its result's, never the eval's
        return [EvaluationResult(name=name, error=one_line(f"{type(err).__name__}: {err}", 500))]
    return [_result(name, out)]


def _result(name: str, out: object) -> EvaluationResult:
    reason = None
    if isinstance(out, EvaluationReason):
        reason = one_line(out.reason) if out.reason else None
        out = out.value
    if isinstance(out, bool | str):
        return EvaluationResult(name=name, value=out, reason=reason)
    if isinstance(out, int | float):
        return EvaluationResult(name=name, value=float(out), reason=reason)
    return EvaluationResult(
        name=name, error=f"returned a {type(out).__name__}: an evaluator returns a bool, a number or a str"
    )


def evaluate_case(
    case: Case, dataset: Dataset, ctx: EvaluatorContext, judge_replies: Mapping[int, str] | None = None
) -> list[EvaluationResult]:
    """Every result for `case`: the dataset's evaluators, then the case's own, in order.
    `judge_replies` maps an evaluator's place in that order to its judge model's reply."""
    specs = [*dataset.evaluators, *case.evaluators]
    replies = judge_replies or {}
    return [r for i, spec in enumerate(specs) for r in run_evaluator(spec, ctx, replies.get(i))]
