"""Starting durable runs and timing them from the model server's side.

A turn's time is the gap between two consecutive model requests of one run, as the fake model
server saw them arrive, less the latency it was told to add: the same clock and the same
measure for a durable run and for the floor. Runs are told apart by their prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from temporalio.client import Client, WorkflowHandle

from bench.stack import Stack, WorkerHandle, cpu_seconds
from bench.variant_types import (
    BARE_WORKFLOW,
    RIVAL_WORKFLOW,
    VARIANT_WORKFLOW,
    BareInput,
    BareResult,
    RivalInput,
    RivalResult,
    VariantInput,
)
from durable_agent_runner.workflows import types as t

AGENT = "looper_local"  # bench/agents.py: its tool a local activity, one dispatch a turn
ACTIVITY_AGENT = "looper"  # tests/fixtures/agents.py: its tool a regular activity
LOCAL_MODEL_AGENT = "looper_one"  # bench/agents.py: its model call local too (opt-in), one workflow task a turn


def loop_model(turns: int, size: int) -> str:
    return f"loop:{turns}:{size}"


def new_prompt(tag: str) -> str:
    return f"bench {tag} {uuid.uuid4().hex[:10]}"


def _prompt_of(body: object) -> str | None:
    if not isinstance(body, dict):
        return None
    items = body.get("messages") or body.get("input") or []  # Chat Completions or Responses
    if isinstance(items, str):
        return items
    for m in items:
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content"))
    return None


def request_times(stack: Stack) -> dict[str, list[float]]:
    """Arrival times of model requests, per run (by prompt), oldest first."""
    out: dict[str, list[float]] = {}
    for r in stack.llm.requests():
        prompt = _prompt_of(r.get("body"))
        if prompt is not None:
            out.setdefault(prompt, []).append(float(r["time"]))
    return out


def gaps_ms(times: list[float], latency_ms: float) -> list[float]:
    return [(b - a) * 1000 - latency_ms for a, b in itertools.pairwise(times)]


def per_turn_ms(times: list[float], latency_ms: float) -> float | None:
    """Mean time per turn over a run's model calls, model latency taken off."""
    if len(times) < 2:
        return None
    return (times[-1] - times[0]) * 1000 / (len(times) - 1) - latency_ms


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


Variant = VariantInput | RivalInput | BareInput | None  # None: the product's AgentRun


async def start(
    client: Client, queue: str, model: str, turns: int, prompt: str, variant: Variant = None, agent: str = AGENT
) -> WorkflowHandle[Any, Any]:
    """Starts one run of the loop: AgentRun, the bench-only variant, Temporal's floor or the
    rival (their results count turns as RunResult does)."""
    run = t.RunInput(prompt=prompt, agent=agent, model=model, max_turns=turns + 1)
    workflow_id = f"bench-{uuid.uuid4().hex[:12]}"
    if isinstance(variant, RivalInput):
        rival = RivalInput(prompt=prompt, model=model, max_turns=turns + 1)
        return await client.start_workflow(
            RIVAL_WORKFLOW, rival, id=workflow_id, task_queue=queue, result_type=RivalResult
        )
    if isinstance(variant, BareInput):
        bare = BareInput(prompt=prompt, model=model, max_turns=turns + 1)
        return await client.start_workflow(
            BARE_WORKFLOW, bare, id=workflow_id, task_queue=queue, result_type=BareResult
        )
    if variant is None:
        return await client.start_workflow(
            t.WORKFLOW_NAME, run, id=workflow_id, task_queue=queue, result_type=t.RunResult
        )
    arg = variant.model_copy(update={"run": run})
    return await client.start_workflow(VARIANT_WORKFLOW, arg, id=workflow_id, task_queue=queue, result_type=t.RunResult)


def run_timeout(turns: int, latency_ms: float) -> float:
    return 60 + turns * (2.0 + latency_ms / 1000)


