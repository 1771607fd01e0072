"""The bench's sections. Each returns plain data (JSON-ready); `bench.report` prints it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from statistics import median
from typing import Any

from temporalio.api.enums.v1 import EventType

from bench import history, idle_walks, runs, streaming, timeline
from bench.floor import floor_run
from bench.knobs import experiments
from bench.plan import Plan
from bench.stack import Stack, WorkerHandle, WorkerSpec, cpu_seconds
from bench.variant_types import BareInput, RivalInput, VariantInput
from durable_agent_runner.workflows import types as t

# Bench-only variants: what changes against the product's AgentRun (see bench.local_variant).
_RUN = t.RunInput(prompt="")
VARIANTS: list[tuple[str, VariantInput]] = [
    ("mirror: as AgentRun, tool as activity (sanity check)", VariantInput(run=_RUN)),
    ("mirror: model as LOCAL activity", VariantInput(run=_RUN, model="local")),
    ("mirror: model + tool as LOCAL activities", VariantInput(run=_RUN, model="local", tools="local")),
]
OURS = "durable (AgentRun, local tool)"  # run with the reply (or as a local activity)
OURS_ACTIVITY = "durable (AgentRun, tool as activity)"
OURS_LOCAL_MODEL = "durable (AgentRun, local model call + tool)"
RIVAL = "OpenAI Agents integration"
OURS_NO_WALKS = "BENCH-ONLY durable (AgentRun, local tool), idle payload walks skipped"  # bench.idle_walks
BARE = "Temporal's floor: a bare loop, its tool run with the reply"  # bench.bare
FLOOR = "floor (no Temporal)"
RIVAL_MISSING = "the rival needs the bench extra: pip install -e '.[bench]'"


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
    per_turn_history: dict[str, float] | None = None  # events and bytes a turn, from the last run

    def row(self) -> dict[str, Any]:
        values = [r.ms_per_turn for r in self.results]
        gaps = [g for r in self.results for g in runs.gaps_ms(r.times, self.latency)]
        return {
            "name": self.name,
            "latency_ms": self.latency,
            "runs": len(values),
            "ms_per_turn_median": median(values) if values else None,
            "ms_per_turn_runs": [round(v, 2) for v in values],
            "turn_gap_p90_ms": runs.percentile(gaps, 0.9) if gaps else None,
            "worker_cpu_ms": _median([r.worker_cpu_ms for r in self.results]),
            "server_cpu_ms": _median([r.server_cpu_ms for r in self.results]),
            **(self.per_turn_history or {}),
        }


async def _read(stack: Stack, run: runs.SingleRun) -> history.RunHistory:
    assert stack.client is not None and run.handle is not None
    return await history.read(stack.client, run.handle.id, run.handle.first_execution_run_id)


def _history_per_turn(h: history.RunHistory) -> dict[str, float]:
    """Events and bytes a turn, averaged over the run's turns but its last (the answer)."""
    full = h.turns[:-1] if len(h.turns) > 1 else h.turns
    if not full:
        return {}
    return {
        "events_per_turn": sum(len(turn.events) for turn in full) / len(full),
        "bytes_per_turn": sum(turn.bytes for turn in full) / len(full),
    }


