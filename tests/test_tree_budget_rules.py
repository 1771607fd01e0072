"""The budget ledger across a tree of runs, pure (machine/budget.py): reservations, shares, the
pause rule, raises, and the bound of docs/what-runs-once.md as a property over any tree and any
interleaving of its runs."""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.machine.budget import DEFAULT_RESERVE_TOKENS, Ledger, capped, worst_case
from durable_agent_runner.machine.outcomes import Facts, Ready, Replied, Resumed
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import CallModel, Pause, Turn
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def agent(**fields: object) -> t.AgentSpec:
    return t.AgentSpec.model_validate({"name": "a", **fields})


def used(tokens: int, usd: float = 0.0) -> t.Usage:
    return t.Usage(input_tokens=tokens, cost_usd=usd)


# ---------------------------------------------------------------------------------- the ledger


def test_a_run_without_a_budget_keeps_no_ledger():
    assert Ledger.start(agent(), None, child=False) is None


def test_a_childs_budget_is_the_least_of_its_agents_and_its_share_and_it_fails_when_spent():
    ledger = Ledger.start(agent(token_budget=500, on_budget="pause"), t.Budget(tokens=300), child=True)
    assert ledger is not None and ledger.budget.tokens == 300 and ledger.budget.on_budget == "fail"


def test_a_model_call_reserves_its_worst_case_and_shrinks_its_request_to_what_is_left():
    ledger = Ledger(t.Budget(tokens=10_000))
    assert ledger.reserve(agent(), used(0)) is None  # the worst case fits: the agent's request as it is
    assert ledger.held_tokens == DEFAULT_RESERVE_TOKENS
    assert ledger.left(used(0))[0] == 10_000 - DEFAULT_RESERVE_TOKENS
    ledger.settle()
    assert ledger.reserve(agent(settings={"max_output_tokens": 100}), used(0)) is None and ledger.held_tokens == 100
    ledger.settle()
    assert ledger.reserve(agent(), used(9_000)) == 1_000  # less is left: the request asks for at most that
    assert capped(agent(), 1_000).settings.max_output_tokens == 1_000
    assert capped(agent(), None) == agent()


def test_a_cost_budget_reserves_the_worst_case_at_the_models_output_price():
    ledger = Ledger(t.Budget(usd=1.0))
    priced = agent(output_price=10.0, settings={"max_output_tokens": 1_000})  # $10 per million output tokens
    assert ledger.reserve(priced, used(0, 0.5)) is None and ledger.held_usd == pytest.approx(0.01)
    ledger.settle()
    assert ledger.reserve(priced, used(0, 0.995)) == 500  # $0.005 left: 500 tokens at $10 per million


def test_children_of_one_turn_share_what_is_left_equally_and_hold_it_until_they_end():
    ledger = Ledger(t.Budget(tokens=1_000, usd=3.0))
    ledger.expect(3)
    shares = [ledger.grant(f"c{i}", used(100, 0.3)) for i in range(3)]
    assert [s.tokens for s in shares] == [300, 300, 300] and all(s.usd == pytest.approx(0.9) for s in shares)
    assert ledger.left(used(100, 0.3)) == (0, pytest.approx(0.0))
    assert ledger.stop(used(100, 0.3), "before model call 2") is not None  # all of it is promised
    ledger.release("c0")
    assert ledger.left(used(250, 0.3))[0] == 150  # c0 spent 150 of its 300: the rest is free again


def test_a_stop_says_what_was_spent_and_a_pausing_run_pauses_on_it():
    ledger = Ledger(t.Budget(tokens=100, on_budget="pause"))
    stop = ledger.stop(used(120), "before model call 3")
    assert stop is not None and stop.error == "TokenBudgetExceeded"
    assert stop.message == "token budget spent: 120 of 100 tokens used (child runs included) before model call 3"
    assert ledger.pauses(stop)


def test_a_raise_needs_a_budget_of_its_kind():
    ledger = Ledger(t.Budget(tokens=100))
    assert ledger.refuse_raise(t.BudgetRaise(add_usd=1.0)) is not None
    assert ledger.refuse_raise(t.BudgetRaise(add_tokens=50)) is None
    ledger.raised(t.BudgetRaise(add_tokens=50))
    assert ledger.budget.tokens == 150