async def wait_result(handle: WorkflowHandle[Any, Any], limit_s: float) -> t.RunResult | RivalResult | BareResult:
    """The run's result; fails fast if its workflow task keeps failing (e.g. product code that
    does not import, mid-edit) instead of waiting out the whole timeout."""
    deadline = time.monotonic() + limit_s
    task = asyncio.ensure_future(handle.result())
    try:
        while True:
            remaining = deadline - time.monotonic()
            done, _ = await asyncio.wait({task}, timeout=max(0.0, min(5.0, remaining)))
            if done:
                result: t.RunResult | RivalResult | BareResult = task.result()
                return result
            if remaining <= 5.0:
                raise TimeoutError(f"run {handle.id} did not finish within {limit_s:.0f} s")
            pending = (await handle.describe()).raw_description.pending_workflow_task
            if pending.attempt >= 3:
                raise RuntimeError(f"run {handle.id}: its workflow task failed {pending.attempt - 1} times; "
                                   "see the worker log (product code mid-edit?)")  # fmt: skip
    finally:
        task.cancel()


async def warm_up(stack: Stack, jobs: Sequence[tuple[WorkerHandle, Variant]], agent: str = AGENT) -> None:
    """One short run per worker (and variant), all at once: the first run on a worker pays for
    importing the workflow into its sandbox, which no measured run should."""
    assert stack.client is not None
    client = stack.client
    handles = await asyncio.gather(
        *(
            start(client, w.queue, loop_model(3, 10), 3, new_prompt("warm-up"), v, agent)
            for w, v in jobs
            if w.error is None
        )
    )
    await asyncio.gather(*(wait_result(h, 120) for h in handles))


@dataclass
class SingleRun:
    handle: WorkflowHandle[Any, Any] | None  # None: a floor run
    turns: int
    wall_s: float
    times: list[float]
    ms_per_turn: float
    worker_cpu_ms: float | None = None  # per turn
    server_cpu_ms: float | None = None  # per turn


async def durable_run(
    stack: Stack,
    worker: WorkerHandle,
    turns: int,
    size: int,
    latency_ms: float,
    variant: Variant = None,
    agent: str = AGENT,
) -> SingleRun:
    run = await _timed(stack, worker, turns, size, latency_ms, variant, agent, "single")
    per = per_turn_ms(run.times, latency_ms)
    if per is None or run.result.turns != turns:
        raise RuntimeError(f"run {run.handle.id}: {run.result.turns} turns, {len(run.times)} model requests seen")
    worker_cpu, server_cpu = (None if ms is None else ms / turns for ms in run.cpu_ms)
    return SingleRun(run.handle, run.result.turns, run.ended - run.began, run.times, per, worker_cpu, server_cpu)


@dataclass
class ShortRun:
    """A short run's start and end, on the client's and the model server's clocks (one machine)."""

    first_request_ms: float  # the client's start call → the first model request arriving
    result_ms: float  # the last reply leaving the model server → the client holding the result
    wall_ms: float  # the start call → the result
    worker_cpu_ms: float | None  # the whole run's
    server_cpu_ms: float | None


async def short_run(
    stack: Stack, worker: WorkerHandle, turns: int, size: int, latency_ms: float, variant: Variant = None
) -> ShortRun:
    """One short run of the loop, timed at its ends: what a run costs besides its turns."""
    run = await _timed(stack, worker, turns, size, latency_ms, variant, AGENT, "short")
    if not run.times:
        raise RuntimeError(f"run {run.handle.id}: no model request seen")
    reply = run.times[-1] + latency_ms / 1000
    first, last, wall = run.times[0] - run.began, run.ended - reply, run.ended - run.began
    return ShortRun(first * 1000, last * 1000, wall * 1000, *run.cpu_ms)


@dataclass
class _Timed:
    handle: WorkflowHandle[Any, Any]
    result: t.RunResult | RivalResult | BareResult
    times: list[float]  # the model requests' arrivals
    began: float  # time.time() of the start call
    ended: float  # and of the result
    cpu_ms: tuple[float | None, float | None]  # the worker's and the dev server's over the run


