"""How big each section is, for the quick and the full run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    quick: bool
    reps: int  # runs per row in the per-turn section (median reported)
    turns: int  # model calls per run there (loop:turns:size)
    size: int
    latencies: tuple[float, ...]
    inproc_reps: int  # 0: skip the in-process worker row
    variant_reps: int  # 0: skip the bench-only variants
    variant_latencies: tuple[float, ...]  # 50 ms: at 0 ms the dev server's task pacing (see 1b) skews rows
    lifted_reps: int  # 0: skip section 1b (a dev server with its transfer-queue poll limit lifted)
    history_turns: int
    history_variants: bool
    conc_levels: tuple[int, ...]
    conc_turns: int
    conc_size: int
    conc_latency: float
    conc_timeout: float  # per level: runs not done by then count as not completed
    tune_turns: int  # single-run per-turn measurement per experiment, at conc_latency
    tune_runs: int  # concurrent runs per experiment, of loop:tune_conc_turns:conc_size
    tune_conc_turns: int
    tune_rounds: int  # round 1 always covers every experiment; later rounds only within the budget
    stream_runs: int
    stream_turns: int
    stream_latency: float
    budget_s: float  # concurrency ends by 65% of it; no tuning round starts past it


QUICK = Plan(
    quick=True, reps=2, turns=10, size=200, latencies=(0, 50), inproc_reps=0, variant_reps=0, variant_latencies=(0,),
    lifted_reps=0, history_turns=31, history_variants=False,
    conc_levels=(10,), conc_turns=6, conc_size=100, conc_latency=50, conc_timeout=30,
    tune_turns=8, tune_runs=10, tune_conc_turns=3, tune_rounds=1,
    stream_runs=10, stream_turns=3, stream_latency=1000, budget_s=60,
)  # fmt: skip

FULL = Plan(
    quick=False, reps=5, turns=40, size=200, latencies=(0, 50), inproc_reps=3, variant_reps=3, variant_latencies=(50,),
    lifted_reps=3, history_turns=201, history_variants=True,
    conc_levels=(20, 50, 100), conc_turns=10, conc_size=100, conc_latency=50, conc_timeout=120,
    tune_turns=20, tune_runs=20, tune_conc_turns=4, tune_rounds=5,
    stream_runs=20, stream_turns=2, stream_latency=3000, budget_s=540,
)  # fmt: skip