def test_a_raise_on_a_child_stays_within_the_share_its_parent_granted():
    ledger = Ledger.start(agent(token_budget=500, cost_budget_usd=0.5), t.Budget(tokens=20_000, usd=2.0), child=True)
    assert ledger is not None and ledger.budget.tokens == 500
    assert ledger.beyond_grant(t.BudgetRaise(add_tokens=19_500)) is None  # up to the share: it is held for it
    assert ledger.beyond_grant(t.BudgetRaise(add_usd=1.5)) is None
    refused = ledger.beyond_grant(t.BudgetRaise(add_tokens=1_000_000_000))
    assert refused == (
        "a child run's budget comes out of its parent's: its parent granted it 20000 tokens and it has 500: "
        "it may be raised by at most 19500 tokens"
    )
    assert "at most $1.5" in (ledger.beyond_grant(t.BudgetRaise(add_usd=2.0)) or "")
    ledger.raised(t.BudgetRaise(add_tokens=19_500))
    carried = Ledger(t.Budget.model_validate_json(ledger.budget.model_dump_json()), shared=True)  # continue-as-new
    assert carried.beyond_grant(t.BudgetRaise(add_tokens=1)) is not None
    top = Ledger.start(agent(token_budget=500), None, child=False)  # a run of its own: a person's raise is its
    assert top is not None and top.beyond_grant(t.BudgetRaise(add_tokens=1_000_000_000)) is None


@pytest.mark.parametrize(
    "bad", [{"add_usd": float("nan")}, {"add_usd": float("inf")}, {"add_usd": -1}, {"add_tokens": 0}]
)
def test_a_raise_is_bounded_at_the_door(bad):
    with pytest.raises(ValueError):
        t.BudgetRaise.model_validate(bad)


def test_status_shows_spent_reserved_and_left():
    ledger = Ledger(t.Budget(tokens=1_000))
    ledger.expect(1)
    ledger.grant("run.call_1", used(100))
    view = ledger.status(used(100))
    assert view.tokens == t.BudgetLine(limit=1_000, spent=100, reserved=900, left=0)
    assert view.children == [t.ChildGrant(child_id="run.call_1", tokens=900)]


# ------------------------------------------------------------------------------ the turn machine


def state(spec: t.AgentSpec) -> RunState:
    s = RunState()
    s.agent = spec
    s.messages.append(t.UserMessage(content="hi"))
    return s


def reply(tokens: int, *tools: str) -> Replied:
    calls = [t.ToolCall(call_id=f"c{i}", name=name, arguments="{}") for i, name in enumerate(tools)]
    message = t.AssistantMessage(content="" if tools else "done", tool_calls=calls)
    return Replied(t.ModelReply(message=message, usage=t.Usage(input_tokens=tokens, requests=1)))


def test_a_pausing_run_pauses_with_reason_budget_and_goes_on_once_raised():
    spec = agent(token_budget=100, on_budget="pause", tools=[{"name": "look"}])
    ledger = Ledger.start(spec, None, child=False)
    turn = Turn(state(spec), None, ledger)
    step = turn.next(Ready(), Facts(now=NOW))
    assert isinstance(step, CallModel) and step.max_output_tokens == 100  # all the budget has room for
    step = turn.next(reply(150, "look"), Facts(now=NOW))  # overran: its call waits for a person
    assert isinstance(step, Pause) and step.reason == "budget" and step.where == "before_tools"
    assert ledger is not None
    ledger.raised(t.BudgetRaise(add_tokens=1_000))
    step = turn.next(Resumed(), Facts(now=NOW))
    assert step.kind == "run_tools"  # type: ignore[union-attr]