async def per_turn(stack: Stack, plan: Plan, log: Any) -> dict[str, Any]:
    """The same loop on every row, runs interleaved round-robin (floor, ours, the rival, ...) so
    drifting background load hits all rows alike: the floor in-process, AgentRun on the product's
    worker, the rival on the OpenAI Agents integration's worker, all on one dev server."""
    specs = [WorkerSpec(), WorkerSpec(variant="rival"), WorkerSpec(variant="bare")]
    if plan.inproc_reps:
        specs.append(WorkerSpec(mode="inproc"))
    if plan.variant_reps:
        specs.append(WorkerSpec(variant="variant"))
    if plan.walks_row:
        specs.append(WorkerSpec(options={idle_walks.OPTION: True}))
    async with stack.workers(specs, tolerant=True) as handles:
        product, rival, bare = handles[0], handles[1], handles[2]
        for name, h in (("the product's", product), ("the bare loop's", bare)):
            if h.error is not None:
                raise RuntimeError(f"{name} worker did not start: {h.error}")
        inproc = handles[3] if plan.inproc_reps else None
        variant = handles[3 + bool(plan.inproc_reps)] if plan.variant_reps else None
        no_walks = handles[-1] if plan.walks_row else None
        rival_ok = rival.error is None
        jobs: list[tuple[WorkerHandle, runs.Variant]] = [(product, None), (bare, BareInput())]
        jobs += [(rival, RivalInput())] if rival_ok else []
        jobs += [(inproc, None)] if inproc is not None else []
        jobs += [(variant, v) for _, v in VARIANTS] if variant is not None else []
        jobs += [(no_walks, None)] if no_walks is not None else []
        await runs.warm_up(stack, jobs)
        for agent in (runs.ACTIVITY_AGENT, runs.LOCAL_MODEL_AGENT):
            await runs.warm_up(stack, [(product, None)], agent=agent)
        idle = await idle_cpu(stack, product)
        series: list[_Series] = []
        durable = partial(runs.durable_run, stack)
        for latency in plan.latencies:
            series.append(_Series(FLOOR, latency, plan.reps, partial(_floor, stack, plan, latency)))
            series.append(_Series(OURS, latency, plan.reps, partial(durable, product, plan.turns, plan.size, latency)))
            once = partial(durable, bare, plan.turns, plan.size, latency, BareInput())
            series.append(_Series(BARE, latency, plan.reps, once))
            once = partial(durable, product, plan.turns, plan.size, latency, agent=runs.LOCAL_MODEL_AGENT)
            series.append(_Series(OURS_LOCAL_MODEL, latency, plan.reps, once))
            if plan.activity_row:
                once = partial(durable, product, plan.turns, plan.size, latency, agent=runs.ACTIVITY_AGENT)
                series.append(_Series(OURS_ACTIVITY, latency, plan.reps, once))
            if no_walks is not None:
                once = partial(durable, no_walks, plan.turns, plan.size, latency)
                series.append(_Series(OURS_NO_WALKS, latency, plan.reps, once))
            if rival_ok:
                once = partial(durable, rival, plan.turns, plan.size, latency, RivalInput())
                series.append(_Series(RIVAL, latency, plan.reps, once))
        for latency in plan.variant_latencies:
            if inproc is not None:
                once = partial(durable, inproc, plan.turns, plan.size, latency)
                series.append(_Series("durable, in-process worker", latency, plan.inproc_reps, once))
            if variant is not None:
                for name, v in VARIANTS:
                    once = partial(durable, variant, plan.turns, plan.size, latency, v, runs.ACTIVITY_AGENT)
                    series.append(_Series(f"BENCH-ONLY {name}", latency, plan.variant_reps, once))
        rounds = max(s.reps for s in series)
        for rep in range(rounds):
            log(f"per-turn: round {rep + 1}/{rounds} ({sum(rep < s.reps for s in series)} rows)")
            for s in series:
                if rep < s.reps:
                    s.results.append(await s.once())
        for s in series:
            if s.results and s.results[-1].handle is not None:
                s.per_turn_history = _history_per_turn(await _read(stack, s.results[-1]))
        short: list[tuple[str, WorkerHandle, runs.Variant]] = [(OURS, product, None), (BARE, bare, BareInput())]
        short += [(RIVAL, rival, RivalInput())] if rival_ok else []
        shorts = await _short_runs(stack, plan, log, short)
    named = [("product", product), ("rival", rival), ("bare", bare), ("in-process", inproc), ("variant", variant)]
    return {
        "scenario": runs.loop_model(plan.turns, plan.size),
        "rows": [s.row() for s in series],
        # Every worker process's event loop, as it reported it: one loop for all rows (bench.rival).
        "event_loops": {name: h.loop for name, h in named if h is not None and h.error is None and h.pid is not None},
        "idle": idle,
        "rival_error": None if rival_ok else f"{RIVAL_MISSING} ({rival.error})",
        "short": shorts,
    }


SHORT_LATENCY = 50.0


