"""How big each section is, for the quick and the full run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    quick: bool
    reps: int  # runs per row in the per-turn section (median reported)
    # Model calls per run there (loop:turns:size). 20 in the full run: the rival's time a turn grows
    # with the turns (its model activity carries the whole transcript, which the openai SDK
    # transforms afresh each call), so longer runs flatter us (at 40 its turn took ~1.4x as long);
    # 20 is the independent measurement's K and a long agent run. `--turns` sets another.
    turns: int
    size: int
    latencies: tuple[float, ...]
    activity_row: bool  # also AgentRun with its tool as a regular activity (the earlier figures' loop)
    walks_row: bool  # also AgentRun on a worker that skips temporalio's idle payload walks (bench.idle_walks)
    inproc_reps: int  # 0: skip the in-process worker row
    variant_reps: int  # 0: skip the bench-only variants
    variant_latencies: tuple[float, ...]  # 50 ms: at 0 ms the dev server's task pacing skews rows
    history_turns: int
    rival_history_turns: int  # the rival's history grows with turns², and so does its time per turn
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
    stream_runs: int  # streamed replies per streaming setting
    stream_what_ifs: bool  # also the bench-only settings that say where streaming latency goes
    budget_s: float  # concurrency ends by half of it; no tuning round after the first starts past it
    short_runs: int  # per row: short runs (loop:short_turns:size at 50 ms) timed at their ends
    short_turns: int


QUICK = Plan(
    quick=True, reps=2, turns=10, size=200, latencies=(0, 50), activity_row=False, walks_row=False,
    inproc_reps=0, variant_reps=0,
    variant_latencies=(50,), history_turns=31, rival_history_turns=31, history_variants=False,
    conc_levels=(200,), conc_turns=2, conc_size=100, conc_latency=50, conc_timeout=40,
    tune_turns=8, tune_runs=10, tune_conc_turns=3, tune_rounds=1,
    stream_runs=1, stream_what_ifs=False, budget_s=60, short_runs=3, short_turns=2,
)  # fmt: skip

FULL = Plan(
    quick=False, reps=5, turns=20, size=200, latencies=(0, 50), activity_row=True, walks_row=True,
    inproc_reps=0, variant_reps=0,
    variant_latencies=(50,), history_turns=201, rival_history_turns=61, history_variants=False,
    conc_levels=(50, 200), conc_turns=10, conc_size=100, conc_latency=50, conc_timeout=120,
    tune_turns=20, tune_runs=20, tune_conc_turns=4, tune_rounds=3,
    stream_runs=2, stream_what_ifs=True, budget_s=480, short_runs=12, short_turns=2,
)  # fmt: skip
