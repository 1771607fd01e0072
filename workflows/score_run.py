"""ScoreRun: a live run's scores (online scoring, workflows/types/live_scores.py). One scoring
activity, the eval's own (`eval.score`, activities/evals.py), then done: started by a sampled run
as it completes and abandoned by it, so the run's result never waits for its scores, and a
failed scoring never touches the run. Its result is the run's scores: `status`, export and the
console read it by its id, `{run id}.scores`.

Determinism rules for this module: no I/O, no clocks, no randomness (the time scored is the
workflow's own)."""

from __future__ import annotations

from temporalio import workflow

from durable_agent_runner.evals.cases import Case
from durable_agent_runner.evals.registry import EvaluatorSpec
from durable_agent_runner.workflows.eval_cases import score
from durable_agent_runner.workflows.types import evals as te
from durable_agent_runner.workflows.types import live_scores as tl


# Outside temporalio's sandbox, as AgentRun and EvalRun; tests replay it inside.
@workflow.defn(name=tl.SCORE_WORKFLOW, sandboxed=False)
class ScoreRun:
    @workflow.run
    async def run(self, input: tl.LiveScoreInput) -> tl.LiveScores:
        specs = [EvaluatorSpec.model_validate(s) for s in input.evaluators]
        request = te.ScoreInput(
            case=Case(name="live run", inputs=input.prompt),
            evaluators=specs,
            run_id=input.run_id,
            output=input.output,
            output_json=input.output_json,
            turns=input.turns,
            usage=input.usage,
            seconds=input.seconds,
            judge_model=input.model,
            output_schema=input.output_schema,
            output_type_name=input.output_type_name,
        )
        scored = await score(request, f"score run {input.run_id[:120]}")
        return tl.LiveScores(run_id=input.run_id, scores=scored.scores, usage=scored.usage, scored_at=workflow.now())
