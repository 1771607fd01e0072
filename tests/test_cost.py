"""What runs cost: the price table, its overrides, a run's cost in status, result and search
attribute, a dollar budget that ends the run cleanly, and sub-agents' costs rolled up."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner import Agent, Registry
from durable_agent_runner.activities.prices import DEFAULT_PRICES, Price, PriceTable
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, script, start


def test_prices_match_dated_and_prefixed_names_and_count_cached_and_reasoning_tokens() -> None:
    table = PriceTable()
    assert table.price("gpt-4.1-mini-2025-04-14") == DEFAULT_PRICES["gpt-4.1-mini"]
    assert table.price("openai/gpt-4.1") == DEFAULT_PRICES["gpt-4.1"]
    assert table.price("gpt-4.1-mini") != table.price("gpt-4.1")  # the longest name wins
    usage = t.Usage(requests=1, input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000)
    priced = table.priced(usage, "gpt-4.1")  # 0.6M × $2 + 0.4M × $0.5 + 0.1M × $8
    assert priced.cost_usd == pytest.approx(1.2 + 0.2 + 0.8) and priced.unpriced == 0
    custom = PriceTable({"r": Price(input=1, output=10, reasoning=20)})
    cost = custom.priced(t.Usage(requests=1, output_tokens=1_000_000, reasoning_tokens=500_000), "r").cost_usd
    assert cost == pytest.approx(5 + 10)
    unknown = table.priced(t.Usage(requests=1, input_tokens=10), "my-local-model")
    assert (unknown.cost_usd, unknown.unpriced) == (0.0, 1)
    assert (t.Usage(cost_usd=0.1, unpriced=1) + t.Usage(cost_usd=0.2)).cost_usd == pytest.approx(0.3)


def test_a_model_string_naming_its_provider_is_priced_by_the_provider_s_own_name() -> None:
    table = PriceTable()
    assert table.price("anthropic:claude-sonnet-4-5") == table.price("claude-sonnet-4-5") is not None
    assert table.price("gemini:gemini-2.5-flash") == DEFAULT_PRICES["gemini-2.5-flash"]
    assert table.price("openai:gpt-4.1-mini-2025-04-14") == DEFAULT_PRICES["gpt-4.1-mini"]
    assert table.price("anthropic:") is None  # names no model: no price (the run is refused elsewhere)
    usage = t.Usage(requests=1, input_tokens=1000, output_tokens=100)
    assert table.priced(usage, "anthropic:claude-sonnet-4-5") == table.priced(usage, "claude-sonnet-4-5")


def test_cache_writes_cost_the_cache_write_price_or_else_the_input_price() -> None:
    table = PriceTable()  # claude-sonnet-4-5: $3 input, $0.30 cache read, $3.75 cache write, $15 output
    usage = t.Usage(
        requests=1, input_tokens=1_000_000, cached_tokens=500_000, cache_write_tokens=200_000, output_tokens=100_000
    )
    # 0.3M uncached × $3 + 0.5M read × $0.30 + 0.2M written × $3.75 + 0.1M × $15
    assert table.priced(usage, "anthropic:claude-sonnet-4-5").cost_usd == pytest.approx(0.9 + 0.15 + 0.75 + 1.5)
    plain = PriceTable({"m": Price(input=2, cached_input=1, output=0)})  # no cache-write price: the input price
    assert plain.priced(usage, "m").cost_usd == pytest.approx(0.3 * 2 + 0.5 * 1 + 0.2 * 2)
    # writes are part of input_tokens: never more than what the reads leave (400 here, not 900)
    over = t.Usage(requests=1, input_tokens=1_000, cached_tokens=600, cache_write_tokens=900)
    assert PriceTable({"w": Price(input=0, cached_input=0, cache_write=1000, output=0)}).priced(
        over, "w"
    ).cost_usd == pytest.approx(400 * 1000 / 1_000_000)


@pytest.mark.asyncio
async def test_a_run_on_a_prefixed_model_freezes_its_output_price_for_a_cost_budget() -> None:
    # what a model call reserves of a cost budget (machine/budget.py): the first model's output price
    activities = ToolActivities(Registry(agents=[Agent(name="priced")]))
    for model in ("anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-pro", "openai:gpt-4.1"):
        request = t.ResolveAgentInput(agent="priced", model=model)
        spec = await ActivityEnvironment().run(activities.resolve_agent, request)
        assert spec.output_price == {"anthropic": 15.0, "gemini": 10.0, "openai": 8.0}[model.split(":")[0]], model


def test_llm_prices_overrides_and_extends_and_says_what_is_wrong(tmp_path: Path) -> None:
    good = tmp_path / "prices.json"
    good.write_text(json.dumps({"gpt-4.1": {"input": 3, "output": 9}, "llama": {"input": 0.1, "output": 0.2}}))
    table = PriceTable.from_env({"LLM_PRICES": str(good)})
    assert table.price("gpt-4.1") == Price(input=3, output=9) and table.price("llama") is not None
    assert table.price("gpt-4o") == DEFAULT_PRICES["gpt-4o"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"m": {"input": -1, "output": 1}}))
    with pytest.raises(ValueError, match=r"model 'm': input: Input should be greater than or equal to 0"):
        PriceTable.from_env({"LLM_PRICES": str(bad)})
    with pytest.raises(ValueError, match="cannot read a JSON price table"):
        PriceTable.from_env({"LLM_PRICES": str(tmp_path / "missing.json")})


pytestmark_async = pytest.mark.asyncio


@pytestmark_async
async def test_a_runs_cost_in_result_status_and_search_attribute(
    client: Client, task_queue: str, worker_factory: Any
) -> None:
    table = PriceTable({"echo": Price(input=1000, output=2000)})  # $0.001 and $0.002 a token
    async with worker_factory(prices=table):
        handle = await start(client, task_queue, "hello there", model="echo")
        result = await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    u = result.usage
    assert u.cost_usd == pytest.approx(u.input_tokens * 0.001 + u.output_tokens * 0.002) and u.cost_usd > 0
    assert status.usage.cost_usd == u.cost_usd
    found = [wf.id async for wf in client.list_workflows(f"WorkflowId='{handle.id}' AND AgentCostUsd > 0")]
    for _ in range(50):
        if found:
            break
        await asyncio.sleep(0.2)
        found = [wf.id async for wf in client.list_workflows(f"WorkflowId='{handle.id}' AND AgentCostUsd > 0")]
    assert found == [handle.id]


@pytestmark_async
async def test_a_cost_budget_ends_the_run_cleanly(client: Client, task_queue: str, worker_factory: Any) -> None:
    model = "loop:40:100"
    async with worker_factory(prices=PriceTable({model: Price(input=1000, output=1000)})):
        handle = await start(client, task_queue, "go", agent="frugal", model=model)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert getattr(cause, "type", None) == "CostBudgetExceeded"
    assert "cost budget spent" in str(getattr(cause, "message", "")) and "of $0.0500" in str(
        getattr(cause, "message", "")
    )


@pytestmark_async
async def test_sub_agents_costs_roll_up(client: Client, task_queue: str, worker_factory: Any, llm: Any) -> None:
    child_model = script(llm, {"content": "a fact", "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
    parent_model = script(
        llm, calls(("ask", {"input": "x"})), {"content": "done", "usage": {"prompt_tokens": 50, "completion_tokens": 5}}
    )
    scholar = Agent(name="scholar", model=child_model)
    lead = Agent(name="lead", model=parent_model, tools=[scholar.as_tool(name="ask")])
    table = PriceTable({child_model: Price(input=10_000, output=10_000), parent_model: Price(input=1, output=1)})
    async with worker_factory(registry=Registry(agents=[lead]), prices=table):
        handle = await start(client, task_queue, "go", agent="lead")
        result = await handle.result()
    assert result.usage_by_agent["scholar"].cost_usd == pytest.approx(110 * 0.01)
    assert result.usage.cost_usd == pytest.approx(sum(u.cost_usd for u in result.usage_by_agent.values()))
    assert result.usage.cost_usd > result.usage_by_agent["scholar"].cost_usd