async def _timed(
    stack: Stack,
    worker: WorkerHandle,
    turns: int,
    size: int,
    latency_ms: float,
    variant: Variant,
    agent: str,
    tag: str,
) -> _Timed:
    """One run of the loop, started and waited for, with its clocks and CPU; a run that does not
    end in time (or whose bench is interrupted) is terminated."""
    assert stack.client is not None
    stack.phase(latency_ms)
    prompt = new_prompt(tag)
    cpu0 = worker.cpu(), cpu_seconds(stack.server_pid)
    began = time.time()
    handle = await start(stack.client, worker.queue, loop_model(turns, size), turns, prompt, variant, agent)
    try:
        result = await wait_result(handle, run_timeout(turns, latency_ms))
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(handle.terminate("bench: timed out or interrupted"), 10)
        raise
    ended = time.time()
    cpu1 = worker.cpu(), cpu_seconds(stack.server_pid)
    cpu = tuple(None if a is None or b is None else (b - a) * 1000 for a, b in zip(cpu0, cpu1, strict=True))
    return _Timed(handle, result, request_times(stack).get(prompt, []), began, ended, (cpu[0], cpu[1]))


@dataclass
class Concurrent:
    runs: int
    completed: int
    failed: int
    timed_out: int
    wall_s: float
    model_calls: int
    turns_per_s: float
    per_turn_ms_p50: float | None
    per_turn_ms_p90: float | None
    run_s_p50: float | None
    worker_cpu_ms_per_turn: float | None
    server_cpu_ms_per_turn: float | None
    bench_cpu_ms_per_turn: float | None  # this process: the fake model server and the client
    errors: list[str] = field(default_factory=list)


async def concurrent(
    stack: Stack,
    worker: WorkerHandle,
    n: int,
    turns: int,
    size: int,
    latency_ms: float,
    timeout_s: float,
    agent: str = AGENT,
) -> Concurrent:
    """Starts n runs at once and waits for all of them, for at most timeout_s."""
    assert stack.client is not None
    client = stack.client
    stack.phase(latency_ms)
    model = loop_model(turns, size)
    prompts = [new_prompt(f"c{n}-{i}") for i in range(n)]
    cpu0 = worker.cpu(), cpu_seconds(stack.server_pid), time.process_time()
    t0 = time.perf_counter()
    handles = await asyncio.gather(*(start(client, worker.queue, model, turns, p, agent=agent) for p in prompts))
    ends: dict[int, float] = {}

    async def wait(i: int, h: WorkflowHandle[Any, t.RunResult]) -> t.RunResult:
        r = await h.result()
        ends[i] = time.perf_counter()
        return r

    tasks = [asyncio.create_task(wait(i, h)) for i, h in enumerate(handles)]
    try:
        done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    finally:
        for task in tasks:
            task.cancel()
    wall = (max(ends.values()) if not pending and ends else time.perf_counter()) - t0
    cpu1 = worker.cpu(), cpu_seconds(stack.server_pid), time.process_time()
    errors = sorted({repr(task.exception())[:200] for task in done if task.exception() is not None})
    completed = sum(1 for task in done if task.exception() is None)
    for i, h in enumerate(handles):
        if i not in ends:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(h.terminate("bench: timed out"), 10)
    times = request_times(stack)
    calls = sum(len(times.get(p, [])) for p in prompts)
    per = [x for p in prompts if (x := per_turn_ms(times.get(p, []), latency_ms)) is not None]
    durations = [ends[i] - t0 for i in ends]

    def cpu(k: int) -> float | None:
        a, b = cpu0[k], cpu1[k]
        return (b - a) * 1000 / calls if a is not None and b is not None and calls else None

    return Concurrent(
        runs=n,
        completed=completed,
        failed=len(done) - completed,
        timed_out=len(pending),
        wall_s=wall,
        model_calls=calls,
        turns_per_s=calls / wall if wall > 0 else 0.0,
        per_turn_ms_p50=median(per) if per else None,
        per_turn_ms_p90=percentile(per, 0.9) if per else None,
        run_s_p50=median(durations) if durations else None,
        worker_cpu_ms_per_turn=cpu(0),
        server_cpu_ms_per_turn=cpu(1),
        bench_cpu_ms_per_turn=cpu(2),
        errors=errors,
    )
