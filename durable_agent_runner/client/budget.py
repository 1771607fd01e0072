"""A run's budgets as `RunHandle.status()` (and `client.py status`) show them: for the run (its
ledger: spent, reserved, left) and for its tree (the run and every child run in flight below it,
each asked for its own).

Children are asked by their workflow id, at most MAX_CHILDREN per run and MAX_DEPTH deep; a child
that does not answer counts with the share its parent holds for it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from durable_agent_runner.workflows import types as t

MAX_CHILDREN = 20
MAX_DEPTH = 3
QUERY_TIMEOUT = timedelta(seconds=3)
KINDS = ("tokens", "usd")


def _line(line: t.BudgetLine | None) -> dict[str, float] | None:
    return None if line is None else line.model_dump()


async def _tree_spent(client: Client, status: t.RunStatus, depth: int) -> dict[str, float]:
    """What the run and its children in flight spent, by kind (ended children are in its usage)."""
    spent = {"tokens": float(status.usage.total_tokens), "usd": status.usage.cost_usd}
    budget = status.budget
    if budget is None or depth >= MAX_DEPTH:
        return spent
    for grant in budget.children[:MAX_CHILDREN]:
        try:
            child: t.RunStatus = await client.get_workflow_handle(grant.child_id).query(
                t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT
            )
        except (RPCError, Exception):  # not answering (no worker, ended and gone): nothing known beyond its share
            continue
        below = await _tree_spent(client, child, depth + 1)
        for kind in KINDS:
            spent[kind] += below[kind]
    return spent


async def budget_view(client: Client, status: t.RunStatus) -> dict[str, Any] | None:
    """The `budget` object of `status --json`: {"on_budget", "run": {"tokens": line, "usd": line},
    "tree": {...}, "children": [...]}, each line {limit, spent, reserved, left}; the tree's
    reserved is what its runs hold and may still spend (limit − tree spent − left)."""
    budget = status.budget
    if budget is None:
        return None
    spent = await _tree_spent(client, status, 0)
    run = {"tokens": _line(budget.tokens), "usd": _line(budget.usd)}
    tree: dict[str, dict[str, float] | None] = {}
    for kind in KINDS:
        line = getattr(budget, kind)
        if line is None:
            tree[kind] = None
            continue
        reserved = max(line.limit - spent[kind] - line.left, 0.0)
        tree[kind] = {"limit": line.limit, "spent": spent[kind], "reserved": reserved, "left": line.left}
    children = [c.model_dump() for c in budget.children]
    return {"on_budget": budget.on_budget, "run": run, "tree": tree, "children": children}
