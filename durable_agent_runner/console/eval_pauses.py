"""An eval paused on its budget (workflows/eval_run.py) as the console shows it: a row of the inbox,
a person's to-do list, with what it has spent against its limit and a link to its page, where the
raise form is (views_evals.raise_form; the raise goes through the client's `EvalHandle.resume`).

The inbox finds them as the evals page lists evals (the visibility store: at most INBOX_EVALS,
those whose AgentPhase is paused) and reads each as its page does (`EvalHandle.status`), within the
inbox's bound: one no worker answers for in time is listed with what its search attributes say it
spent, its limit unknown."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError
from durable_agent_runner.client.evals import EvalRow
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

INBOX_EVALS = 20  # paused evals the inbox reads, newest first


@dataclass
class EvalPause:
    """An eval paused on its budget, waiting for a person to raise it (or cancel it)."""

    row: EvalRow  # from the visibility store: its spend a moment behind
    status: te.EvalStatus | None  # as its page reads it; None: no worker answered in time

    @property
    def eval_id(self) -> str:
        return self.row.eval_id

    @property
    def key(self) -> str:  # paused again after a raise: a new row (its limits moved)
        budget = self.status.budget if self.status else None
        limits = "-".join(f"{line.limit:g}" for line in (budget.tokens, budget.usd) if line) if budget else ""
        return f"eval/{self.eval_id}/budget-{limits}"

    @property
    def since(self) -> datetime:  # when the eval started: the inbox is oldest first
        return datetime.fromisoformat(self.row.started_at) if self.row.started_at else datetime.min.replace(tzinfo=UTC)


def spent_line(budget: t.BudgetStatus | None) -> str:
    """`3,000 of 2,500 tokens spent · $0.0012 of $0.0010 spent`: each kind of budget the eval has."""
    lines = []
    if budget is not None and budget.tokens is not None:
        lines.append(f"{budget.tokens.spent:,.0f} of {budget.tokens.limit:,.0f} tokens spent")
    if budget is not None and budget.usd is not None:
        lines.append(f"${budget.usd.spent:,.4f} of ${budget.usd.limit:,.4f} spent")
    return " · ".join(lines) or "no budget"


async def eval_pause(client: AgentClient, row: EvalRow, wait: float) -> list[EvalPause]:
    """The eval of `row` if it is still paused on its budget (none if it has gone on or ended since
    the list was read); with no status when no worker answered within `wait` seconds."""
    try:
        async with asyncio.timeout(wait):
            status = await client.evals.get(row.eval_id).status()
    except AgentRunError:  # failed, cancelled or gone since it was listed
        return []
    except (TimeoutError, RPCError, WorkflowQueryFailedError):
        return [EvalPause(row, None)]
    return [EvalPause(row, status)] if status.phase == "paused" else []
