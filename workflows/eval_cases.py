"""One case of an eval, as steps of EvalRun (eval_run.py): its run, a child AgentRun, and its
scoring, an activity (or, for cheap pure built-ins, none: machine/eval_plan.py). ScoreRun
(score_run.py) scores a live run with the same activity.

`start_score` schedules the scoring at once and returns its handle: a lane (eval_run.py) starts a
case's scoring and its next case in one step, before it yields.

Determinism rules for this module: no I/O, no clocks, no randomness. Time comes from `workflow.now()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ActivityHandle, ParentClosePolicy

from durable_agent_runner.evals.context import EvaluationResult, one_line
from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.machine.calls import BUDGET_SPENT
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

SCORE_ATTEMPT = timedelta(seconds=300)  # an LLM judge's model call included
# The scoring activity beats every 2 s (activities/model.heartbeating), as a model call does: a
# worker that died mid-scoring is noticed within 10 s (eval-score-beat-1.4.5), as a model call's.
SCORE_BEAT = timedelta(seconds=10)
SCORE_BEAT_BEFORE = timedelta(seconds=30)  # of evals started before the patch, and of ScoreRun
SCORE_RETRY = RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=30))

# How a case's run ended without a result: its end, what it spent.
Ended = tuple[te.CaseEnd, t.Usage]


def start_score(request: te.ScoreInput, summary: str, beat: timedelta = SCORE_BEAT_BEFORE) -> ActivityHandle[te.Scored]:
    """The scoring activity, scheduled now. `beat`: its heartbeat timeout, how soon a dead
    worker's scoring is taken up again."""
    return workflow.start_activity(
        te.EVAL_SCORE_ACTIVITY,
        request,
        result_type=te.Scored,
        start_to_close_timeout=SCORE_ATTEMPT,
        heartbeat_timeout=beat,
        retry_policy=SCORE_RETRY,
        summary=summary,
    )


async def scored(handle: ActivityHandle[te.Scored]) -> te.Scored:
    """The scoring's scores; a scoring that fails for good is one errored score, never the
    caller's failure."""
    try:
        return await handle
    except ActivityError as err:
        why = err.cause.message if isinstance(err.cause, FailureError) else str(err)
        return te.Scored(scores=[EvaluationResult(name="scoring", error=one_line(f"scoring failed: {why}", 500))])


async def score(request: te.ScoreInput, summary: str, beat: timedelta = SCORE_BEAT_BEFORE) -> te.Scored:
    """The scoring activity's scores (an eval's case, or a live run's: score_run.py)."""
    return await scored(start_score(request, summary, beat))


async def child(
    input: te.EvalInput, spec: t.AgentSpec, slot: plan.Slot, share: t.Budget | None
) -> tuple[t.RunResult | Ended, str | None]:
    """The case's run: its result, or how it ended without one, what it spent and why."""
    name = slot.case.name
    try:
        result: t.RunResult = await workflow.execute_child_workflow(
            t.WORKFLOW_NAME,
            plan.run_input(slot.case, spec, share),
            id=slot.run_id,
            result_type=t.RunResult,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"eval case {name[:80]} #{slot.repeat}",
        )
        return result, None
    except WorkflowAlreadyStartedError:
        why = f"a run with id {slot.run_id} exists that this eval did not start"
        return ("failed", t.Usage()), why
    except ChildWorkflowError as err:
        cause = err.cause
        why = cause.message if isinstance(cause, FailureError) else err.message
        if isinstance(cause, CancelledError):
            return ("cancelled", t.Usage()), "cancelled"
        kind = (cause.type if isinstance(cause, ApplicationError) else None) or type(cause).__name__
        usage = t.Usage()
        if isinstance(cause, ApplicationError) and cause.details:
            try:
                for part in t.ChildUsage.model_validate(cause.details[0]).usage_by_agent.values():
                    usage = usage + part
            except ValueError:
                pass  # a failure raised elsewhere: what it spent is not known
        end: te.CaseEnd = "budget" if kind in BUDGET_SPENT else "failed"
        return (end, usage), one_line(f"{kind}: {why}", 500)


@dataclass(frozen=True)
class Ran:
    """A case whose run has ended: its row, less its scores."""

    slot: plan.Slot
    began: datetime
    end: te.CaseEnd
    error: str | None
    output: str = ""
    turns: int = 0
    usage: t.Usage = field(default_factory=t.Usage)
    answered_by: str = ""


def ran(slot: plan.Slot, began: datetime, spec: t.AgentSpec, result: t.RunResult | Ended, error: str | None) -> Ran:
    """How the case's run ended, from what `child` returned."""
    if isinstance(result, t.RunResult):
        return Ran(slot, began, "completed", error, result.output, result.turns, result.usage, result.agent)
    end, usage = result
    return Ran(slot, began, end, error, usage=usage, answered_by=spec.name)


def score_request(input: te.EvalInput, spec: t.AgentSpec, r: Ran) -> te.ScoreInput:
    """What the case's scoring is given: its answer, its run's facts, the eval's evaluators."""
    schema, type_name = plan.output_type(spec, r.answered_by)
    return te.ScoreInput(
        case=r.slot.case,
        evaluators=input.dataset.evaluators,
        run_id=r.slot.run_id,
        output=r.output,
        output_json=plan.output_json(r.output),
        turns=r.turns,
        usage=r.usage,
        seconds=round((workflow.now() - r.began).total_seconds(), 3),
        judge_model=input.model,
        output_schema=schema,
        output_type_name=type_name,
    )


def summary(slot: plan.Slot) -> str:
    """The scoring activity's summary in the Web UI."""
    return f"score case {slot.case.name[:80]} #{slot.repeat}"


def case_result(r: Ran, got: te.Scored) -> te.CaseResult:
    """The case's row: how its run ended, its scores, whether it passed, what it spent."""
    return te.CaseResult(
        case=r.slot.case.name,
        repeat=r.slot.repeat,
        run_id=r.slot.run_id,
        end=r.end,
        error=r.error,
        output=r.output[: te.MAX_OUTPUT_CHARS],
        scores=got.scores,
        passed=plan.passed(got.scores, r.end),
        turns=r.turns,
        usage=r.usage + got.usage,
        seconds=round((workflow.now() - r.began).total_seconds(), 3),
        started_at=r.began,
    )
