"""Concurrent: three agents answer at once (code fans out and gathers, not the model), a fourth
merges their answers.

    python -m examples.patterns.concurrent "Should our city build a tram?"
"""

from __future__ import annotations

import asyncio
import sys

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import ScriptedModel, reply
    from durable_agent_runner.workflow import run_agent

VIEWS = ("economist", "engineer", "historian")
analysts = [Agent(name=v, instructions=f"Answer as an {v} would, in two sentences.") for v in VIEWS]
merger = Agent(name="merger", instructions="Merge the answers into one balanced paragraph.")


@workflow.defn
class Concurrent:
    @workflow.run
    async def run(self, question: str) -> str:
        answers = await asyncio.gather(*(run_agent(a, question) for a in analysts))  # three children at once
        views = "\n\n".join(f"{a.name}: {text}" for a, text in zip(analysts, answers, strict=True))
        return await run_agent(merger, f"Question: {question}\n\n{views}", output_type=str)


OFFLINE = ScriptedModel(
    {
        "economist": [reply("It pays back within twenty years if ridership holds.")],
        "engineer": [reply("The main street can carry rails; the bridge needs work.")],
        "historian": [reply("The city removed its last tram in 1961 and regretted it.")],
        "merger": [
            reply("Build it: it pays back, it fits once the bridge is fixed, and the city has missed one before.")
        ],
    }
)


async def main(question: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(Concurrent, question, [*analysts, merger], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "Should our city build a tram?"))
