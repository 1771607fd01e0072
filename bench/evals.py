"""Section 8, durable evals: 200 cases of a 3-turn agent (`looper_local`: two calls of the cheap
`pad` tool, run with the model's reply as the demo's lookups are, then its answer) at concurrency
20, as an EvalRun (each case a child run, scored in an activity), side by side with pydantic-evals'
`Dataset.evaluate` running the same loop in one process with no durability (bench/evals_plain.py):
the same fake model, the same `Contains` evaluator. A second durable side runs the same agent
with the `local_model_call` opt-in (`looper_one`) in an eval asked for `inline_scoring`, what a
team chasing eval speed would choose.

At 0 ms of model latency the difference is what durability costs; at 200 ms, closer to a real
model, it is mostly hidden. Then the worker is SIGKILLed once half the cases are done: the eval
goes on in a new worker and no finished case asks the model again, while the plain loop, which
keeps nothing, starts over. Model requests are counted at the fake model."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import time
from typing import Any

from bench.evals_plain import plain_eval
from bench.stack import Stack, WorkerSpec
from durable_agent_runner.client import AgentClient
from durable_agent_runner.evals import Case, Contains, Dataset
from durable_agent_runner.workflows.types.evals import EVAL_SCORE_ACTIVITY

CASES, TURNS, CONCURRENCY = 200, 3, 20  # the worker is killed once half the cases are done
TARGETS = {0: 3.0, 200: 1.5}  # our wall time over the plain loop's, at most, by model latency (ms)


def dataset(cases: int) -> Dataset:
    return Dataset(
        name=f"bench-{cases}",
        cases=[Case(name=f"case-{i:03d}", inputs=f"Work through item {i}.") for i in range(cases)],
        evaluators=[Contains(value=f"done after {TURNS} turns")],
    )


async def _durable(
    stack: Stack, cases: int, kill_at: int | None, log: Any, agent: str, inline: bool = False
) -> dict[str, Any]:
    assert stack.client is not None
    kills = 0
    async with stack.worker() as worker:
        began = time.perf_counter()  # the worker is up: the plain loop has nothing to start either
        agents = AgentClient(stack.client, task_queue=worker.queue)
        ev = await agents.evals.start(
            dataset(cases), agent=agent, model=f"loop:{TURNS}", concurrency=CONCURRENCY, inline_scoring=inline
        )
        if kill_at is not None and worker.pid is not None:
            await _until_done(ev, kill_at)
            os.kill(worker.pid, signal.SIGKILL)
            kills = 1
            log(f"evals: worker SIGKILLed with {kill_at}+ cases done; a new one takes its queue")
            async with stack.workers([WorkerSpec(queue=worker.queue)]):
                status = await ev.wait(1800)
        else:
            status = await ev.wait(1800)
        ended = time.perf_counter()
        report, _ = await ev.report()
        reported = time.perf_counter()
        where = await _where(stack, ev.eval_id) if kill_at is None else {}
    return {
        "wall_s": round(ended - began, 3),
        "report_s": round(reported - ended, 3),
        "where": where,
        "cases": status.total,
        "passed": status.passed,
        "case_runs": len(report.rows),
        "kills": kills,
    }


async def _where(stack: Stack, eval_id: str) -> dict[str, float]:
    """Where an eval's time went, from its histories (each execution): the median case run from
    its start being asked to its start, and to its end; the median scoring activity (none: its
    cases were scored in its workflow tasks); and the time before the first case started and
    after the last one was scored."""
    assert stack.client is not None
    starts, runs, scoring, first, last, opened, closed = [], [], [], None, None, None, None
    async for wf in stack.client.list_workflows(f'WorkflowId="{eval_id}"'):
        history = await stack.client.get_workflow_handle(eval_id, run_id=wf.run_id).fetch_history()
        asked: dict[int, float] = {}
        began: dict[int, float] = {}
        for e in history.events:
            at = e.event_time.ToDatetime().timestamp()
            opened = at if opened is None else min(opened, at)
            closed = at if closed is None else max(closed, at)
            if e.HasField("start_child_workflow_execution_initiated_event_attributes"):
                asked[e.event_id] = at
                first = at if first is None else min(first, at)
            elif e.HasField("child_workflow_execution_started_event_attributes"):
                initiated = e.child_workflow_execution_started_event_attributes.initiated_event_id
                starts.append(at - asked[initiated])
                began[initiated] = at
            elif e.HasField("child_workflow_execution_completed_event_attributes"):
                initiated = e.child_workflow_execution_completed_event_attributes.initiated_event_id
                runs.append(at - began[initiated])
                last = at if last is None else max(last, at)  # scored here when no activity follows
            elif e.activity_task_scheduled_event_attributes.activity_type.name == EVAL_SCORE_ACTIVITY:
                asked[e.event_id] = at
            elif e.activity_task_completed_event_attributes.scheduled_event_id in asked:
                scoring.append(at - asked[e.activity_task_completed_event_attributes.scheduled_event_id])
                last = at if last is None else max(last, at)
    return {
        "child_start_ms_p50": round(statistics.median(starts) * 1000, 1) if starts else 0.0,
        "case_run_s_p50": round(statistics.median(runs), 3) if runs else 0.0,
        "scoring_ms_p50": round(statistics.median(scoring) * 1000, 1) if scoring else 0.0,
        "before_first_case_s": round((first or 0) - (opened or 0), 3),
        "after_last_score_s": round((closed or 0) - (last or 0), 3),
    }


async def _until_done(ev: Any, cases: int) -> None:
    """Polls the eval's progress query (a workflow's state, not an event this process could wait on)."""
    done = 0
    while done < cases:
        await asyncio.sleep(0.2)
        done = (await ev.status()).done


def _requests(stack: Stack) -> int:
    return sum(1 for r in stack.llm.requests() if str(r.get("path", "")).endswith("/chat/completions"))


# The eval's sides: the agent each durable side runs (None: the plain loop). `looper_one` is the
# same loop with the `local_model_call` opt-in: its model calls are local activities, so a case's
# run is one workflow task and a marker a call (10 events), not 25. That side also asks the eval
# for `inline_scoring`: its Contains scores in the eval's workflow task, with no activity.
SIDES: dict[str, str | None] = {"durable": "looper_local", "durable+local": "looper_one", "plain": None}
INLINE_SIDES = {"durable+local"}


async def _side(stack: Stack, side: str, cases: int, log: Any, kill_at: int | None = None) -> dict[str, Any]:
    agent = SIDES[side]
    if agent is not None:
        return await _durable(stack, cases, kill_at, log, agent, inline=side in INLINE_SIDES)
    return await plain_eval(stack.llm.base_url, cases=cases, turns=TURNS, concurrency=CONCURRENCY, killed_at=kill_at)


async def evals(stack: Stack, log: Any, cases: int = CASES, reps: int = 3) -> dict[str, Any]:
    """Each side `reps` times at each latency, the sides' order turned each time (the machine's
    speed drifts), medians reported; then the worker kill, once a side."""
    rows: dict[str, Any] = {}
    for latency in (0, 200):
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for rep in range(reps):
            order = list(SIDES)[rep % len(SIDES) :] + list(SIDES)[: rep % len(SIDES)]
            for side in order:
                stack.phase(latency)
                log(f"evals: {cases} cases, {side}, {latency} ms model latency ({rep + 1}/{reps})")
                row = await _side(stack, side, cases, log)
                runs[side].append(row | {"model_requests": _requests(stack)})
        for side, done in runs.items():
            walls = [r["wall_s"] for r in done]
            median = statistics.median(walls)
            first = next(r for r in done if r["wall_s"] == min(walls, key=lambda w: abs(w - median)))
            rows[f"{side}@{latency}"] = first | {"wall_s": round(median, 3), "walls": walls}
    killed: dict[str, Any] = {}
    kill_at = cases // 2
    for side in ("durable", "plain"):
        stack.phase(0)
        log(f"evals: {cases} cases, {side}, killed at case {kill_at}")
        killed[side] = await _side(stack, side, cases, log, kill_at) | {"model_requests": _requests(stack)}
    ratios = {
        f"{side}@{ms}": rows[f"{side}@{ms}"]["wall_s"] / rows[f"plain@{ms}"]["wall_s"]
        for side in SIDES if SIDES[side] is not None for ms in (0, 200)
    }  # fmt: skip
    return {"cases": cases, "turns": TURNS, "kill_at": kill_at, "concurrency": CONCURRENCY, "reps": reps,
            "rows": rows, "killed": killed, "ratios": ratios, "targets": TARGETS,
            "ideal_requests": cases * TURNS}  # fmt: skip


def report(data: dict[str, Any]) -> str:
    lines = [
        f"8. DURABLE EVALS  ({data['cases']} cases of a {data['turns']}-turn agent at concurrency "
        f"{data['concurrency']}; ideal: {data['ideal_requests']} model requests)",
        f"   {'side @ model latency':28} {'wall s':>8} {'passed':>7} {'requests':>9}   (each of {data['reps']})",
    ]
    for label, row in data["rows"].items():
        each = ", ".join(f"{w:.2f}" for w in row.get("walls", []))
        lines.append(f"   {label:28} {row['wall_s']:>8.2f} {row['passed']:>7} {row['model_requests']:>9}   ({each})")
    where = data["rows"]["durable@0"].get("where") or {}
    if where:
        lines.append(
            f"   durable@0, where a case's time goes (medians): child start {where['child_start_ms_p50']} ms, "
            f"the run {where['case_run_s_p50']} s, its scoring "
            f"{f'{scored} ms' if (scored := where['scoring_ms_p50']) else 'in the workflow task (no activity)'}; "
            f"{where['before_first_case_s']} s before the first case, {where['after_last_score_s']} s after the last "
            f"score; the report {data['rows']['durable@0']['report_s']} s"
        )
    for label, ratio in data["ratios"].items():
        side, ms = label.split("@")
        lines.append(f"   {side} / plain at {ms} ms: {ratio:.2f}x  (target <= {data['targets'][int(ms)]}x)")
    lines.append(f"   worker killed once {data['kill_at']} cases were done (model latency 0 ms):")
    for side, row in data["killed"].items():
        lines.append(f"   {side:28} {row['wall_s']:>8.2f} {row['passed']:>7} {row['model_requests']:>9}")
    return "\n".join(lines)
