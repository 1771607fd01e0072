"""Online scoring, the run's side (workflows/types/live_scores.py): which completed runs an
agent's evaluators score, and what the ScoreRun is handed. Pure: the workflow starts it.

The share is chosen by the run's id, so the choice is the same on every replay and every worker,
and spread evenly over run ids. Only a run started for the agent is scored: a child run (a
sub-agent as a tool, a handoff's tree) is part of its parent's run, and an eval's case runs are
scored by their eval."""

from __future__ import annotations

import hashlib

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from durable_agent_runner.evals.from_run import first_prompt
from durable_agent_runner.machine.eval_plan import output_type
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import live_scores as tl


def sampled(run_id: str, share: float) -> bool:
    """True for about `share` (0..1) of run ids: the id's hash, read as a fraction of 2**64, below it."""
    if share <= 0:
        return False
    if share >= 1:
        return True
    digest = hashlib.sha256(run_id.encode()).digest()[:8]
    return int.from_bytes(digest, "big") / 2**64 < share


def score_input(
    run_id: str, agent: t.AgentSpec, messages: list[t.Message], output: str, output_object: object,
    turns: int, usage: t.Usage, seconds: float, answered_by: str = "",
) -> tl.LiveScoreInput | None:  # fmt: skip
    """What the run's ScoreRun is handed; None when the agent scores no run, or not this one."""
    if not agent.evaluators or not sampled(run_id, agent.eval_sample):
        return None
    typed: JsonValue = to_jsonable_python(output_object) if output_object is not None else None
    schema, type_name = output_type(agent, answered_by or agent.name)
    return tl.LiveScoreInput(
        run_id=run_id, agent=agent.name, prompt=first_prompt(messages), output=output, output_json=typed,
        turns=turns, usage=usage, seconds=round(seconds, 3), evaluators=agent.evaluators, model=agent.model,
        output_schema=schema, output_type_name=type_name,
    )  # fmt: skip
