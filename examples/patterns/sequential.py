"""Sequential: an outline agent feeds a writer agent; code decides the order, each step durable.

python -m examples.patterns.sequential "rivers of Europe"
"""

from __future__ import annotations

import sys

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import ScriptedModel, reply
    from durable_agent_runner.workflow import run_agent

outliner = Agent(name="outliner", instructions="Outline the topic in three short numbered points.")
writer = Agent(name="writer", instructions="Write one short paragraph that follows the outline.")


@workflow.defn
class Sequential:
    @workflow.run
    async def run(self, topic: str) -> str:
        outline = await run_agent(outliner, topic)  # a child AgentRun: {this id}/outliner-1
        return await run_agent(writer, f"Topic: {topic}\nOutline:\n{outline}", output_type=str)


OFFLINE = ScriptedModel(
    {
        outliner: [reply("1. Where rivers start. 2. How they run. 3. Where they end.")],
        writer: [reply("Rivers start in the hills, run through the plains and end in the sea.")],
    }
)


async def main(topic: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(Sequential, topic, [outliner, writer], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "rivers of Europe"))
