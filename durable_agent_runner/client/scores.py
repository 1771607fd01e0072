"""A run's online scores (workflows/types/live_scores.py): the result of its ScoreRun, read by id,
for `status`, export and the console. A run that was not sampled has none."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from durable_agent_runner.evals.context import EvaluationResult
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import live_scores as tl

READ = timedelta(seconds=5)


class RunScores(BaseModel):
    """`scoring` while its ScoreRun runs, `scored` with the scores, `failed` when it ended without."""

    state: Literal["scoring", "scored", "failed"]
    scores: list[EvaluationResult] = Field(default_factory=list)
    usage: t.Usage = Field(default_factory=t.Usage)  # the LLM judges' calls, not the run's
    scored_at: str | None = None
    error: str | None = None


async def scores_of(client: Client, run_id: str) -> RunScores | None:
    """The run's scores; None when it was not sampled (no ScoreRun), or they cannot be read now."""
    handle = client.get_workflow_handle(tl.scores_id(run_id), result_type=tl.LiveScores)
    try:
        desc = await handle.describe(rpc_timeout=READ)
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return RunScores(state="scoring")
        done: tl.LiveScores = await handle.result(rpc_timeout=READ)
    except RPCError:  # not sampled (not found), or the server is slow: status goes on without them
        return None
    except WorkflowFailureError as err:
        return RunScores(state="failed", error=str(err.cause or err)[:500])
    at = done.scored_at.isoformat() if done.scored_at else None
    return RunScores(state="scored", scores=done.scores, usage=done.usage, scored_at=at)


def score_line(scores: RunScores) -> str:
    """`Contains ✓ · MaxTurns ✗ (4 turns > 3) · judge 0.8` — what `status` and the console show."""
    if scores.state != "scored":
        return scores.state + (f": {scores.error}" if scores.error else "")
    parts = []
    for r in scores.scores:
        if r.error:
            parts.append(f"{r.name} errored ({r.error[:80]})")
        elif isinstance(r.value, bool):
            parts.append(f"{r.name} {'✓' if r.value else '✗'}" + (f" ({r.reason[:80]})" if r.reason else ""))
        else:
            parts.append(f"{r.name} {r.value}")
    return " · ".join(parts) or "no scores"
