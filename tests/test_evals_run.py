"""A durable eval on the scripted fake model: each case runs once as a child run, is scored in an
activity (an evaluator that raises is that score's error), and the report and a baseline's gate
come out right. Replayed from its own history."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.errors import DecisionRefused, NotThatKind, RunNotFound
from durable_agent_runner.client.evals import progress_line
from durable_agent_runner.evals import Case, Dataset, EvaluatorContext, EvaluatorSpec, register
from durable_agent_runner.evals.report import compare, gate, markdown, report
from durable_agent_runner.machine import eval_plan
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te
from tests.helpers import replay, replay_history, script
from tests.test_evals_cli import client_py


@register(name="ExplodesOnSix")
def explodes_on_six(ctx: EvaluatorContext) -> bool:
    """A custom evaluator with a bug: case 6 makes it raise."""
    if ctx.case_name == "case 6":
        raise RuntimeError("this evaluator has a bug")
    return True


HOLD = threading.Event()  # set: the scoring of "case 1" by HoldsCaseOne goes on


@register(name="HoldsCaseOne")
def holds_case_one(ctx: EvaluatorContext) -> bool:
    """A slow custom evaluator: case 1's scoring waits until the test lets it go (30 s at most)."""
    if ctx.case_name == "case 1":
        HOLD.wait(30)
    return True


