"""The runs behind tests/test_tree_budget.py and tests/record_budget_histories.py: a lead whose
three children run in parallel against its token budget, and an agent that pauses on its budget."""

from __future__ import annotations

import asyncio
from typing import Any

from durable_agent_runner import Agent, Registry, tool
from tests.helpers import calls, script

BUDGET = 1_000
LEAD_CALL = {"usage": {"prompt_tokens": 100, "completion_tokens": 0}}  # the lead's first call: 100
CHILD_CALL = {"usage": {"prompt_tokens": 150, "completion_tokens": 50}}  # each child call: 200
CHILDREN = 3
# The lead has 900 left after its first call: each child gets 300. A child's first call spends 200;
# its second reserves the 100 left (its request asks for at most 100 output tokens) and spends 200
# again (input tokens are not reserved): 400, over its share by 100 = that call's overshoot; it fails.
CHILD_SPENT = 400
OVERSHOOT = 100  # per child: u - r of its last call (200 - 100), at most that call's input (150)


@tool
def fact(topic: str) -> str:
    """A fact, at once.

    Args:
        topic: What to look up.
    """
    return f"{topic}: the moon pulls the sea"


def parallel_team(llm: Any) -> Registry:
    """`lead` asks `scholar` three times at once; each scholar keeps asking for facts."""
    child_steps = [calls(("fact", {"topic": "tides"})) | CHILD_CALL] * (2 * CHILDREN)
    scholar = Agent(name="scholar", model=script(llm, *child_steps), tools=[fact], max_turns=5)
    asks = [("ask", {"input": f"tides, part {i}"}) for i in range(CHILDREN)]
    lead_model = script(llm, calls(*asks) | LEAD_CALL, {"content": "never asked"})
    lead = Agent(name="lead", model=lead_model, tools=[scholar.as_tool(name="ask")], token_budget=BUDGET)
    return Registry(agents=[lead])


def pausing_agent(llm: Any) -> Registry:
    """`careful` has 100 tokens and pauses when they are spent: its first call spends 150 and asks
    for a fact; after a raise the fact runs and its second call answers."""
    model = script(
        llm,
        calls(("fact", {"topic": "tides"})) | {"usage": {"prompt_tokens": 120, "completion_tokens": 30}},
        {"content": "Tides follow the moon.", "usage": {"prompt_tokens": 40, "completion_tokens": 10}},
    )
    careful = Agent(name="careful", model=model, tools=[fact], token_budget=100, on_budget="pause")
    return Registry(agents=[careful])


def lead_with_a_napping_child(llm: Any, released: asyncio.Event) -> Agent:
    """A lead (20,000 tokens) whose one call asks `scholar` (its share of them; 500 of its own),
    which naps in a tool first until `released` is set (at most a minute): a person pauses the
    child meanwhile, and the test lets the tool end once the pause is asked, not after a fixed
    time a loaded machine may outlast."""

    @tool
    async def nap(seconds: float) -> str:
        """Wait a while.

        Args:
            seconds: How long at most.
        """
        await asyncio.wait_for(released.wait(), seconds)
        return "rested"

    usage = {"usage": {"prompt_tokens": 100, "completion_tokens": 0}}
    scholar = Agent(
        name="scholar",
        model=script(llm, calls(("nap", {"seconds": 60})) | usage, {"content": "tides follow the moon"} | usage),
        tools=[nap],
        token_budget=500,
    )
    lead_model = script(llm, calls(("ask", {"input": "tides"})) | usage, {"content": "done"} | usage)
    return Agent(name="lead", model=lead_model, tools=[scholar.as_tool(name="ask")], token_budget=20_000)
