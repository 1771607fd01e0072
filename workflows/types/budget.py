"""Budgets across a tree of runs: a run's caps (its own model calls and its children's), and what
status shows of them. Pure data, safe inside the workflow sandbox (machine/budget.py keeps the
ledger). A field added after a release carries a default, so older histories still decode."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from durable_agent_runner.workflows.types.transcript import Contract

# A cap that arrives from outside (a start input, a raise) is bounded at decoding.
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_USD = 1e9
MAX_RAISE_TOKENS = 10**9
MAX_RAISE_USD = 1e6

OnBudget = Literal["fail", "pause"]


class Budget(Contract):
    """What a run (its own model calls and every child run below it) may spend: None, no cap of
    that kind. A child run gets one in its RunInput: its share of what its parent had left."""

    tokens: int | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)
    usd: float | None = Field(default=None, ge=0, le=MAX_BUDGET_USD, allow_inf_nan=False)
    on_budget: OnBudget = "fail"
    # A child run's: the share its parent granted, the most a person's raise may bring its budget
    # to (None: no such bound). Carried with the budget through continue-as-new.
    ceiling_tokens: int | None = Field(default=None, ge=0, le=MAX_BUDGET_TOKENS)
    ceiling_usd: float | None = Field(default=None, ge=0, le=MAX_BUDGET_USD, allow_inf_nan=False)


class BudgetRaise(Contract):
    """`client.py resume RUN_ID --add-usd X | --add-tokens N`: a person raises a paused run's budget."""

    add_tokens: int | None = Field(default=None, ge=1, le=MAX_RAISE_TOKENS)
    add_usd: float | None = Field(default=None, gt=0, le=MAX_RAISE_USD, allow_inf_nan=False)


class BudgetLine(Contract):
    """One kind of budget as status shows it: the cap, what the run and its ended children spent,
    what is reserved (the model call in flight, the shares of children in flight), and what is left."""

    limit: float
    spent: float
    reserved: float
    left: float


class ChildGrant(Contract):
    child_id: str
    tokens: int | None = None
    usd: float | None = None


class BudgetStatus(Contract):
    tokens: BudgetLine | None = None
    usd: BudgetLine | None = None
    on_budget: OnBudget = "fail"
    children: list[ChildGrant] = Field(default_factory=list)  # in flight, with their shares
