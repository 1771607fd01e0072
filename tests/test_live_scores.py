"""Online scoring (issue 34, item 6): an agent's evaluators score a share of its completed runs,
chosen by run id. The scores are recorded beside the run (its ScoreRun, `{run id}.scores`) and
shown by `status`, export and the console; they never change or delay the run's result, and an
evaluator that raises is that score's error, never the run's."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio.client import Client
from temporalio.service import RPCError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.client import AgentClient
from durable_agent_runner.evals import Contains, MaxTurns, register
from durable_agent_runner.machine.live_scores import sampled
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import live_scores as tl
from tests.console_helpers import serve_console
from tests.helpers import replay, script, start

HISTORIES = Path(__file__).parent / "histories"


@register(name="explodes_live")
def explodes_live(ctx: Any) -> bool:
    raise RuntimeError("this evaluator always raises")


def scored_agent(model: str, share: float = 1.0) -> Agent:
    evaluators = [Contains(value="sunny"), MaxTurns(turns=1), "explodes_live"]
    return Agent(name="scored", instructions="Answer.", model=model, evaluators=evaluators, eval_sample=share)


async def scores(client: Client, run_id: str, timeout: float = 60) -> Any:
    """The run's scores once its ScoreRun has them, as the Python client's status shows them."""
    run = AgentClient(client).get(run_id)
    deadline = time.monotonic() + timeout
    while True:
        s = await run.status()
        if s.scores is not None and s.scores.state == "scored":
            return s
        assert time.monotonic() < deadline, f"no scores for {run_id}: {s.scores}"
        await asyncio.sleep(0.2)


async def test_a_sampled_run_is_scored_beside_its_result_and_shown_everywhere(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, {"content": "It is sunny in Paris."})
    async with worker_factory(registry=Registry(agents=[scored_agent(model)])):
        recording = bool(os.environ.get("RECORD_HISTORIES"))  # re-record only on purpose
        run_id = "live_scores_2_0" if recording else f"test-{uuid.uuid4().hex[:12]}"  # replayed under its name
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="Weather in Paris?", agent="scored"),
            id=run_id,
            task_queue=task_queue,
            result_type=t.RunResult,
        )
        result = await handle.result()
        status = await scores(client, handle.id)
        exported = [line for line in await AgentClient(client).get(handle.id).export() if line["type"] == "scores"]
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=20) as web:
            page = (await web.get(f"/runs/{handle.id}")).text
        await replay(handle)
        scoring = client.get_workflow_handle(tl.scores_id(handle.id))
        await replay(scoring)
        if recording:
            (HISTORIES / "live_scores_2_0.json").write_text((await handle.fetch_history()).to_json())
            (HISTORIES / "score_run_2_0.json").write_text((await scoring.fetch_history()).to_json())
    assert result.output == "It is sunny in Paris."  # the answer, as without scoring
    by_name = {s.name: s for s in status.scores.scores}
    assert by_name["Contains"].value is True and by_name["MaxTurns"].value is True
    assert by_name["explodes_live"].value is None and "this evaluator always raises" in by_name["explodes_live"].error
    assert status.status == "completed"
    (line,) = exported
    assert line["state"] == "scored" and [s["name"] for s in line["scores"]] == [
        "Contains",
        "MaxTurns",
        "explodes_live",
    ]
    assert "<dt>scores</dt>" in page and "Contains ✓" in page and "explodes_live errored" in page


async def test_runs_not_sampled_and_child_runs_are_not_scored(
    client: Client, task_queue: str, worker_factory: Any, llm: Any
) -> None:
    model = script(llm, {"content": "It is sunny."})
    never = scored_agent(model, share=0.0)
    lead_model = script(llm, {"tool_calls": [{"name": "ask", "arguments": {"input": "weather"}}]}, {"content": "ok"})
    child = scored_agent(model).model_copy(update={"name": "helper"})
    lead = Agent(name="lead", model=lead_model, tools=[child.as_tool(name="ask")])
    async with worker_factory(registry=Registry(agents=[never, lead])):
        quiet = await start(client, task_queue, "Weather?", agent="scored")
        parent = await start(client, task_queue, "Weather?", agent="lead")
        await quiet.result()
        await parent.result()
        status = await AgentClient(client).get(quiet.id).status()
    assert status.status == "completed" and status.scores is None
    for run_id in (quiet.id, parent.id):
        with pytest.raises(RPCError):
            await client.get_workflow_handle(tl.scores_id(run_id)).describe()
    children = [wf.id async for wf in client.list_workflows(f'WorkflowId STARTS_WITH "{parent.id}."')]
    assert children and not [c for c in children if c.endswith(tl.SCORES_SUFFIX)]


@pytest.mark.pure
def test_an_agent_refuses_evaluators_it_cannot_build_and_shares_out_of_range() -> None:
    with pytest.raises(ValidationError, match="no evaluator named 'Nope'"):
        Agent(name="a", evaluators=["Nope"], eval_sample=0.5)
    with pytest.raises(ValidationError, match="MaxTurns"):
        Agent(name="a", evaluators=[{"MaxTurns": {"turn": 3}}])
    with pytest.raises(ValidationError, match="eval_sample"):
        Agent(name="a", evaluators=["EqualsExpected"], eval_sample=1.5)
    spec = Agent(name="a", evaluators=[Contains(value="x"), "EqualsExpected"], eval_sample=0.25).spec()
    assert spec.evaluators == [{"Contains": "x"}, "EqualsExpected"] and spec.eval_sample == 0.25
    assert Agent(name="plain").version == Agent(name="plain", evaluators=[], eval_sample=0.0).version


@pytest.mark.pure
def test_about_the_share_asked_of_run_ids_is_sampled() -> None:
    ids = [f"run-{i}" for i in range(4000)]
    share = sum(sampled(i, 0.1) for i in ids) / len(ids)
    assert 0.08 < share < 0.12
    assert not any(sampled(i, 0.0) for i in ids) and all(sampled(i, 1.0) for i in ids)


@pytest.mark.pure
@given(st.text(min_size=1, max_size=80), st.floats(0, 1), st.floats(0, 1))
def test_a_run_sampled_at_a_share_is_sampled_at_any_larger_one(run_id: str, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert not sampled(run_id, low) or sampled(run_id, high)
    assert sampled(run_id, low) == sampled(run_id, low)  # the same answer every time: replay-safe


@pytest.mark.pure
def test_the_checked_in_histories_start_one_abandoned_score_run_that_scores_once() -> None:
    from temporalio.api.enums.v1 import EventType, ParentClosePolicy
    from temporalio.client import WorkflowHistory

    run = WorkflowHistory.from_json("live_scores_1_4", (HISTORIES / "live_scores_1_4.json").read_text())
    starts = [
        e.start_child_workflow_execution_initiated_event_attributes
        for e in run.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert [(s.workflow_type.name, s.parent_close_policy) for s in starts] == [
        (tl.SCORE_WORKFLOW, ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON)
    ]
    assert starts[0].workflow_id.endswith(tl.SCORES_SUFFIX)
    scoring = WorkflowHistory.from_json("score_run_1_4", (HISTORIES / "score_run_1_4.json").read_text())
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in scoring.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["eval.score"]
