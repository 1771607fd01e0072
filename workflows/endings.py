"""How a run ends, besides its last event, its phase and its result (machine/progress.py
`result`): the usage a cancelled child tells its parent, and a sampled run's scores (online
scoring, started beside the result and never in its way).

Determinism rules as for all of workflows/: no I/O, no clocks, no randomness, no threads.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.machine import live_scores
from durable_agent_runner.machine.rules import Done
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import live_scores as tl


async def score(s: RunState, agent: t.AgentSpec, done: Done) -> None:
    """A sampled run's scores (online scoring): a ScoreRun started, and abandoned, so the
    result waits for its start to be recorded, never for its scores. Nothing it does fails
    the run. No patch: only a run whose frozen agent has evaluators takes this path, and no
    code before it froze any."""
    info = workflow.info()
    seconds = (workflow.now() - info.start_time).total_seconds()
    request = live_scores.score_input(
        info.workflow_id,
        agent,
        s.messages,
        done.output,
        done.output_object,
        s.turn,
        s.usage,
        seconds,
        answered_by=s.agent_now.name,
    )
    if request is None:
        return
    try:
        await workflow.start_child_workflow(
            tl.SCORE_WORKFLOW,
            request,
            id=tl.scores_id(info.workflow_id),
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"scores of {info.workflow_id[:200]}",
        )
    except Exception as err:  # already scored (a reset run), or refused: the answer stands
        workflow.logger.warning("scores of %s not started: %s", info.workflow_id, err)


async def tell_parent(s: RunState) -> None:
    """A cancelled child run tells its parent what it spent (a failed one says so in its error)."""
    parent = workflow.info().parent
    if parent is None or s.agent is None:
        return
    ledger = t.ChildUsage(child_id=workflow.info().workflow_id, usage_by_agent=s.usage_by_agent)
    try:
        await workflow.get_external_workflow_handle(parent.workflow_id).signal(t.CHILD_USAGE_SIGNAL, ledger)
    except Exception:  # the parent has ended: nobody is left to count it
        workflow.logger.info("could not tell parent %s this child's usage", parent.workflow_id)
