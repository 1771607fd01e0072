"""Manager: a manager agent calls specialist agents as tools (each call a child run) and writes
the answer.

    python -m examples.patterns.manager "Is a heat pump worth it in Oslo?"
"""

from __future__ import annotations

import sys

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import ScriptedModel, call, reply
    from durable_agent_runner.workflow import run_agent

researcher = Agent(name="researcher", instructions="Find the facts; answer in one sentence.")
critic = Agent(name="critic", instructions="Name the weakest point of the idea in one sentence.")
manager = Agent(
    name="manager",
    instructions="Ask your specialists, then answer in two sentences.",
    tools=[
        researcher.as_tool(name="research", description="Facts."),
        critic.as_tool(name="critique", description="Risks."),
    ],
)


@workflow.defn
class Manager:
    @workflow.run
    async def run(self, question: str) -> str:
        return await run_agent(manager, question, output_type=str)  # the model decides which specialist to ask


OFFLINE = ScriptedModel(
    {
        "manager": [
            [call("research", input="Heat pump savings in Oslo"), call("critique", input="Heat pumps in Oslo")],
            reply("Yes: it cuts heating costs by about half; check the installer's cold-climate rating first."),
        ],
        "researcher": [reply("Heat pumps halve heating costs in Oslo's climate.")],
        "critic": [reply("Cheap units lose efficiency below -15 °C.")],
    }
)


async def main(question: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(Manager, question, [manager, researcher, critic], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "Is a heat pump worth it in Oslo?"))