def test_a_pausing_run_that_is_spent_before_a_model_call_checks_again_after_a_resume():
    spec = agent(token_budget=100, on_budget="pause")
    s = state(spec)
    s.turn, s.usage = 1, used(100)  # its first call's child run spent it all
    ledger = Ledger.start(spec, None, child=False)
    turn = Turn(s, None, ledger)
    step = turn.next(Ready(), Facts(now=NOW))
    assert isinstance(step, Pause) and step.reason == "budget" and step.where == "before_model"
    assert isinstance(turn.next(Resumed(), Facts(now=NOW)), Pause)  # not raised: still spent
    assert ledger is not None
    ledger.raised(t.BudgetRaise(add_tokens=50))
    assert isinstance(turn.next(Resumed(), Facts(now=NOW)), CallModel)


def test_an_answers_first_call_is_stopped_only_by_a_shared_budget():
    spec = agent(token_budget=100)
    s = state(spec)
    s.usage = used(100)  # a session's earlier messages spent it: the next message's first call goes ahead
    assert isinstance(Turn(s, None, Ledger.start(spec, None, child=False)).next(Ready(), Facts(now=NOW)), CallModel)


def test_a_failing_run_stops_before_its_first_model_call_when_its_share_is_nothing():
    spec = agent()
    turn = Turn(state(spec), None, Ledger.start(spec, t.Budget(tokens=0), child=True))
    step = turn.next(Ready(), Facts(now=NOW))
    assert getattr(step, "error", None) == "TokenBudgetExceeded"


# ----------------------------------------------------------------------------------- the bound

# A run's plan: model calls (input tokens, output tokens the model would write) and turns of
# child runs, each with a plan of its own.
Call = tuple[int, int]
calls_ = st.tuples(st.integers(0, 300), st.integers(0, 6_000))
plans = st.recursive(
    st.lists(calls_, min_size=1, max_size=4),
    lambda kids: st.lists(st.one_of(calls_, st.lists(kids, min_size=1, max_size=3)), min_size=1, max_size=4),
    max_leaves=12,
)


def run(
    ledger: Ledger, spec: t.AgentSpec, plan: list, pick: Callable[[list], tuple[str, int]], overshoot: list[int]
) -> Generator[None, None, int]:
    """A run as the workflow carries it out: before each model call the ledger's stop rule, then
    its reservation; the call is in flight across a yield (anything else in the tree may run);
    a provider keeps to the request's max output tokens. A turn of child runs starts them in an
    order `pick` chooses, each granted its share as it starts, and interleaves their steps."""
    spent = 0
    mine = 0  # this run's largest (u - r)+
    for step in plan:
        if ledger.stop(used(spent), "") is not None:
            break
        if isinstance(step, tuple):
            cap = ledger.reserve(spec, used(spent)) or worst_case(spec)
            yield
            u = step[0] + min(step[1], cap)
            mine = max(mine, u - ledger.held_tokens)
            spent += u
            ledger.settle()
            continue
        ledger.expect(len(step))
        waiting = list(enumerate(step))
        live: dict[int, Generator[None, None, int]] = {}
        while waiting or live:
            choices = [("start", i) for i, _ in waiting] + [("step", i) for i in live]
            what, i = pick(choices)
            if what == "start":
                sub = dict(waiting).pop(i)
                waiting = [(j, p) for j, p in waiting if j != i]
                share = ledger.grant(str(i), used(spent))
                child = Ledger.start(spec, share, child=True)
                assert child is not None
                live[i] = run(child, spec, sub, pick, overshoot)
                continue
            try:
                next(live[i])
                yield
            except StopIteration as done:
                spent += done.value
                ledger.release(str(i))
                del live[i]
    overshoot.append(mine)
    return spent


def test_three_children_in_parallel_spend_at_most_their_parents_budget():
    """Three children, each of whom would spend 20,000 tokens, start at once against a parent
    with 9,000 left: each gets 3,000, and the tree spends exactly its budget (no input tokens)."""
    spec = agent(settings={"max_output_tokens": 1_000})
    greedy = [[(0, 5_000)] * 4] * 3
    overshoot: list[int] = []
    tree = run(Ledger(t.Budget(tokens=9_000)), spec, [greedy], lambda choices: choices[0], overshoot)
    with pytest.raises(StopIteration) as done:
        while True:
            next(tree)
    assert done.value.value == 9_000 and set(overshoot) == {0}


