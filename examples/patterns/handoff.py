"""Handoff: a triage agent hands the customer to one of two specialists (the model decides,
inside one run).

    python -m examples.patterns.handoff "I was charged twice this month"
"""

from __future__ import annotations

import sys

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import FunctionModel, ModelRequest, Step, hand_off, reply
    from durable_agent_runner.workflow import run_agent_result

billing = Agent(name="billing", instructions="Answer billing questions.", handoff_description="Charges, invoices.")
tech = Agent(name="tech", instructions="Answer technical questions.", handoff_description="Bugs, errors, how-to.")
triage = Agent(name="triage", instructions="Hand the customer to the right specialist.", handoffs=[billing, tech])


@workflow.defn
class Support:
    @workflow.run
    async def run(self, message: str) -> str:
        result = await run_agent_result(triage, message)  # one child run; the handoff happens inside it
        return f"{result.agent}: {result.output}"


def offline(request: ModelRequest) -> Step:
    if request.agent == "triage":
        return hand_off("billing" if "charge" in request.prompt.lower() else "tech")
    if request.agent == "billing":
        return reply("I see two charges; the second is refunded within five days.")
    return reply("Clear the app's cache, then sign in again.")


OFFLINE = FunctionModel(offline)


async def main(message: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(Support, message, [triage, billing, tech], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "I was charged twice this month"))
