"""Budgets across a tree of runs, pure: the ledger a run keeps of its token and dollar budgets.

    start(agent, given)    → the run's caps: its first agent's budgets, below a parent's share
    reserve(agent, used)   → before a model call: hold its worst case (or what is left, and lower
                             the request's max output tokens to fit)
    settle()               → after it: the reply's actual usage is in `used`; the hold goes
    grant(child, used, n)  → a child run starts: its share of what is left, held until it ends
    release(child)         → it ended (its usage, however it ended, is in `used`)
    raised(r)              → a person raised the budget of a run paused on it

The parent is the only authority over its children's shares: a child's budget is its share, in
its RunInput, so no signal crosses the tree and a run without a budget keeps none of this. The
bound this gives, proved in tests/test_tree_budget.py, is in docs/what-runs-once.md:

    spent(tree) <= budget + sum over the runs of the tree of (u - r)+ of one model call each,

where u is what that call used and r what it reserved: the call in flight when the run's budget
ran out. When the provider keeps to the request's max output tokens, u - r is at most that
call's input (tokens, or their price).

No Temporal, no I/O, no clocks, no randomness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from durable_agent_runner.machine.calls import BUDGET_SPENT, budget_spent
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.workflows import types as t

# A request that sets no max output tokens reserves this many: the worst case we assume.
DEFAULT_RESERVE_TOKENS = 4096
PER = 1_000_000  # prices are per million tokens


def worst_case(agent: t.AgentSpec) -> int:
    """The most output tokens a model call of `agent` asks for."""
    return agent.settings_now().max_output_tokens or DEFAULT_RESERVE_TOKENS


def capped(agent: t.AgentSpec, max_output_tokens: int | None) -> t.AgentSpec:
    """`agent` asking for at most `max_output_tokens` (a reservation that had to shrink)."""
    if max_output_tokens is None or max_output_tokens >= worst_case(agent):
        return agent
    settings = agent.settings.model_copy(update={"max_output_tokens": max_output_tokens})
    return agent.model_copy(update={"settings": settings})


def spent_words(first: t.AgentSpec, used: t.Usage) -> str:
    """Why a run without a ledger (recorded before tree-budget-1.1) stopped before a model call."""
    if first.token_budget is not None and used.total_tokens >= first.token_budget:
        return f"token budget spent: {used.total_tokens} of {first.token_budget} tokens used (child runs included)"
    return f"cost budget spent: ${used.cost_usd:.4f} of ${first.cost_budget_usd or 0:.4f} used (child runs included)"


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass
class Ledger:
    """What a run may spend (`budget`), what it holds for its model call in flight (`held_*`)
    and for its children in flight (`grants`). What it spent is the run's own usage (children
    that ended included), passed in as `used`."""

    budget: t.Budget
    held_tokens: int = 0
    held_usd: float = 0.0
    grants: dict[str, t.Budget] = field(default_factory=dict)
    expected: int = 0  # the turn's child calls not yet started (they share what is left)
    # A parent's share (or a caller's cap): spent may be all of it before the first model call.
    # Otherwise, as before the ledger, an answer's first call is not stopped (a session's message).
    shared: bool = False

    @classmethod
    def start(cls, agent: t.AgentSpec, given: t.Budget | None, child: bool) -> Ledger | None:
        """The run's ledger, or None when it has no budget (then it keeps none). A child run's
        budget is the least of its agent's and its share; it fails when spent, since a pause
        there would hold its parent's turn on money the parent no longer has."""
        tokens = _least(agent.token_budget, given.tokens if given else None)
        usd = _least(agent.cost_budget_usd, given.usd if given else None)
        if tokens is None and usd is None:
            return None
        on = "fail" if child else agent.on_budget
        budget = t.Budget(tokens=None if tokens is None else int(tokens), usd=usd, on_budget=on)
        if child and given is not None:  # a raise may not take a child past what its parent granted
            budget = budget.model_copy(update={"ceiling_tokens": given.tokens, "ceiling_usd": given.usd})
        return cls(budget, shared=given is not None)

    @classmethod
    def for_run(
        cls, input: t.RunInput, agent: t.AgentSpec, child: bool, first: bool | None
    ) -> tuple[Ledger | None, bool]:
        """The run's ledger as it starts (None: no budget), and whether it holds only if the run
        is of code that knows tree budgets (the workflow asks `tree-budget-1.1` then). A run
        handed a budget (a child's share, a carried ledger, a caller's cap) asked
        `given-budget-first-1.3` before it resolved its agent (`first`: its answer, from 1.3
        on); one recorded before asks `tree-budget-1.1`, having resolved nothing. A run whose
        budgets are its agent's own keeps a ledger without asking: for histories recorded before
        it, the ledger issues the same commands as the old rule (tests/histories)."""
        carried = input.carry.budget if input.carry is not None else None
        ledger = cls(carried, shared=child) if carried else cls.start(agent, input.budget, child)
        ask = ledger is not None and (input.budget is not None or carried is not None) and not first
        return ledger, ask

    # ---------------------------------------------------------------------------- accounts

    def reserved(self) -> tuple[int, float]:
        tokens = self.held_tokens + sum(g.tokens or 0 for g in self.grants.values())
        return tokens, self.held_usd + sum(g.usd or 0.0 for g in self.grants.values())

    def left(self, used: t.Usage) -> tuple[int | None, float | None]:
        """What is neither spent nor reserved, by kind (None: no cap of that kind)."""
        tokens, usd = self.reserved()
        b = self.budget
        return (
            None if b.tokens is None else b.tokens - used.total_tokens - tokens,
            None if b.usd is None else round(b.usd - used.cost_usd - usd, 8),
        )

    def stop(self, used: t.Usage, where: str, first: bool = False) -> Stop | None:
        """The run's stop when nothing is left of a budget (the one rule, `calls.budget_spent`,
        over what is spent and reserved), or None; `first`: an answer's first model call, which
        only a shared budget stops."""
        if first and not self.shared:
            return None
        tokens, usd = self.reserved()
        b = self.budget
        kind = budget_spent(b.tokens, used.total_tokens + tokens, b.usd, used.cost_usd + usd)
        if kind == "TokenBudgetExceeded":
            words = f"token budget spent: {used.total_tokens} of {b.tokens} tokens used"
        elif kind == "CostBudgetExceeded":
            words = f"cost budget spent: ${used.cost_usd:.4f} of ${b.usd or 0:.4f} used"
        else:
            return None
        return Stop(error=kind, message=f"{words} (child runs included) {where}")

    def pauses(self, stop: Stop) -> bool:
        """Whether `stop` (a spent budget) pauses the run for a person instead (on_budget="pause")."""
        return self.budget.on_budget == "pause" and stop.error in BUDGET_SPENT

    def limits(self, first: t.AgentSpec) -> t.AgentSpec:
        """The run's first agent with the budgets held here (raised by a person, a parent's share)."""
        return first.model_copy(update={"token_budget": self.budget.tokens, "cost_budget_usd": self.budget.usd})

    # ------------------------------------------------------------------------ model calls

    def reserve(self, agent: t.AgentSpec, used: t.Usage) -> int | None:
        """Hold the worst case of `agent`'s next model call. When less is left, hold what is left
        and return the max output tokens the request must ask for (None: the agent's own)."""
        worst = worst_case(agent)
        tokens, usd = self.left(used)
        fits = worst if tokens is None else min(worst, tokens)
        price = agent.output_price
        if usd is not None and price:
            fits = min(fits, math.floor(usd * PER / price))
        fits = max(fits, 1)
        self.held_tokens = fits
        self.held_usd = round(fits * price / PER, 8) if price else 0.0
        return fits if fits < worst else None

    def settle(self) -> None:
        self.held_tokens, self.held_usd = 0, 0.0

    # -------------------------------------------------------------------------- child runs

    def expect(self, children: int) -> None:
        """The turn is about to start `children` child runs: they share what is left equally."""
        self.expected = children

    def grant(self, child_id: str, used: t.Usage) -> t.Budget:
        """A child's budget: its share of what is left (neither spent nor held for others),
        held here until it ends. Children of one turn share equally, in the order they start."""
        tokens, usd = self.left(used)
        n = max(self.expected, 1)
        self.expected = max(self.expected - 1, 0)
        share = t.Budget(
            tokens=None if tokens is None else max(tokens, 0) // n,
            usd=None if usd is None else math.floor(max(usd, 0.0) / n * 1e8) / 1e8,
        )
        self.grants[child_id] = share
        return share

    def release(self, child_id: str) -> None:
        self.grants.pop(child_id, None)

    # ------------------------------------------------------------------------------ people

    def refuse_raise(self, r: t.BudgetRaise) -> str | None:
        """Why a raise cannot apply (it names a kind of budget this run has not), or None: in words
        every face's raise fits (`resume --add-tokens`, chat's `/raise N`, the console's fields)."""
        b = self.budget
        if r.add_tokens is not None and b.tokens is None:
            return "this run has no token budget to raise: add USD instead"
        if r.add_usd is not None and b.usd is None:
            return "this run has no cost budget to raise: add tokens instead"
        return None

    def beyond_grant(self, r: t.BudgetRaise) -> str | None:
        """Why a raise would take a child run past the share its parent granted, or None. The
        parent holds that share and no more for it: a raise beyond would spend what it has not."""
        b = self.budget
        if r.add_tokens is not None and b.tokens is not None and b.ceiling_tokens is not None:
            if b.tokens + r.add_tokens > b.ceiling_tokens:
                room = max(b.ceiling_tokens - b.tokens, 0)
                return (
                    f"a child run's budget comes out of its parent's: its parent granted it {b.ceiling_tokens} "
                    f"tokens and it has {b.tokens}: it may be raised by at most {room} tokens"
                )
        if r.add_usd is not None and b.usd is not None and b.ceiling_usd is not None:
            if round(b.usd + r.add_usd, 8) > b.ceiling_usd:
                spare = max(round(b.ceiling_usd - b.usd, 8), 0.0)
                return (
                    f"a child run's budget comes out of its parent's: its parent granted it ${b.ceiling_usd:g} "
                    f"and it has ${b.usd:g}: it may be raised by at most ${spare:g}"
                )
        return None

    def raised(self, r: t.BudgetRaise) -> None:
        b = self.budget
        tokens = b.tokens + r.add_tokens if b.tokens is not None and r.add_tokens else b.tokens
        usd = round(b.usd + r.add_usd, 8) if b.usd is not None and r.add_usd else b.usd
        self.budget = b.model_copy(update={"tokens": tokens, "usd": usd})

    # ------------------------------------------------------------------------------ views

    def status(self, used: t.Usage) -> t.BudgetStatus:
        tokens, usd = self.reserved()
        left_tokens, left_usd = self.left(used)
        b = self.budget
        return t.BudgetStatus(
            tokens=None
            if b.tokens is None
            else t.BudgetLine(limit=b.tokens, spent=used.total_tokens, reserved=tokens, left=left_tokens or 0),
            usd=None
            if b.usd is None
            else t.BudgetLine(limit=b.usd, spent=used.cost_usd, reserved=round(usd, 8), left=left_usd or 0.0),
            on_budget=b.on_budget,
            children=[t.ChildGrant(child_id=k, tokens=g.tokens, usd=g.usd) for k, g in self.grants.items()],
        )
