"""A child run's usage counts in its parent however the child ended, and the parent's budget sees it
at once: a child that overspends stops its parent before the parent's next model call."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, start, transcript
from tests.test_agents import first_child, research_team, slow_fact, status

SPENT = {"usage": {"prompt_tokens": 400, "completion_tokens": 20}}


def ledger(handle_status: t.RunStatus, agent: str) -> t.Usage:
    return handle_status.usage_by_agent.get(agent, t.Usage())


async def test_a_failed_childs_usage_counts_in_its_parent(client, task_queue, worker_factory, llm):
    # the scholar may make one model call; it asks for a tool on it, so it fails MaxTurnsExceeded
    registry = research_team(
        llm,
        [calls(("slow_fact", {"topic": "tides"})) | SPENT],
        [calls(("ask", {"input": "tides"})), {"content": "The scholar failed; sorry."}],
        tools=[slow_fact],
        max_turns=1,
    )
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        result = await handle.result()
        messages = await transcript(handle)
    (told,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert told.is_error and "max_turns (1) exceeded" in told.content
    assert result.usage_by_agent["scholar"].input_tokens == 400 and result.usage_by_agent["scholar"].requests == 1
    assert result.usage.requests == 3  # the lead's two calls and the failed scholar's one
    await replay(handle)


async def test_a_child_that_overspends_stops_its_parent_before_its_next_model_call(
    client, task_queue, worker_factory, llm
):
    scholar = Agent(name="scholar", model=script(llm, {"content": "Tides follow the moon."} | SPENT))
    lead_model = script(llm, calls(("ask", {"input": "tides"})), {"content": "never asked"})
    lead = Agent(name="lead", model=lead_model, tools=[scholar.as_tool(name="ask")], token_budget=300)
    registry = Registry(agents=[lead])
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        final = await status(handle)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "TokenBudgetExceeded"
    assert "before model call 2" in cause.message and "child runs included" in cause.message
    assert final.turn == 1 and ledger(final, "scholar").input_tokens == 400  # the lead never called again
    await replay(handle)


async def test_a_cancelled_childs_usage_counts_in_its_parent(client, task_queue, worker_factory, llm):
    registry = research_team(
        llm,
        [calls(("slow_fact", {"topic": "tides"})) | SPENT, {"content": "never"}],
        [calls(("ask", {"input": "tides"})), {"content": "The scholar was stopped."}],
        tools=[slow_fact],
    )
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        child = await first_child(client, handle)
        deadline = time.monotonic() + 20
        while (await status(child)).phase != "running_tools":
            assert time.monotonic() < deadline, "the child never ran its tool"
            await asyncio.sleep(0.1)
        await child.cancel()  # a person stops the child alone; the parent goes on
        result = await asyncio.wait_for(handle.result(), 40)
    assert result.output == "The scholar was stopped."
    assert result.usage_by_agent["scholar"].input_tokens == 400
    await replay(handle)
