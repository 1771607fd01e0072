"""The bench's sections. Each returns plain data (JSON-ready); `bench.report` prints it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from bench import history, runs
from bench.floor import floor_run
from bench.knobs import experiments
from bench.plan import Plan
from bench.stack import Stack, WorkerHandle, WorkerSpec, cpu_seconds
from bench.variant_types import VariantInput
from workflows import types as t

# Bench-only variants: what changes against the product's AgentRun (see bench.local_variant).
_RUN = t.RunInput(prompt="")
VARIANTS: list[tuple[str, VariantInput]] = [
    ("mirror: as AgentRun (sanity check)", VariantInput(run=_RUN)),
    ("mirror: no search-attribute upserts", VariantInput(run=_RUN, upsert_phase=False)),
    ("mirror: transcript inline, no query", VariantInput(run=_RUN, model="inline")),
    ("mirror: model as LOCAL activity", VariantInput(run=_RUN, model="local")),
    ("mirror: model LOCAL, no upserts", VariantInput(run=_RUN, model="local", upsert_phase=False)),
    ("mirror: model + tool as LOCAL activities", VariantInput(run=_RUN, model="local", tools="local")),
]
HISTORY_VARIANTS = [VARIANTS[2], VARIANTS[3], VARIANTS[5]]


def _row(name: str, latency: float, values: list[float], gaps: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "latency_ms": latency,
        "runs": len(values),
        "ms_per_turn_median": median(values) if values else None,
        "ms_per_turn_runs": [round(v, 2) for v in values],
        "turn_gap_p90_ms": runs.percentile(gaps, 0.9) if gaps else None,
        **extra,
    }


async def _read(stack: Stack, run: runs.SingleRun) -> history.RunHistory:
    assert stack.client is not None and run.handle is not None
    return await history.read(stack.client, run.handle.id, run.handle.first_execution_run_id)


def _median(samples: list[float | None]) -> float | None:
    got = [s for s in samples if s is not None]
    return median(got) if got else None


@dataclass
class _Series:
    """One row of the per-turn table: how to make one run of it, and what the runs gave."""

    name: str
    latency: float
    reps: int
    once: Callable[[], Awaitable[runs.SingleRun]]
    results: list[runs.SingleRun] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        gaps = [g for r in self.results for g in runs.gaps_ms(r.times, self.latency)]
        return _row(
            self.name, self.latency, [r.ms_per_turn for r in self.results], gaps,
            worker_cpu_ms=_median([r.worker_cpu_ms for r in self.results]),
            server_cpu_ms=_median([r.server_cpu_ms for r in self.results]),
        )  # fmt: skip


async def per_turn(
    stack: Stack, plan: Plan, log: Any, variants: list[tuple[str, VariantInput]] | None = None
) -> dict[str, Any]:
    """Every row's runs interleaved round-robin (floor, durable, variants, floor, ...), so
    drifting background load hits all rows alike."""
    variants = VARIANTS if variants is None else variants
    specs = [WorkerSpec()]
    if plan.inproc_reps:
        specs.append(WorkerSpec(mode="inproc"))
    if plan.variant_reps:
        specs.append(WorkerSpec(variant="variant"))
    async with stack.workers(specs) as handles:
        product = handles[0]
        inproc = handles[1] if plan.inproc_reps else None
        variant = handles[-1] if plan.variant_reps else None
        jobs: list[tuple[WorkerHandle, VariantInput | None]] = [(h, None) for h in handles if h is not variant]
        if variant is not None:
            jobs += [(variant, v) for _, v in variants]
        await runs.warm_up(stack, jobs)
        idle = await idle_cpu(stack, product)
        series: list[_Series] = []
        for latency in plan.latencies:
            series.append(_Series("floor (no Temporal)", latency, plan.reps, partial(_floor, stack, plan, latency)))
            series.append(
                _Series("durable (AgentRun)", latency, plan.reps,
                        partial(runs.durable_run, stack, product, plan.turns, plan.size, latency))
            )  # fmt: skip
        for latency in plan.variant_latencies:
            if inproc is not None:
                series.append(
                    _Series("durable, in-process worker", latency, plan.inproc_reps,
                            partial(runs.durable_run, stack, inproc, plan.turns, plan.size, latency))
                )  # fmt: skip
            if variant is not None:
                for name, v in variants:
                    series.append(
                        _Series(f"BENCH-ONLY {name}", latency, plan.variant_reps,
                                partial(runs.durable_run, stack, variant, plan.turns, plan.size, latency, v))
                    )  # fmt: skip
        rounds = max(s.reps for s in series)
        for rep in range(rounds):
            log(f"per-turn: round {rep + 1}/{rounds} ({sum(rep < s.reps for s in series)} rows)")
            for s in series:
                if rep < s.reps:
                    s.results.append(await s.once())
        breakdowns: dict[str, dict[str, float]] = {}
        for s in series:
            if s.name == "durable (AgentRun)" and s.results:
                last = s.results[-1]
                h = await _read(stack, last)
                breakdowns[f"{s.latency:g}"] = history.breakdown(h, last.times, s.latency)
    return {
        "scenario": runs.loop_model(plan.turns, plan.size),
        "rows": [s.row() for s in series],
        "breakdown": breakdowns,
        "idle": idle,
    }


async def _floor(stack: Stack, plan: Plan, latency: float) -> runs.SingleRun:
    stack.phase(latency)
    prompt = runs.new_prompt("floor")
    model = runs.loop_model(plan.turns, plan.size)
    t0 = time.perf_counter()
    turns = await floor_run(stack.settings(), stack.registry, runs.AGENT, model, prompt, plan.turns + 1)
    wall = time.perf_counter() - t0
    times = runs.request_times(stack)[prompt]
    per = runs.per_turn_ms(times, latency)
    assert per is not None and turns == plan.turns
    return runs.SingleRun(None, turns, wall, times, per)


async def idle_cpu(stack: Stack, worker: WorkerHandle, seconds: float = 2.0) -> dict[str, float | None]:
    """CPU the dev server and an idle worker burn per second with nothing to do (polls, timers)."""
    before = worker.cpu(), cpu_seconds(stack.server_pid)
    await asyncio.sleep(seconds)
    after = worker.cpu(), cpu_seconds(stack.server_pid)
    return {
        name: (b - a) * 1000 / seconds if a is not None and b is not None else None
        for name, a, b in (("worker_ms_per_s", before[0], after[0]), ("server_ms_per_s", before[1], after[1]))
    }


# The dev server reads each shard's transfer queue at most 20 times a second by default, so a
# run whose every step waits on a workflow or activity task settles at 50 ms per such task.
LIFTED = ["history.transferProcessorMaxPollRPS=1000"]


async def per_turn_lifted(plan: Plan, log: Any, workdir: Path, worker_mode: str) -> dict[str, Any]:
    """Section 1 again, smaller, on a second dev server with that limit lifted."""
    stack = Stack(workdir / "lifted", worker_mode, LIFTED)
    stack.workdir.mkdir(parents=True, exist_ok=True)
    try:
        await asyncio.to_thread(stack.start)
        await stack.connect()
        small = replace(plan, reps=plan.lifted_reps, inproc_reps=0, variant_reps=max(1, plan.lifted_reps - 1))
        picked = [VARIANTS[0], VARIANTS[3], VARIANTS[5]]
        result = await per_turn(stack, small, lambda m: log(f"[lifted] {m}"), picked)
    finally:
        await asyncio.to_thread(stack.close)
    return result | {"server_config": LIFTED}


def _history_figures(name: str, h: history.RunHistory, at: list[int]) -> dict[str, Any]:
    sizes = [t.bytes for t in h.turns]
    full = sizes[:-1] if len(sizes) > 1 else sizes  # the last turn is the final answer
    out: dict[str, Any] = {
        "name": name,
        "turns": len(h.turns),
        "executions": h.executions,
        "total_bytes": h.total_bytes,
        "total_events": h.total_events,
        "carry_bytes": h.carry_bytes,
        "bytes_per_turn_slope": history.slope([float(s) for s in full[4:]]),
        "bytes_per_turn_median": median(full) if full else None,
        "at": {},
    }
    for n in at:
        if 1 <= n <= len(h.turns):
            turn = h.turns[n - 1]
            out["at"][str(n)] = {"bytes": turn.bytes, "events": len(turn.events), "kinds": history.kinds(turn)}
    return out


def _pace(r: runs.SingleRun, n: int = 20) -> dict[str, Any]:
    """Time per turn over the whole run, its first n turns and its last n: does a turn get
    slower as the transcript grows?"""
    gaps = runs.gaps_ms(r.times, 0)
    return {
        "ms_per_turn": r.ms_per_turn,
        "ms_per_turn_first": median(gaps[:n]) if gaps else None,
        "ms_per_turn_last": median(gaps[-n:]) if gaps else None,
    }


async def history_growth(stack: Stack, plan: Plan, log: Any) -> dict[str, Any]:
    n = plan.history_turns
    at = [5, n - 1]  # turn n is the final answer; n-1 is the last full turn
    out: list[dict[str, Any]] = []
    async with stack.worker() as worker:
        await runs.warm_up(stack, [(worker, None)])
        log(f"history: AgentRun, {runs.loop_model(n, plan.size)}")
        r = await runs.durable_run(stack, worker, n, plan.size, 0)
        h = await _read(stack, r)
        out.append(_history_figures("AgentRun", h, at) | _pace(r))
    if plan.history_variants:
        async with stack.worker(variant="variant") as worker:
            await runs.warm_up(stack, [(worker, v) for _, v in HISTORY_VARIANTS])
            for name, variant in HISTORY_VARIANTS:
                log(f"history: {name}")
                r = await runs.durable_run(stack, worker, n, plan.size, 0, variant)
                h = await _read(stack, r)
                out.append(_history_figures(f"BENCH-ONLY {name}", h, at) | _pace(r))
    return {"scenario": runs.loop_model(n, plan.size), "at": at, "rows": out}


async def concurrency(stack: Stack, plan: Plan, log: Any, deadline: float) -> dict[str, Any]:
    """Each level gets conc_timeout, cut short by the section's deadline (runs not done by then
    count as not completed, turns/s is still measured); a later level that would get under
    min(20 s, conc_timeout / 2) is skipped. The first level always runs."""
    out: list[dict[str, Any]] = []
    async with stack.worker() as worker:
        await runs.warm_up(stack, [(worker, None)])
        for i, n in enumerate(plan.conc_levels):
            left = deadline - time.monotonic()
            allowed = min(plan.conc_timeout, max(left, plan.conc_timeout / 2 if i == 0 else 0))  # always one level
            if allowed < min(20, plan.conc_timeout / 2):
                out.append({"runs": n, "skipped": "time budget"})
                continue
            log(
                f"concurrency: {n} runs of {runs.loop_model(plan.conc_turns, plan.conc_size)} ({allowed:.0f} s allowed)"
            )
            c = await runs.concurrent(stack, worker, n, plan.conc_turns, plan.conc_size, plan.conc_latency, allowed)
            out.append(asdict(c) | {"allowed_s": allowed})
    return {
        "scenario": runs.loop_model(plan.conc_turns, plan.conc_size),
        "latency_ms": plan.conc_latency,
        "timeout_s": plan.conc_timeout,
        "rows": out,
    }


CONC_KEYS = ("turns_per_s", "per_turn_ms_p50", "server_cpu_ms_per_turn", "worker_cpu_ms_per_turn")


async def tuning(stack: Stack, plan: Plan, log: Any, deadline: float) -> dict[str, Any]:
    """One worker per experiment, all started up front; then rounds over the experiments, so
    each is measured next to the others under the same background load. Round 1 covers every
    experiment; later rounds run while the budget lasts."""
    exps = experiments(plan.quick)
    rows: list[dict[str, Any]] = [
        {"knob": e.knob, "label": e.label, "options": e.options, "scenario": e.scenario, "single": [], "samples": []}
        for e in exps
    ]
    specs = [WorkerSpec(e.options, stream=e.scenario == "streamed") for e in exps]
    log(f"tuning: starting {len(specs)} workers")
    async with stack.workers(specs, tolerant=True) as handles:
        await runs.warm_up(stack, [(h, None) for h in handles])
        for rnd in range(plan.tune_rounds):
            order = list(zip(exps, handles, rows, strict=True))
            if rnd % 2:
                order.reverse()  # alternate the order so drifting load does not favour one end
            for exp, handle, row in order:
                if handle.error is not None:
                    row["error"] = handle.error
                    continue
                if "error" in row:
                    continue
                if rnd > 0 and time.monotonic() > deadline:
                    break
                log(f"tuning round {rnd + 1}: {exp.label}")
                try:
                    allowed = min(plan.conc_timeout, max(20.0, deadline + 20 - time.monotonic()))
                    if exp.scenario == "standard":
                        single = await runs.durable_run(stack, handle, plan.tune_turns, plan.size, plan.conc_latency)
                        row["single"].append(single.ms_per_turn)
                        c = await runs.concurrent(
                            stack, handle, plan.tune_runs, plan.tune_conc_turns, plan.conc_size, plan.conc_latency,
                            allowed,
                        )  # fmt: skip
                    else:
                        c = await runs.concurrent(
                            stack, handle, plan.stream_runs, plan.stream_turns, plan.conc_size, plan.stream_latency,
                            allowed,
                        )  # fmt: skip
                    row["samples"].append(asdict(c))
                except Exception as err:  # one knob that cannot be set must not sink the others
                    row["error"] = f"{type(err).__name__}: {err}"[:300]
    for row in rows:
        samples = row["samples"]
        row["rounds"] = len(samples)
        row["single_ms_per_turn"] = _median(row["single"])
        row["concurrent"] = {k: _median([x[k] for x in samples]) for k in CONC_KEYS}
        row["concurrent"]["completed"] = sum(x["completed"] for x in samples)
        row["concurrent"]["runs"] = sum(x["runs"] for x in samples)
    return {
        "single": f"{runs.loop_model(plan.tune_turns, plan.size)} at {plan.conc_latency:g} ms, one at a time",
        "concurrent": f"{plan.tune_runs} runs of {runs.loop_model(plan.tune_conc_turns, plan.conc_size)} "
        f"at {plan.conc_latency:g} ms",
        "streamed": f"{plan.stream_runs} streamed runs of {runs.loop_model(plan.stream_turns, plan.conc_size)} "
        f"at {plan.stream_latency:g} ms",
        "rows": rows,
    }


async def streaming_latency(quick: bool) -> dict[str, Any]:
    """Model server sends a piece of text -> `client.py watch` prints it (bench/streaming.py)."""
    from bench import streaming

    figures = await streaming.measure(runs=1 if quick else 3)
    note = (
        f"{figures['pieces']} pieces of text, frames {figures['frame_ms']:g} ms apart: "
        f"p50 {figures['p50_ms']:.0f} ms, p95 {figures['p95_ms']:.0f} ms, max {figures['max_ms']:.0f} ms "
        "(text travels in the model call's heartbeat details: 200 ms throttle + 100 ms watcher poll)"
    )
    return {"measured": True, **figures, "note": note}
