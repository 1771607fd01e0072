"""An eval started with `inline_scoring` scores a case whose evaluators are all cheap pure
built-ins in its workflow task, with no activity (the patch eval-inline-score-1.4.5;
machine/eval_plan.inline_scores): the same scores the scoring activity gives, and any other
evaluator (a judge, a regex, a schema, a transcript, a team's own) sends the case to the activity
as before. Without it, every case is scored by the activity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import ActivityEnvironment

from durable_agent_runner.activities.evals import EvalActivities
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.evals import Case, Dataset, EvaluatorSpec
from durable_agent_runner.evals.evaluators import INLINE
from durable_agent_runner.evals.registry import registered
from durable_agent_runner.machine import eval_plan
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te
from tests.helpers import replay, replay_history, script

HISTORY = Path(__file__).parent / "histories" / "eval_inline_1_4_5.json"


def request(specs: list[EvaluatorSpec], output: str = "fine", **fields: Any) -> te.ScoreInput:
    case = Case(name="c", inputs="q", expected_output=fields.pop("expected", None))
    return te.ScoreInput(
        case=case, evaluators=specs, run_id="r", output=output, output_json=eval_plan.output_json(output), **fields
    )


def by_activity(req: te.ScoreInput) -> te.Scored:
    """What the scoring activity gives for `req` (no model: these evaluators ask none)."""
    activities = EvalActivities(None, LLMSettings(base_url="http://127.0.0.1:9/v1", model="demo"), None)
    scored: te.Scored = asyncio.run(ActivityEnvironment().run(activities.score, req))
    return scored


def test_every_inline_name_is_a_registered_built_in():
    known = registered()
    assert INLINE <= set(known), INLINE - set(known)
    assert all(known[name].__module__ == "durable_agent_runner.evals.evaluators" for name in INLINE)


@pytest.mark.parametrize(
    "other",
    [
        EvaluatorSpec(name="Regex", args=("fine",)),
        EvaluatorSpec(name="MatchesSchema", kwargs={"json_schema": {"type": "object"}}),
        EvaluatorSpec(name="CalledTool", args=("lookup",)),
        EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "fine"}),
        EvaluatorSpec(name="TeamsOwn"),  # a team's evaluator (or a name no worker registered)
    ],
)
def test_any_other_evaluator_sends_the_case_to_the_scoring_activity(other):
    contains = EvaluatorSpec(name="Contains", args=("fine",))
    assert eval_plan.inline_scores(request([contains, other])) is None
    in_case = request([contains])
    in_case = in_case.model_copy(update={"case": in_case.case.model_copy(update={"evaluators": [other]})})
    assert eval_plan.inline_scores(in_case) is None  # a case's own evaluators count too
    assert eval_plan.inline_scores(request([contains])) is not None


def test_bad_arguments_are_that_evaluators_error_inline_as_in_the_activity():
    req = request([EvaluatorSpec(name="MaxTurns", kwargs={"turns": -1}), EvaluatorSpec(name="Contains", args=("f",))])
    scored = eval_plan.inline_scores(req)
    assert scored is not None and scored == by_activity(req)
    bad, good = scored.scores
    assert bad.error and "turns" in bad.error and good.value is True


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=16) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
SPECS = st.one_of(
    st.builds(
        lambda v, cs, a: EvaluatorSpec(name="Contains", kwargs={"value": v, "case_sensitive": cs, "as_strings": a}),
        JSON,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(lambda v: EvaluatorSpec(name="Equals", kwargs={"value": v}), JSON),
    st.just(EvaluatorSpec(name="EqualsExpected")),
    st.builds(lambda n: EvaluatorSpec(name="IsInstance", args=(n,)), st.sampled_from(["str", "int", "dict", "Answer"])),
    st.builds(lambda n: EvaluatorSpec(name="MaxTurns", args=(n,)), st.integers(-1, 4)),
    st.builds(lambda n: EvaluatorSpec(name="MaxTokens", args=(n,)), st.integers(0, 50)),
    st.builds(lambda n: EvaluatorSpec(name="MaxCostUSD", args=(n,)), st.floats(0, 1)),
    st.builds(lambda s: EvaluatorSpec(name="MaxDuration", args=(s,)), st.sampled_from([0.5, 3, "PT2S", "bad"])),
    st.builds(lambda s: EvaluatorSpec(name="MaxSeconds", args=(s,)), st.floats(0, 5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(SPECS, max_size=4),
    output=st.one_of(st.text(max_size=12), JSON.map(json.dumps)),
    expected=JSON,
    turns=st.integers(0, 5),
    tokens=st.integers(0, 40),
    seconds=st.floats(0, 5),
    type_name=st.sampled_from([None, "Answer"]),
)
def test_inline_scores_are_the_scoring_activitys(specs, output, expected, turns, tokens, seconds, type_name):
    """The property: for any answer, run facts and cheap built-ins (good arguments or bad), the
    scores computed in the workflow task equal the activity's, in order, reasons and errors too."""
    req = request(
        specs,
        output,
        expected=expected,
        turns=turns,
        usage=t.Usage(input_tokens=tokens, output_tokens=1, cost_usd=tokens / 100),
        seconds=seconds,
        output_type_name=type_name,
    )
    inline = eval_plan.inline_scores(req)
    assert inline is not None
    assert inline == by_activity(req)


