"""Typed output in scoring (issue 34, item 2): `MatchesSchema` with no schema of its own checks the
answer against the answering agent's `output_type`, and `IsInstance` names that type, in a durable
eval and in online scoring alike (the scoring activity is handed the agent's schema and type name)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio.client import Client

from durable_agent_runner import Agent, Registry
from durable_agent_runner.client import AgentClient
from durable_agent_runner.evals import Case, Dataset, EvaluatorSpec, IsInstance, MatchesSchema
from durable_agent_runner.evals.report import report
from tests.helpers import script
from tests.test_live_scores import scores

TYPED = [EvaluatorSpec(name="MatchesSchema"), EvaluatorSpec(name="IsInstance", args=("Verdict",))]


class Verdict(BaseModel):
    passed: bool
    note: str


def verdict_agent(model: str) -> Agent:
    evaluators = [MatchesSchema(), IsInstance(type_name="Verdict")]
    return Agent(
        name="verdicts", instructions="Judge.", model=model, output_type=Verdict, evaluators=evaluators, eval_sample=1.0
    )


async def test_an_eval_and_online_scoring_check_the_answer_against_the_agents_output_type(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    good = script(llm, *[{"content": '{"passed": true, "note": "fine"}'}] * 3)
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory(registry=Registry(agents=[verdict_agent(good)])):
        cases = [Case(name=f"case {i}", inputs=f"judge text {i}") for i in (1, 2)]
        ev = await agents.evals.start(Dataset(name="typed", cases=cases, evaluators=TYPED), agent="verdicts")
        final = await ev.wait(120)
        run = await agents.start("verdicts", "judge this")
        answer = await run.result(wait=60)
        live = await scores(client, run.id)
    rep = report(final)
    assert final.phase == "completed" and rep.passed == 2, [(r.case, r.scores, r.reasons) for r in rep.rows]
    for row in rep.rows:
        assert row.scores == {"MatchesSchema": True, "IsInstance": True}, row.reasons
        assert row.reasons["IsInstance"] == "output is a Verdict"
    assert answer == {"passed": True, "note": "fine"}  # JSON data: this client does not know the type
    by_name = {s.name: s for s in live.scores.scores}
    assert by_name["MatchesSchema"].value is True and by_name["IsInstance"].value is True, by_name