def dataset(n: int = 6, marker: str = "", custom: bool = True) -> Dataset:
    """n cases; the first half want 'alpha' in the answer, the rest 'beta'; `custom`: every case
    also runs ExplodesOnSix (registered in this process only)."""
    cases = [
        Case(
            name=f"case {i}",
            inputs=f"question {i} {marker}".strip(),
            evaluators=[EvaluatorSpec(name="Contains", args=("alpha" if i <= n // 2 else "beta",))],
        )
        for i in range(1, n + 1)
    ]
    evaluators = [EvaluatorSpec(name="ExplodesOnSix")] if custom else []
    return Dataset(name="smoke", cases=cases, evaluators=evaluators)


def requests_per_case(llm: Any, marker: str) -> Counter[str]:
    """The fake model's requests, by the case question they carried."""
    counts: Counter[str] = Counter()
    for entry in llm.requests():
        text = str(entry.get("body"))
        for word in text.split("question ")[1:]:
            number = word.split()[0].strip("\"',")
            if marker in text:
                counts[f"case {number}"] += 1
            break
    return counts


async def test_a_small_eval_runs_each_case_once_and_reports(client, task_queue, llm, worker_factory):
    model = script(llm, {"content": "alpha beta"})
    marker = uuid.uuid4().hex[:8]
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(dataset(6, marker), agent="scripted", model=model, concurrency=3)
        final = await ev.wait(120)
        assert final.phase == "completed" and final.done == final.total == 6
        rep = report(final)
        assert [r.case for r in rep.rows] == [f"case {i}" for i in range(1, 7)]
        assert all(r.end == "completed" and r.turns == 1 and r.tokens > 0 for r in rep.rows)
        by = {r.case: r for r in rep.rows}
        # case 6's custom evaluator raised: that score is errored with the reason, and the case fails
        assert by["case 6"].scores["ExplodesOnSix"] is None
        assert "this evaluator has a bug" in by["case 6"].reasons["ExplodesOnSix"]
        assert not by["case 6"].passed and all(by[f"case {i}"].passed for i in range(1, 6))
        assert rep.passed == 5 and rep.pass_rate == round(5 / 6, 6)
        assert {e.name: e.errors for e in rep.evaluators}["ExplodesOnSix"] == 1
        assert "| case 6 | 1 | fail |" in markdown(rep)
        status = await ev.status()
        assert status.done == 6 and status.usage.total_tokens == rep.tokens
        await replay(client.get_workflow_handle(ev.eval_id))
    assert requests_per_case(llm, marker) == Counter({f"case {i}": 1 for i in range(1, 7)})


async def test_an_evals_id_given_to_a_runs_verb_says_what_it_is_and_back(
    temporal_server, client, task_queue, llm, worker_factory
):
    """Each verb meets the id of the other kind with one line naming what the id is, and how to see
    it, before anything is sent. Before, `result EVAL` printed five pydantic errors, `inspect
    EVAL` Temporal's "query handler not found" and `status EVAL` a run at turn 0."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(dataset(1, custom=False), agent="scripted", model=script(llm, {"content": "ok"}))
        final = await ev.wait(60)
        case_run = agents.get(final.results[0].run_id)
        mistaken = agents.get(ev.eval_id)
        shows = f"`durable-agent-runner eval status {ev.eval_id}` shows it"  # in code: the installed command
        said = re.escape(f"'{ev.eval_id}' is an eval, not an agent run: {shows}")
        for verb in (
            mistaken.status,
            mistaken.result,
            mistaken.inspect,
            mistaken.transcript,
            mistaken.export,
            mistaken.pause,
            lambda: mistaken.approve("call_1_0"),
            lambda: mistaken.fork(1),
        ):
            with pytest.raises(NotThatKind, match=said):
                await verb()
        for eval_verb in (agents.evals.get(case_run.id).status, lambda: agents.evals.get(case_run.id).wait(5)):
            with pytest.raises(NotThatKind, match=re.escape("an agent run, not an eval: `durable-agent-runner status")):
                await eval_verb()
        with pytest.raises(NotThatKind, match="is an agent run, not an eval"):
            await agents.evals.get(case_run.id).resume(add_usd=1.0, wait=5)
        with pytest.raises(BadArgument, match=f"baseline: '{case_run.id}' is an agent run, not an eval$"):
            await agents.evals.start(dataset(1, custom=False), agent="scripted", baseline=case_run.id)
        assert isinstance(NotThatKind(ev.eval_id, te.EVAL_WORKFLOW, t.WORKFLOW_NAME), RunNotFound)
        with pytest.raises(DecisionRefused, match="has already ended"):  # `cancel` takes an eval too
            await mistaken.cancel()
        code, _, err = await client_py(temporal_server, task_queue, "result", ev.eval_id)
        assert code == 2 and "is an eval, not an agent run: `python client.py eval status" in err, err
        assert "Traceback" not in err


async def test_the_baseline_gate_fails_on_a_planted_regression_and_passes_without(
    client, task_queue, llm, worker_factory
):
    good, bad = script(llm, {"content": "alpha beta"}), script(llm, {"content": "alpha only"})
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        base = await agents.evals.start(dataset(4), agent="scripted", model=good, concurrency=4)
        worse = await agents.evals.start(dataset(4), agent="scripted", model=bad, baseline=base.eval_id)
        same = await agents.evals.start(dataset(4), agent="scripted", model=good, baseline=base.eval_id)
        for ev in (base, worse, same):
            await ev.wait(120)
        now, diff = await worse.report()
        assert diff is not None and diff.regressed == ["case 3", "case 4"] and diff.improved == []
        failures = gate(now, diff, fail_on_regression=True)
        assert len(failures) == 1 and "case 3, case 4" in failures[0]
        assert gate(now, None, min_pass_rate=0.9)[0].startswith("pass rate 50.0% is below 90.0%")
        again, diff2 = await same.report()
        assert diff2 is not None and diff2.regressed == [] and gate(again, diff2, fail_on_regression=True) == []
        assert compare(again, again).regressed == []


async def test_an_eval_within_a_budget_fails_the_cases_left_when_it_is_spent(client, task_queue, llm, worker_factory):
    model = script(llm, {"content": "alpha beta", "usage": {"prompt_tokens": 500, "completion_tokens": 500}})
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(
            dataset(4), agent="scripted", model=model, concurrency=1, budget_tokens=2500, on_budget="fail"
        )
        final = await ev.wait(120)
    ends = Counter(r.end for r in final.results)
    assert final.done == 4 and ends["completed"] >= 2 and ends["budget"] >= 1, ends
    assert all("budget" in (r.error or "") for r in final.results if r.end == "budget")
    assert isinstance(final, te.EvalStatus)


async def test_an_eval_paused_on_its_budget_goes_on_when_a_person_raises_it(
    client, temporal_server, task_queue, llm, worker_factory
):
    """Paused on its budget; a person raises it with `client.py eval resume` and follows the rest
    with `client.py eval watch`, as the docs show."""
    model = script(llm, {"content": "alpha beta", "usage": {"prompt_tokens": 500, "completion_tokens": 500}})
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(
            dataset(4, custom=False), agent="scripted", model=model, concurrency=1, budget_tokens=2500,
            on_budget="pause",
        )  # fmt: skip
        status = await ev.status()
        for _ in range(200):
            status = await ev.status()
            if status.phase == "paused":
                break
            await asyncio.sleep(0.1)
        assert status.phase == "paused" and "token budget spent" in status.why and status.done == 3
        assert status.budget is not None and status.budget.tokens is not None
        code, out, err = await client_py(
            temporal_server, task_queue, "eval", "resume", ev.eval_id, "--add-tokens", "5000", "--json"
        )
        assert code == 0 and json.loads(out)["tokens"]["limit"] == 7500, (out, err)
        code, out, err = await client_py(temporal_server, task_queue, "eval", "watch", ev.eval_id, "--json")
        watched = json.loads(out)
        assert code == 0 and (watched["phase"], watched["done"], watched["passed"]) == ("completed", 4, 4), err
        final = await ev.wait(60)
    assert final.phase == "completed" and final.done == 4 and all(r.end == "completed" for r in final.results)
    await replay(client.get_workflow_handle(ev.eval_id))


async def test_a_long_eval_continues_as_new_carrying_its_results(client, task_queue, llm, worker_factory, monkeypatch):
    monkeypatch.setattr(eval_plan, "MAX_STARTS_PER_RUN", 3)  # this in-process worker's EvalRun reads it
    model = script(llm, {"content": "alpha beta"})
    marker = uuid.uuid4().hex[:8]
    async with worker_factory():
        ev = await AgentClient(client, task_queue=task_queue).evals.start(
            dataset(8, marker, custom=False), agent="scripted", model=model, concurrency=2
        )
        final = await ev.wait(120)
        desc = await client.get_workflow_handle(ev.eval_id).describe()
        await replay(client.get_workflow_handle(ev.eval_id))
    assert final.done == 8 and final.passed == 8
    assert desc.run_id != desc.raw_description.workflow_execution_info.first_run_id  # it continued as new
    assert requests_per_case(llm, marker) == Counter({f"case {i}": 1 for i in range(1, 9)})


@pytest.mark.pure
async def test_the_checked_in_eval_history_replays_and_holds_each_case_once():
    """tests/histories/eval_run_1_4.json (tests/record_eval_history.py): the agent resolved once,
    each case a child run under its derived id, each scored by one activity."""
    path = Path(__file__).parent / "histories" / "eval_run_1_4.json"
    history = WorkflowHistory.from_json("eval_run_1_4", path.read_text())
    await replay_history(history)
    children = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert children == [eval_plan.case_run_id("eval_run_1_4", f"case {i}", 1) for i in (1, 2, 3)]
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert activities == [t.RESOLVE_AGENT_ACTIVITY, *[te.EVAL_SCORE_ACTIVITY] * 3]


@pytest.mark.pure
async def test_the_next_case_starts_when_a_case_run_ends_beside_its_scoring():
    """tests/histories/eval_pace_1_4_4.json (the patch eval-pace-1.4.4; recorded as
    eval_run_1_4, 3 cases two at once, within a token budget): case 3 starts in the workflow task
    that learned case 1's run had ended, beside case 1's scoring, before any scoring came back."""
    path = Path(__file__).parent / "histories" / "eval_pace_1_4_4.json"
    history = WorkflowHistory.from_json("eval_pace_1_4_4", path.read_text())
    await replay_history(history)
    events = history.events
    case_3 = eval_plan.case_run_id("eval_pace_1_4_4", "case 3", 1)
    third = next(
        i
        for i, e in enumerate(events)
        if e.start_child_workflow_execution_initiated_event_attributes.workflow_id == case_3
    )
    scores = [
        i
        for i, e in enumerate(events)
        if e.activity_task_scheduled_event_attributes.activity_type.name == te.EVAL_SCORE_ACTIVITY
    ]
    kinds = [e.event_type for e in events]
    # the first scoring, then case 3's start, among one workflow task's commands: no score came back before it
    between = set(kinds[scores[0] : third])
    assert scores[0] < third and between == {EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}, between
    assert kinds.count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED) == 3


@pytest.mark.pure
async def test_a_dead_workers_scoring_is_taken_up_again_within_10_seconds():
    """tests/histories/eval_score_beat_1_4_5.json (the patch eval-score-beat-1.4.5; recorded as
    eval_run_1_4): each scoring activity's heartbeat timeout is 10 s, so a worker killed mid-
    scoring has it retried within 10 s of its last beat (every 2 s), not 30 (eval_pace_1_4_4,
    recorded before the patch, replays with its 30 s)."""

    def beats(name: str) -> list[float]:
        path = Path(__file__).parent / "histories" / f"{name}.json"
        history = WorkflowHistory.from_json(name, path.read_text())
        return [
            e.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta().total_seconds()
            for e in history.events
            if e.activity_task_scheduled_event_attributes.activity_type.name == te.EVAL_SCORE_ACTIVITY
        ]

    for name in ("eval_score_beat_1_4_5", "eval_pace_1_4_4"):
        path = Path(__file__).parent / "histories" / f"{name}.json"
        await replay_history(WorkflowHistory.from_json(name, path.read_text()))
    assert beats("eval_score_beat_1_4_5") == [10.0, 10.0, 10.0]
    assert beats("eval_pace_1_4_4") == [30.0, 30.0, 30.0]


@pytest.mark.pure
async def test_an_eval_started_before_the_pace_patch_replays_with_its_bound_of_100_starts():
    """tests/histories/eval_drain_1_4_3.json.gz: the first execution of an eval of 102 cases (the
    demo agent, concurrency 6), recorded by 1.4.3's code (7e137cb), which started 100 cases, let
    those in flight end and continued as new. 1.4.4's code replays it on the patch's old path: no
    marker, so the bound stays 100 (with 300 the 101st case would start, and the replay fails)."""
    path = Path(__file__).parent / "histories" / "eval_drain_1_4_3.json.gz"
    history = WorkflowHistory.from_json("eval_drain_1_4_3", gzip.decompress(path.read_bytes()).decode())
    await replay_history(history)
    kinds = [e.event_type for e in history.events]
    starts = kinds.count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    assert starts == eval_plan.MAX_STARTS_BEFORE_PACE
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert EventType.EVENT_TYPE_MARKER_RECORDED not in kinds  # no patch marker: the old path


async def test_the_next_case_runs_and_ends_while_a_slow_evaluator_scores_the_one_before(
    client, task_queue, llm, worker_factory
):
    """At concurrency 1, case 2 starts when case 1's run ends and finishes while case 1's slow
    scoring still goes on (1.4.3's eval waited for the score); status says which case is scored."""
    model = script(llm, {"content": "alpha beta"})
    data = Dataset(
        name="held",
        cases=[Case(name=f"case {i}", inputs=f"question {i}") for i in (1, 2)],
        evaluators=[EvaluatorSpec(name="HoldsCaseOne")],
    )
    HOLD.clear()
    async with worker_factory():
        ev = await AgentClient(client, task_queue=task_queue).evals.start(
            data, agent="scripted", model=model, concurrency=1
        )
        first = eval_plan.case_run_id(ev.eval_id, "case 1", 1)
        try:
            status = await ev.status()
            for _ in range(300):
                status = await ev.status()
                if status.done == 1:
                    break
                await asyncio.sleep(0.1)
            assert [r.case for r in status.results] == ["case 2"] and status.scoring == [first], status
            assert status.running == [] and "0 running · 1 scoring" in progress_line(status)
        finally:
            HOLD.set()
        final = await ev.wait(60)
    assert final.done == final.passed == 2 and final.scoring == []


async def test_a_case_waiting_for_an_approval_shows_as_waiting_and_goes_on_once_approved(
    client, task_queue, llm, worker_factory, counter_file
):
    model = script(llm, {"tool_calls": [{"name": "send", "arguments": {"label": "x"}}]}, {"content": "alpha beta"})
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(dataset(2, custom=False), agent="guarded", model=model, concurrency=2)
        status = await ev.status()
        for _ in range(300):  # the children's search attributes reach visibility a moment later
            status = await ev.status()
            if len(status.waiting) == 2:
                break
            await asyncio.sleep(0.1)
        assert sorted(status.waiting) == sorted(status.running) and len(status.running) == 2
        assert "2 waiting · 2 running" in progress_line(status)
        # nothing finished yet, but each case's first model call is counted, in flight
        assert status.usage.total_tokens == 0 and status.in_flight_tokens > 0
        assert f"+{status.in_flight_tokens:,} tokens $0.0000 in flight" in progress_line(status)
        for run_id in status.running:
            run = agents.get(run_id)
            (call,) = (await run.status()).pending_approvals
            await run.approve(call.call_id, by="tester")
        final = await ev.wait(60)
    assert final.passed == 2 and final.waiting == []


async def test_a_cancelled_eval_keeps_the_results_of_the_cases_it_finished(client, task_queue, llm, worker_factory):
    """Case 1 approved and finished, case 2 waiting for a person: the eval is cancelled. Its status
    and report still show case 1's result, as the eval's docs say, and the phase says cancelled."""
    model = script(llm, {"tool_calls": [{"name": "send", "arguments": {"label": "x"}}]}, {"content": "alpha beta"})
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(dataset(2, custom=False), agent="guarded", model=model, concurrency=1)
        first = await waiting_case(agents, ev)
        run = agents.get(first)
        (call,) = (await run.status()).pending_approvals
        await run.approve(call.call_id, by="tester")
        await waiting_case(agents, ev, other_than={first})
        await ev.cancel()
        handle = client.get_workflow_handle(ev.eval_id)
        for _ in range(300):
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.1)
        status = await ev.status()
        rep, _ = await ev.report()
    assert status.phase == "cancelled" and status.done == 1 and status.running == [] and status.total == 2
    assert [(r.case, r.passed) for r in rep.rows] == [("case 1", True)]


async def waiting_case(agents: AgentClient, ev: Any, other_than: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """The eval's case run (not one of `other_than`) once it waits for an approval."""
    for _ in range(300):
        for run_id in (await ev.status()).running:
            if run_id not in other_than and (await agents.get(run_id).status()).pending_approvals:
                return str(run_id)
        await asyncio.sleep(0.1)
    raise AssertionError("no case waited for an approval within 30 s")


def ends_answered_alone(history: WorkflowHistory, total: int) -> list[str]:
    """Where an eval's commands do not answer its case runs' ends one by one (eval-lanes-2.0.1):
    in each workflow task, each end's group is its scoring, then, while a case is left to start,
    one start. The loop before lanes answered a task's ends together: the scorings, then the
    starts, so its commands depended on how the core split the task into activations."""
    wrong: list[str] = []
    ends: list[str] = []
    started, events = 0, list(history.events)
    for i, e in enumerate(events):
        if e.HasField("child_workflow_execution_completed_event_attributes"):
            ends.append(e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id)
        if not e.HasField("workflow_task_completed_event_attributes"):
            continue
        groups: list[list[str]] = []
        for c in events[i + 1 :]:
            if c.HasField("activity_task_scheduled_event_attributes"):
                attrs = c.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == te.EVAL_SCORE_ACTIVITY:
                    groups.append([json.loads(attrs.input.payloads[0].data)["run_id"]])
            elif c.HasField("start_child_workflow_execution_initiated_event_attributes"):
                if groups:
                    groups[-1].append("start")
                started += 1
            elif not c.HasField("upsert_workflow_search_attributes_event_attributes"):
                break  # the task's commands end here
        if [g[0] for g in groups] != ends:
            wrong.append(f"event {e.event_id}: scorings {[g[0] for g in groups]} for ends {ends}")
        before = started - sum(len(g) - 1 for g in groups)  # the starts before this task's commands
        for g in groups:
            if before < total and g[1:] != ["start"]:
                wrong.append(f"event {e.event_id}: the end of {g[0]} started {len(g) - 1} cases, {total - before} left")
            before += len(g) - 1
        ends = []
    return wrong


@pytest.mark.pure
def test_the_recorded_lanes_answer_each_end_alone_and_the_loop_before_did_not() -> None:
    folder = Path(__file__).parent / "histories"
    lanes = WorkflowHistory.from_json("eval_lanes_2_0_1", (folder / "eval_lanes_2_0_1.json").read_text())
    assert ends_answered_alone(lanes, 3) == []
    paced = WorkflowHistory.from_json("eval_pace_1_4_4", (folder / "eval_pace_1_4_4.json").read_text())
    (found,) = ends_answered_alone(paced, 3)  # two ends in one task: both scorings, then the start
    assert "started 0 cases, 1 left" in found, found


async def test_a_live_eval_answers_each_case_s_end_alone(client, task_queue, llm, worker_factory):
    """Eight cases three at once, each one model call of the same latency, so that ends share a
    workflow task: each is answered by its own scoring and the next case's start."""
    model = script(llm, {"content": "alpha beta"})
    llm.set_latency(150)
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        ev = await agents.evals.start(
            dataset(8, uuid.uuid4().hex[:8], custom=False), agent="scripted", model=model, concurrency=3
        )
        final = await ev.wait(120)
    assert final.done == 8
    history = await client.get_workflow_handle(ev.eval_id).fetch_history()
    assert ends_answered_alone(history, 8) == []
