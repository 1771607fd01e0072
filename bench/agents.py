"""The bench's agents, beside tests/fixtures/agents.py's `looper` (whose `pad` tool is a regular
activity): `looper_local`, the same loop with its tool declared cheap and idempotent, so it runs
as a local activity in the workflow task that handles the model's reply (one dispatch a turn,
as the demo's pure lookups run); and `looper_one`, which also makes its model call a local
activity (the `local_model_call` opt-in: one workflow task a turn, no streaming)."""

from __future__ import annotations

from durable_agent_runner import Agent, tool
from tests.fixtures import agents as fixtures

pad_local = tool(fixtures.pad.fn, name="pad_local", local=True)  # `pad`'s function, run locally

looper_local = Agent(name="looper_local", instructions="Loop.", tools=[pad_local], max_turns=200)
# bench.caching: an agent with a 10,000-token system prompt (40,000 characters: fake_llm counts
# four a token), with and without the runner's prompt-cache marks.
POLICY = ("Rule: answer from the checklist, in order, and call pad once per item. " * 600)[:40_000]
cache_reader = Agent(name="cache_reader", instructions=POLICY, tools=[fixtures.pad], max_turns=30)
plain_reader = Agent(
    name="plain_reader", instructions=POLICY + " ", tools=[fixtures.pad], max_turns=30, prompt_cache="off"
)
looper_one = Agent(name="looper_one", instructions="Loop.", tools=[pad_local], max_turns=200, local_model_call=True)
