"""What `client.py status` shows of a run's budgets (gathered by durable_agent_runner/client/budget.py),
the way on for a session's message that failed on its budget, and a raise (`resume --add-usd /
--add-tokens`, chat's `/raise`) parsed at the boundary and said back."""

from __future__ import annotations

import argparse
from typing import Any

from durable_agent_runner.cli.common import UsageError
from durable_agent_runner.client import checks
from durable_agent_runner.client.errors import cli
from durable_agent_runner.config.values import in_digits
from durable_agent_runner.machine import texts
from durable_agent_runner.workflows import types as t

KINDS = ("tokens", "usd")


def render_budget(b: dict[str, Any], run_id: str) -> list[str]:
    lines: list[str] = []
    for scope in ("run", "tree"):
        for kind in KINDS:
            line = b[scope][kind]
            if line is None or (scope == "tree" and line == b["run"][kind]):  # no child: the tree is the run
                continue
            over = -line["left"] if line["left"] < 0 else 0  # a last call's overshoot (docs: what-runs-once.md)
            if kind == "tokens":
                left = f"0 left ({over:.0f} over)" if over else f"{line['left']:.0f} left"
                spent = f"{line['spent']:.0f} spent · {line['reserved']:.0f} reserved"
                text = f"{spent} · {left} of {line['limit']:.0f} tokens"
            else:
                left = f"$0 left (${over:.4f} over)" if over else f"${line['left']:.4f} left"
                text = f"${line['spent']:.4f} spent · ${line['reserved']:.4f} reserved · {left} of ${line['limit']:.4f}"
            lines.append(f"budget:  {scope:<4} {text}")
    if b["on_budget"] == "pause":
        raise_it = cli(f"resume {run_id} --add-usd X | --add-tokens N")
        lines.append(f"         on_budget=pause: raise it with `{raise_it}`")
    for c in b["children"]:
        share = " · ".join(
            x for x in (f"{c['tokens']} tokens" if c["tokens"] is not None else "",
                        f"${c['usd']:.4f}" if c["usd"] is not None else "") if x
        )  # fmt: skip
        lines.append(f"share:   {c['child_id']} holds {share or 'no share'} of it (a child run)")
    return lines


def raise_hint(kind: str, run_id: str, chat: bool = False) -> str | None:
    """For a session's message that failed on its budget (`kind`: TokenBudgetExceeded, ...): how
    its next message gets a budget (a session waiting for one takes a raise alone, 2.0.4); in
    `chat`, with its own command."""
    flag, typed = {
        "TokenBudgetExceeded": ("--add-tokens N", "/raise N (N tokens)"),
        "CostBudgetExceeded": ("--add-usd X", "/raise $X (X US dollars)"),
    }.get(kind, ("", ""))
    how = typed if chat else cli(f"resume {run_id} {flag}")
    return f"raise its budget for the next message: {how}" if flag else None


def budget_raise(args: argparse.Namespace) -> t.BudgetRaise:
    """`--add-usd` / `--add-tokens` as a bounded raise (the client's check): NaN, ∞, ≤ 0 or too
    large is a UsageError naming the flag."""
    try:
        return checks.budget_raise(args.add_tokens, args.add_usd)
    except checks.BadArgument as err:
        raise UsageError.of_flag(err) from None


def chat_raise(arg: str) -> t.BudgetRaise:
    """chat's `/raise 5000` (tokens) or `/raise $2.50` (US dollars), checked as resume's flags
    are; a ValueError saying how to write it."""
    text = arg.strip()
    usd = text.startswith("$")
    number = text.removeprefix("$").strip()
    if not in_digits(number, float if usd else int):
        raise ValueError("/raise N adds N tokens to the session's budget, /raise $X adds X US dollars")
    try:
        return checks.budget_raise(None if usd else int(number), float(number) if usd else None)
    except checks.BadArgument as err:
        raise ValueError(f"/raise: {err.reason}") from None


def raised_words(raised: t.BudgetRaise) -> str:
    """`+5000 tokens and +$2.5`: a raise, as resume and chat say it (and its event: machine/texts)."""
    return texts.raised(raised.add_tokens, raised.add_usd)
