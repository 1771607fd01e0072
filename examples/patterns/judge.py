"""LLM as judge: an author writes, a judge with typed output says pass or not and why, the author
revises, until the judge passes it or ROUNDS are used up.

    python -m examples.patterns.judge "rivers"
"""

from __future__ import annotations

import sys

from temporalio import workflow
from temporalio.client import Client

with workflow.unsafe.imports_passed_through():  # the runner is no workflow code: pass it through
    from pydantic import BaseModel

    from durable_agent_runner import Agent, run_script
    from durable_agent_runner.testing import FunctionModel, ModelRequest, Step, output, reply
    from durable_agent_runner.workflow import run_agent


class Verdict(BaseModel):
    passed: bool
    feedback: str


author = Agent(name="author", instructions="Write a two-line rhyming poem on the topic; follow any feedback.")
judge = Agent(name="judge", instructions="Pass the poem only if it names the topic and rhymes.", output_type=Verdict)
ROUNDS = 3


@workflow.defn
class JudgeLoop:
    @workflow.run
    async def run(self, topic: str) -> str:
        poem = await run_agent(author, topic)
        for round in range(1, ROUNDS + 1):
            verdict: Verdict = await run_agent(judge, f"Topic: {topic}\nPoem:\n{poem}")  # typed
            if verdict.passed or round == ROUNDS:
                return f"{poem}\n({'passed' if verdict.passed else 'not passed'} after {round} round(s))"
            poem = await run_agent(author, f"Topic: {topic}\nYour poem:\n{poem}\nFeedback: {verdict.feedback}")
        raise AssertionError("unreachable")


def offline(request: ModelRequest) -> Step:
    if request.agent == "judge":
        return output(Verdict(passed="sea" in request.prompt, feedback="Name the topic, and make it rhyme."))
    if "Feedback:" in request.prompt:
        return reply("The rivers run to meet the sea,\nas every river longs to be.")
    return reply("Water moves downhill.\nIt is wet.")


OFFLINE = FunctionModel(offline)


async def main(topic: str, client: Client | None = None) -> str:
    from examples.patterns._run import run_pattern

    answer: str = await run_pattern(JudgeLoop, topic, [author, judge], OFFLINE, client=client)
    print(answer)
    return answer


if __name__ == "__main__":
    run_script(main(" ".join(sys.argv[1:]) or "rivers"))
