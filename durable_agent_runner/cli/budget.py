"""What `client.py status` shows of a run's budgets: for the run (its ledger: spent, reserved,
left) and for its tree (the run and every child run in flight below it, each asked for its own).

Children are asked by their workflow id, at most MAX_CHILDREN per run and MAX_DEPTH deep; a child
that does not answer counts with the share its parent holds for it."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.service import RPCError

from durable_agent_runner.cli.common import UsageError
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


def render_budget(b: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for scope in ("run", "tree"):
        for kind in KINDS:
            line = b[scope][kind]
            if line is None:
                continue
            if kind == "tokens":
                text = (
                    f"{line['spent']:.0f} spent · {line['reserved']:.0f} reserved · "
                    f"{line['left']:.0f} left of {line['limit']:.0f} tokens"
                )
            else:
                text = (
                    f"${line['spent']:.4f} spent · ${line['reserved']:.4f} reserved · "
                    f"${line['left']:.4f} left of ${line['limit']:.4f}"
                )
            lines.append(f"budget:  {scope:<4} {text}")
    if b["on_budget"] == "pause":
        lines.append("         on_budget=pause: raise it with `client.py resume RUN_ID --add-usd X | --add-tokens N`")
    for c in b["children"]:
        share = " · ".join(
            x for x in (f"{c['tokens']} tokens" if c["tokens"] is not None else "",
                        f"${c['usd']:.4f}" if c["usd"] is not None else "") if x
        )  # fmt: skip
        lines.append(f"child:   {c['child_id']} (its share: {share or 'none'})")
    return lines


def budget_raise(args: argparse.Namespace) -> t.BudgetRaise:
    """`--add-usd` / `--add-tokens` as a bounded raise: NaN, ∞, ≤ 0 or too large is a UsageError."""
    try:
        return t.BudgetRaise(add_tokens=args.add_tokens, add_usd=args.add_usd)
    except ValidationError as err:
        first = err.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "--add-usd/--add-tokens"
        raise UsageError(f"{flag}: {first['msg']}") from None