async def _short_runs(
    stack: Stack, plan: Plan, log: Any, rows: list[tuple[str, WorkerHandle, runs.Variant]]
) -> dict[str, Any]:
    """What a run costs besides its turns: short runs, interleaved, timed at their ends (medians)
    and their whole CPU (means: the CPU clocks tick in 10 ms)."""
    got: dict[str, list[runs.ShortRun]] = {name: [] for name, _, _ in rows}
    log(f"per-turn: {plan.short_runs} short runs a row")
    for _ in range(plan.short_runs):
        for name, worker, variant in rows:
            got[name].append(await runs.short_run(stack, worker, plan.short_turns, plan.size, SHORT_LATENCY, variant))

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    return {
        "scenario": runs.loop_model(plan.short_turns, plan.size),
        "latency_ms": SHORT_LATENCY,
        "rows": [
            {
                "name": name,
                "runs": len(rs),
                "first_request_ms": median(r.first_request_ms for r in rs),
                "result_ms": median(r.result_ms for r in rs),
                "wall_ms": median(r.wall_ms for r in rs),
                "worker_cpu_ms": mean([r.worker_cpu_ms for r in rs]),
                "server_cpu_ms": mean([r.server_cpu_ms for r in rs]),
            }
            for name, rs in got.items()
        ],
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
    """One long run each at 0 ms latency: AgentRun to `history_turns`, the rival to
    `rival_history_turns` (its history grows with the square of the turns)."""
    n = plan.history_turns
    at = sorted({5, plan.rival_history_turns - 1, n - 1})  # turn n is the final answer; n-1 the last full turn
    out: list[dict[str, Any]] = []
    async with stack.workers([WorkerSpec(), WorkerSpec(variant="rival")], tolerant=True) as (worker, rival):
        jobs: list[tuple[WorkerHandle, runs.Variant]] = [(worker, None)]
        jobs += [(rival, RivalInput())] if rival.error is None else []
        await runs.warm_up(stack, jobs)
        log(f"history: AgentRun, {runs.loop_model(n, plan.size)}")
        r = await runs.durable_run(stack, worker, n, plan.size, 0)
        out.append(_history_figures(OURS, await _read(stack, r), at) | _pace(r))
        if rival.error is None:
            m = plan.rival_history_turns
            log(f"history: the rival, {runs.loop_model(m, plan.size)}")
            r = await runs.durable_run(stack, rival, m, plan.size, 0, RivalInput())
            out.append(_history_figures(RIVAL, await _read(stack, r), at) | _pace(r))
    return {"scenario": runs.loop_model(n, plan.size), "at": at, "rows": out}


async def concurrency(stack: Stack, plan: Plan, log: Any, deadline: float) -> dict[str, Any]:
    """Each level gets conc_timeout, cut short by the section's deadline (runs not done by then
    count as not completed, turns/s is still measured); a later level that would get under
    min(20 s, conc_timeout / 2) is skipped. The last level (the largest) always runs."""
    out: list[dict[str, Any]] = []
    async with stack.worker() as worker:
        await runs.warm_up(stack, [(worker, None)])
        for i, n in enumerate(plan.conc_levels):
            last = i == len(plan.conc_levels) - 1
            left = deadline - time.monotonic()
            allowed = min(plan.conc_timeout, max(left, plan.conc_timeout / 2 if last else 0))
            if allowed < min(20, plan.conc_timeout / 2):
                out.append({"runs": n, "skipped": "time budget"})
                continue
            scenario = runs.loop_model(plan.conc_turns, plan.conc_size)
            log(f"concurrency: {n} runs of {scenario} ({allowed:.0f} s allowed)")
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
        {"knob": e.knob, "label": e.label, "options": e.options, "single": [], "samples": []} for e in exps
    ]
    log(f"tuning: starting {len(exps)} workers")
    async with stack.workers([WorkerSpec(e.options) for e in exps], tolerant=True) as handles:
        await runs.warm_up(stack, [(h, None) for h in handles if h.error is None])
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
                    single = await runs.durable_run(stack, handle, plan.tune_turns, plan.size, plan.conc_latency)
                    row["single"].append(single.ms_per_turn)
                    c = await runs.concurrent(
                        stack, handle, plan.tune_runs, plan.tune_conc_turns, plan.conc_size, plan.conc_latency, allowed
                    )
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
        "rows": rows,
    }


async def streaming_latency(stack: Stack, plan: Plan, log: Any) -> dict[str, Any]:
    """Model server sends a piece of text -> `client.py watch` prints it (bench/streaming.py),
    as shipped and, in the full run, with the bench-only settings that show where the time goes."""
    settings = streaming.SETTINGS if plan.stream_what_ifs else streaming.SETTINGS[:1]
    rows = []
    for setting in settings:
        log(f"streaming: {setting.label}")
        rows.append(await streaming.measure(stack, setting, plan.stream_runs))
    return {"rows": rows, "frame_ms": streaming.FRAME_MS, "target_p50_ms": streaming.TARGET_P50_MS}


async def turn_timeline(stack: Stack, plan: Plan, log: Any) -> dict[str, Any]:
    """One traced run of the per-turn loop at the highest latency, AgentRun with its local tool, on
    a worker that stamps the points of each turn (bench/timeline.py): where a turn's time goes."""
    if stack.worker_mode == "inproc":
        return {"skipped": "the stamps need a worker process of its own (--worker subprocess)"}
    latency = max(plan.latencies)
    stamps = stack.workdir / "timeline.json"
    async with stack.worker({timeline.OPTION: str(stamps)}) as worker:
        await runs.warm_up(stack, [(worker, None)])
        log(f"timeline: one traced run of {runs.loop_model(plan.turns, plan.size)} at {latency:g} ms")
        run = await runs.durable_run(stack, worker, plan.turns, plan.size, latency)
        assert run.handle is not None
        events = [
            (e.event_time.ToNanoseconds() / 1e9, _readable(e.event_type))
            async for e in run.handle.fetch_history_events()
        ]
    # The worker writes its stamps as it exits, which leaving the block above waited for.
    return timeline.analyse(run.times, latency, json.loads(stamps.read_text()), events)


def _readable(event_type: EventType.ValueType) -> str:
    """EVENT_TYPE_ACTIVITY_TASK_STARTED -> "activity task started"."""
    return EventType.Name(event_type).removeprefix("EVENT_TYPE_").lower().replace("_", " ")
