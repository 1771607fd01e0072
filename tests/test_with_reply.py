"""Cheap calls run with the model's reply (`ToolActivities.run_with_reply`), without Temporal's
server: which calls the worker runs, what it leaves to the turn, and what it bounds.

The workflow side (which calls a turn lets come back, which results it takes) is pure and tested
in tests/test_turn.py; whole runs in tests/test_workflow.py."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from temporalio.testing import ActivityEnvironment

from durable_agent_runner import Agent, Registry, ToolContext, tool
from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    ModelReply,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
    WithReply,
    chain_digest,
)

RUN = "run-7"
ran: list[str] = []  # what the tools below did, in order


@tool(local=True)
def add(a: int, b: int, ctx: ToolContext) -> int:
    """Add.

    Args:
        a: A number.
        b: Another.
    """
    ran.append(f"add {a}+{b} {ctx.idempotency_key}")
    return a + b


@tool(local=True)
async def stall(seconds: float) -> str:
    """Take a while.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    ran.append("stall")
    return "late"


@tool(local=True)
def broken() -> str:
    """Fail."""
    raise ConnectionError("the tool's backend is down")


@tool
def lookup(key: str) -> str:
    """Not declared cheap.

    Args:
        key: What.
    """
    ran.append(f"lookup {key}")
    return key


AGENT = Agent(name="cheap", instructions="-", tools=[add, stall, broken, lookup])


@pytest.fixture(autouse=True)
def clean() -> None:
    ran.clear()


def spec() -> AgentSpec:
    return AGENT.spec()


def within(**fields: object) -> WithReply:
    version = spec().version
    assert version is not None
    return WithReply.model_validate({"version": version, "tools": ["add", "stall", "broken"]} | fields)


def reply(*calls: tuple[str, str, str], tokens: int = 10, cost: float = 0.0) -> ModelReply:
    message = AssistantMessage(tool_calls=[ToolCall(call_id=i, name=n, arguments=a) for i, n, a in calls])
    return ModelReply(message=message, usage=Usage(input_tokens=tokens - 5, output_tokens=5, cost_usd=cost))


def env() -> ActivityEnvironment:
    """The model activity's context: a run's call (its workflow id names the run)."""
    e = ActivityEnvironment()
    e.info = dataclasses.replace(e.info, workflow_id=RUN)
    return e


async def run(
    r: ModelReply,
    ahead: WithReply | None = None,
    bound: float = 30.0,
    cache: ContextCache | None = None,
    earlier: tuple[str, ...] = (),
):
    tools = ToolActivities(Registry(agents=[AGENT]), cache=cache)
    return await env().run(tools.run_with_reply, spec(), 3, ahead or within(), r, bound, earlier)


@pytest.mark.asyncio
async def test_the_cheap_calls_run_with_the_reply_and_feed_the_next_calls_context() -> None:
    cache = ContextCache()
    prompt = UserMessage(content="go")
    r = reply(("c1", "add", '{"a": 1, "b": 2}'), ("c2", "lookup", '{"key": "k"}'), ("c3", "add", '{"a": 3, "b": 4}'))
    cache.remember(RUN, spec(), [prompt], chain_digest("", prompt), r.message)
    results = await run(r, cache=cache)
    assert [(x.call_id, x.tool, x.output, x.is_error) for x in results] == [
        ("c1", "add", "3", False),
        ("c3", "add", "7", False),
    ]  # lookup is not cheap: the turn runs it as an activity of its own
    assert sorted(ran) == [f"add 1+2 {RUN}:c1", f"add 3+4 {RUN}:c3"]  # the key the turn would give
    # The next call finds its context here once the turn's lookup result is in too.
    looked = ToolMessage(call_id="c2", name="lookup", content="k")
    cache.remember_tool(RUN, ToolResult(call_id="c2", tool="lookup", output="k"))
    digest = chain_digest(chain_digest("", prompt), r.message)
    tool_messages = [
        ToolMessage(call_id="c1", name="add", content="3"),
        looked,
        ToolMessage(call_id="c3", name="add", content="7"),
    ]
    for message in tool_messages:
        digest = chain_digest(digest, message)
    found = cache.lookup(RUN, 5, digest)
    assert found is not None and found[1][2:] == tool_messages


@pytest.mark.asyncio
async def test_arguments_the_tool_refuses_come_back_as_the_error_the_model_reads() -> None:
    (result,) = await run(reply(("c1", "add", '{"a": "one"}')))
    assert result.is_error and "add" in result.output and ran == []


@pytest.mark.parametrize(
    "case",
    [
        "another version",  # this worker holds other code for the agent
        "a breakpoint tool",  # the run pauses before the reply's calls: a person looks first
        "repeated ids",  # the run renames them, so the idempotency keys would not be the turn's
        "tokens spent",  # the turn stops on its token budget instead of running tools
        "cost spent",
    ],
)
@pytest.mark.asyncio
async def test_nothing_runs_with_a_reply_the_turn_would_not_run_as_it_came(case: str) -> None:
    calls = [("c1", "add", '{"a": 1, "b": 1}'), ("c2", "lookup", '{"key": "k"}')]
    ahead = within()
    r = reply(*calls, tokens=50, cost=0.02)
    if case == "another version":
        ahead = within(version="0" * 12)
    elif case == "a breakpoint tool":
        ahead = within(pause_on=["lookup"])
    elif case == "repeated ids":
        r = reply(calls[0], ("c1", "add", '{"a": 2, "b": 2}'))
    elif case == "tokens spent":
        ahead = within(tokens_left=50)
    elif case == "cost spent":
        ahead = within(cost_left=0.02)
    assert await run(r, ahead) == []
    assert ran == []
    assert await run(reply(*calls, tokens=49, cost=0.019), within(tokens_left=50, cost_left=0.02)) != []


@pytest.mark.asyncio
async def test_a_call_that_fails_or_outlasts_its_bound_is_left_to_the_turn() -> None:
    r = reply(("c1", "stall", '{"seconds": 5}'), ("c2", "broken", "{}"), ("c3", "add", '{"a": 1, "b": 1}'))
    began = time.monotonic()
    results = await run(r, bound=0.3)
    assert time.monotonic() - began < 2.0
    assert [x.call_id for x in results] == ["c3"]  # the turn runs c1 and c2 as local activities, with retries
    assert "stall" not in ran


@pytest.mark.asyncio
async def test_a_call_whose_id_the_run_used_before_is_left_to_the_turn() -> None:
    # The run would rename it (RunState.claim_call_ids), and its idempotency key with it. The wire
    # already numbers calls by turn (call_TURN_I), so a run rarely renames one; when it does, the
    # worker keeps to the run's rule.
    r = reply(("c1", "add", '{"a": 1, "b": 1}'), ("c2", "add", '{"a": 2, "b": 2}'))
    results = await run(r, earlier=("c1", "c0"))
    assert [x.call_id for x in results] == ["c2"] and ran == [f"add 2+2 {RUN}:c2"]
