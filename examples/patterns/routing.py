"""Routing: a classifier agent's typed output picks the specialist that answers (code routes, by
the type, not the model by a handoff).

    python -m examples.patterns.routing "The app crashes when I log in"
"""

from __future__ import annotations

import sys
from typing import Literal

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from pydantic import BaseModel

    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import FunctionModel, ModelRequest, Step, output, reply
    from durable_agent_runner.workflow import run_agent


class Route(BaseModel):
    kind: Literal["billing", "tech"]


classifier = Agent(name="classifier", instructions="Is the message about billing or tech?", output_type=Route)
specialists = {
    "billing": Agent(name="billing", instructions="Answer billing questions."),
    "tech": Agent(name="tech", instructions="Answer technical questions."),
}


@workflow.defn
class Routing:
    @workflow.run
    async def run(self, message: str) -> str:
        route: Route = await run_agent(classifier, message)  # typed: a Route
        return f"{route.kind}: {await run_agent(specialists[route.kind], message)}"


def offline(request: ModelRequest) -> Step:
    if request.agent == "classifier":
        return output(Route(kind="billing" if "charge" in request.prompt.lower() else "tech"))
    if request.agent == "billing":
        return reply("The second charge is refunded within five days.")
    return reply("Update the app; version 4.2 fixes the crash at login.")


OFFLINE = FunctionModel(offline)


async def main(message: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(Routing, message, [classifier, *specialists.values()], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "The app crashes when I log in"))