@settings(max_examples=300, deadline=None)
@given(plan=plans, budget=st.integers(0, 20_000), worst=st.integers(1, 5_000), pick=st.data())
def test_a_tree_never_spends_more_than_its_budget_plus_one_calls_overshoot_per_run(plan, budget, worst, pick):
    spec = agent(settings={"max_output_tokens": worst})
    overshoot: list[int] = []
    tree = run(Ledger(t.Budget(tokens=budget)), spec, plan, lambda c: pick.draw(st.sampled_from(c)), overshoot)
    try:
        while True:
            next(tree)
    except StopIteration as done:
        total = done.value
    assert total <= budget + sum(overshoot)
    assert all(e <= 300 for e in overshoot)  # at most one call's input: the output kept to its reservation


# ------------------------------------------------------------------------------------ the CLI


def test_a_raise_from_the_command_line_is_one_clear_line_when_it_is_out_of_bounds():
    import argparse

    from durable_agent_runner.cli.budget import budget_raise
    from durable_agent_runner.cli.common import UsageError

    assert budget_raise(argparse.Namespace(add_tokens=500, add_usd=None)) == t.BudgetRaise(add_tokens=500)
    for tokens, usd, flag in ((None, float("nan"), "--add-usd"), (0, None, "--add-tokens"), (None, 1e7, "--add-usd")):
        with pytest.raises(UsageError) as refused:
            budget_raise(argparse.Namespace(add_tokens=tokens, add_usd=usd))
        assert str(refused.value).startswith(flag) and "\n" not in str(refused.value)


def test_status_prints_the_runs_and_the_trees_budget():
    from durable_agent_runner.cli.budget import render_budget

    line = {"limit": 1000.0, "spent": 700.0, "reserved": 300.0, "left": 0.0}
    view = {
        "on_budget": "pause",
        "run": {"tokens": line, "usd": None},
        "tree": {"tokens": line | {"spent": 850.0, "reserved": 150.0}, "usd": None},
        "children": [{"child_id": "r.call_1", "tokens": 300, "usd": None}],
    }
    lines = render_budget(view, "r")
    assert lines[0] == "budget:  run  700 spent · 300 reserved · 0 left of 1000 tokens"
    assert lines[1] == "budget:  tree 850 spent · 150 reserved · 0 left of 1000 tokens"
    assert lines[2].endswith("raise it with `durable-agent-runner resume r --add-usd X | --add-tokens N`")
    assert lines[3] == "share:   r.call_1 holds 300 tokens of it (a child run)"  # status's `child:` lines list the runs
    from durable_agent_runner.console.views_budget import budget_rows

    assert any("durable-agent-runner resume r --add-tokens N | --add-usd X" in v for _, v in budget_rows(view, "r"))


def test_a_budget_a_last_call_overshot_shows_nothing_left_and_how_far_over():
    """Before: `-229 left of 2500 tokens` in status and on the console's run page."""
    from durable_agent_runner.cli.budget import render_budget
    from durable_agent_runner.console.views_budget import budget_rows

    tokens = {"limit": 2500.0, "spent": 2729.0, "reserved": 0.0, "left": -229.0}
    usd = {"limit": 0.5, "spent": 0.52, "reserved": 0.0, "left": -0.02}
    view = {"on_budget": "fail", "run": {"tokens": tokens, "usd": usd}, "tree": {"tokens": tokens, "usd": usd},
            "children": []}  # fmt: skip
    lines = render_budget(view, "r")
    assert lines[0] == "budget:  run  2729 spent · 0 reserved · 0 left (229 over) of 2500 tokens"
    assert lines[1] == "budget:  run  $0.5200 spent · $0.0000 reserved · $0 left ($0.0200 over) of $0.5000"
    assert len(lines) == 2  # no child run: the tree's lines would say the run's again
    shown = " ".join(text for _, text in budget_rows(view, "r"))
    assert "<b>0 left (229 over)</b> of 2,500 tokens" in shown and "<b>$0.0000 left ($0.0200 over)</b>" in shown
    assert "-" not in shown.replace("class=", "")
