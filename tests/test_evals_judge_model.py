"""The LLM judge's model call, through the fake model: in the scoring activity, streamed and not
(as the worker streams), its usage returned; a judge whose call fails for good is that score's
error; and in a whole eval, the judge's request counts in the case's usage."""

from __future__ import annotations

import dataclasses
import json

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner.activities.evals import EvalActivities
from durable_agent_runner.activities.model import ModelActivities, new_http_client
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.evals import Case, Dataset, EvaluatorSpec
from durable_agent_runner.workflows.types import evals as te
from tests.helpers import script

VERDICT = json.dumps({"reason": "polite and correct", "pass": True, "score": 0.8})
JUDGE = EvaluatorSpec(
    name="LLMJudge", kwargs={"rubric": "The answer is polite", "score": {}, "model_settings": {"temperature": 0.0}}
)


def score_input(model: str) -> te.ScoreInput:
    case = Case(name="polite", inputs="say hi", evaluators=[JUDGE])
    return te.ScoreInput(case=case, run_id="run-1", output="Hello there!", turns=1, judge_model=model)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_judge_asks_the_model_streamed_or_not_and_counts_its_usage(llm, stream):
    model = script(llm, {"content": VERDICT})
    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=stream)
    async with new_http_client(settings) as http:
        activities = EvalActivities(None, settings, ModelActivities(None, settings, http))
        scored = await ActivityEnvironment().run(activities.score, score_input(model))
    by = {s.name: s for s in scored.scores}
    assert by["LLMJudge"].value is True and by["LLMJudge"].reason == "polite and correct"
    assert by["LLMJudge_score"].value == 0.8
    assert scored.usage.requests == 1 and scored.usage.total_tokens > 0
    (request,) = llm.requests()
    body = request["body"] if isinstance(request["body"], dict) else json.loads(request["body"])
    assert bool(body.get("stream")) is stream and body["temperature"] == 0.0
    assert "<Output>\nHello there!\n</Output>" in body["messages"][-1]["content"]


async def test_a_judge_whose_call_fails_for_good_is_that_scores_error(llm):
    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=False)
    async with new_http_client(settings) as http:
        activities = EvalActivities(None, settings, ModelActivities(None, settings, http))
        request = score_input("script:nobody-wrote-this")  # the fake answers 404: not retryable
        scored = await ActivityEnvironment().run(activities.score, request)
        hot = EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "r", "model_settings": {"temperature": 9}})
        bad = request.model_copy(update={"case": Case(name="x", inputs="y", evaluators=[hot])})
        refused = await ActivityEnvironment().run(activities.score, bad)
    (judge,) = [s for s in scored.scores if s.name == "LLMJudge"]
    assert judge.error is not None and judge.error.startswith("judge model call failed")
    (judge,) = refused.scores
    assert judge.error is not None and "model_settings: " in judge.error and "temperature" in judge.error


async def test_a_judge_in_an_eval_counts_in_the_cases_usage(client, task_queue, llm, worker_factory):
    model = script(llm, {"content": VERDICT})  # the agent's answer and the judge's verdict alike
    cases = [Case(name=f"c{i}", inputs=f"q{i}") for i in range(3)]
    data = Dataset(name="judged", cases=cases, evaluators=[JUDGE])
    async with worker_factory():
        ev = await AgentClient(client, task_queue=task_queue).evals.start(data, agent="scripted", model=model)
        final = await ev.wait(120)
    assert final.passed == 3
    assert all(r.usage.requests == 2 for r in final.results)  # the run's one call and the judge's
    assert all({s.name for s in r.scores} == {"LLMJudge", "LLMJudge_score"} for r in final.results)


def judged_by(llm: object, model: str) -> int:
    return sum(
        1
        for r in llm.requests()
        if (r["body"] if isinstance(r["body"], dict) else json.loads(r["body"]))["model"] == model
    )  # type: ignore[attr-defined]


async def test_a_retried_scoring_asks_only_the_judges_that_had_not_answered(llm):
    """Two judges; the second's model answers 503 once. The retry (attempt 2, given the first
    attempt's last heartbeat as Temporal gives it) asks the second judge only, and the usage
    returned still counts both judges' calls."""
    first, second = script(llm, {"content": VERDICT}), script(llm, {"content": VERDICT})
    judges = [
        EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "polite", "model": first}),
        EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "correct", "model": second}),
    ]
    request = score_input(first).model_copy(update={"case": Case(name="two", inputs="say hi", evaluators=judges)})
    llm.add_fault("status", status=503, model=second)
    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=False)
    beats: list[tuple[object, ...]] = []
    async with new_http_client(settings) as http:
        activities = EvalActivities(None, settings, ModelActivities(None, settings, http))
        env = ActivityEnvironment()
        env.on_heartbeat = lambda *details: beats.append(details)
        with pytest.raises(ApplicationError):  # retryable: Temporal retries the scoring
            await env.run(activities.score, request)
        assert (judged_by(llm, first), judged_by(llm, second)) == (1, 1)
        retry = ActivityEnvironment()
        retry.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=list(beats[-1]))
        scored = await retry.run(activities.score, request)
    assert (judged_by(llm, first), judged_by(llm, second)) == (1, 2)
    assert [s.value for s in scored.scores if s.error is None] == [True, True]
    assert scored.usage.requests == 2


async def test_in_an_eval_a_judge_that_answered_is_not_asked_again_when_scoring_is_retried(
    client, task_queue, llm, worker_factory
):
    agent_model, first, second = (script(llm, {"content": VERDICT}) for _ in range(3))
    judges = [
        EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "polite", "model": first}),
        EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "correct", "model": second}),
    ]
    llm.add_fault("status", status=503, model=second)
    data = Dataset(name="retried", cases=[Case(name="one", inputs="q")], evaluators=judges)
    async with worker_factory():
        ev = await AgentClient(client, task_queue=task_queue).evals.start(data, agent="scripted", model=agent_model)
        final = await ev.wait(120)
    assert final.passed == 1
    assert (judged_by(llm, first), judged_by(llm, second)) == (1, 2)  # the first judge's reply was kept
    (result,) = final.results
    assert result.usage.requests == 3  # the run's call and each judge's one answered call
