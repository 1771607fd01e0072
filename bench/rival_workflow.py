"""BENCH-ONLY workflow: the bench's scripted loop written as a user of Temporal's OpenAI Agents
integration would write it (its README's `WeatherAgent`): an Agents SDK `Agent` with one tool run
as an activity (`activity_as_tool`), driven by `Runner.run` inside the workflow. The model's
name (`loop:N:B`) scripts fake_llm exactly as for AgentRun. Imported in the sandbox per run, as
the integration's own workflows are; the worker is built in `bench.rival`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from temporalio.openai_agents.workflow import activity_as_tool

    from bench.variant_types import RIVAL_WORKFLOW, RivalInput, RivalResult


@activity.defn(name="pad")
async def pad(i: int, size: int) -> str:
    """Return `size` characters of text for step i (as tests/fixtures/agents.py's `pad`).

    Args:
        i: Step number.
        size: How many characters to return.
    """
    line = f"step {i}: the quick brown fox jumps over the lazy dog. "
    return (line * (size // len(line) + 1))[:size]


@workflow.defn(name=RIVAL_WORKFLOW)
class RivalRun:
    @workflow.run
    async def run(self, input: RivalInput) -> RivalResult:
        agent = Agent[None](
            name="looper",
            instructions="Loop.",
            model=input.model,
            tools=[activity_as_tool(pad, start_to_close_timeout=timedelta(seconds=300))],
        )
        result = await Runner.run(agent, input=input.prompt, max_turns=input.max_turns)
        return RivalResult(output=str(result.final_output), turns=len(result.raw_responses))