async def test_the_checked_in_history_scores_the_cheap_cases_without_an_activity():
    """tests/histories/eval_inline_1_4_5.json (tests/record_eval_history.py --inline): an eval
    asked for inline scoring, three cases scored by Contains, case 3 by its own LLM judge too. It
    replays; its only scoring activity is case 3's; each case passed, and cases 1 and 2 carry
    Contains' score."""
    history = WorkflowHistory.from_json("eval_inline_1_4_5", HISTORY.read_text())
    await replay_history(history)
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert [a.activity_type.name for a in scheduled] == [t.RESOLVE_AGENT_ACTIVITY, te.EVAL_SCORE_ACTIVITY]
    scored_case = json.loads(scheduled[1].input.payloads[0].data)["case"]["name"]
    assert scored_case == "case 3"
    end = history.events[-1].workflow_execution_completed_event_attributes.result.payloads[0]
    results = {r["case"]: r for r in json.loads(end.data)["status"]["results"]}
    assert all(r["passed"] for r in results.values()) and len(results) == 3
    assert [s["name"] for s in results["case 1"]["scores"]] == ["Contains"]
    assert [s["name"] for s in results["case 3"]["scores"]] == ["Contains", "LLMJudge", "LLMJudge_score"]


async def test_only_an_eval_asked_for_it_scores_in_its_workflow_task(client, task_queue, llm, worker_factory):
    """The same two cases, scored by Contains: by default each is scored by a scoring activity
    (its scores recorded as that activity's result); with inline_scoring, by none, with the same
    scores. A value that is not a bool is refused before anything starts."""
    model = script(llm, {"content": "alpha"}, {"content": "alpha"}, {"content": "alpha"}, {"content": "alpha"})
    cases = [Case(name=f"case {i}", inputs=f"q{i}") for i in (1, 2)]
    data = Dataset(name="inline", cases=cases, evaluators=[EvaluatorSpec(name="Contains", args=("alpha",))])
    evals = AgentClient(client, task_queue=task_queue).evals
    with pytest.raises(BadArgument, match="inline_scoring"):
        await evals.start(data, agent="scripted", model=model, inline_scoring="yes")  # type: ignore[arg-type]
    scheduled: dict[bool, list[str]] = {}
    scores: dict[bool, list[object]] = {}
    async with worker_factory():
        for inline in (False, True):
            ev = await evals.start(data, agent="scripted", model=model, concurrency=1, inline_scoring=inline)
            final = await ev.wait(120)
            assert final.done == final.passed == 2, final
            scores[inline] = [(r.case, [(s.name, s.value, s.error) for s in r.scores]) for r in final.results]
            handle = client.get_workflow_handle(ev.eval_id)
            history = await handle.fetch_history()
            scheduled[inline] = [
                e.activity_task_scheduled_event_attributes.activity_type.name
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            ]
            await replay(handle)
    assert scheduled[False] == [t.RESOLVE_AGENT_ACTIVITY, te.EVAL_SCORE_ACTIVITY, te.EVAL_SCORE_ACTIVITY]
    assert scheduled[True] == [t.RESOLVE_AGENT_ACTIVITY]
    assert scores[True] == scores[False] == [(f"case {i}", [("Contains", True, None)]) for i in (1, 2)]
