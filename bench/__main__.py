"""`python -m bench [--quick] [--json FILE] [--only SECTION ...] [--turns N] [--reps N] [--worker subprocess|inproc]`.

Starts its own Temporal dev server (SQLite, a free port) and fake model server, runs the
sections, prints the tables, and stops everything it started on any exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import caching, evals, report, sections
from bench.plan import FULL, QUICK, Plan
from bench.stack import Stack

SECTIONS = ("per-turn", "timeline", "history", "concurrency", "tuning", "streaming", "caching", "evals")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description="What durability costs per agent turn.")
    p.add_argument("--quick", action="store_true", help="a ~1-minute smoke run (smaller scenarios, 3 knobs)")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    p.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    p.add_argument("--worker", choices=["subprocess", "inproc"], default="subprocess",
                   help="where workers run (default: a subprocess, so they do not share the bench's GIL)")  # fmt: skip
    p.add_argument("--budget", type=float, help="seconds after which no new tuning round starts")
    p.add_argument("--turns", type=int, help="model calls per run in the per-turn section (full run: 20, quick: 10)")
    p.add_argument("--reps", type=int, help="runs per row in the per-turn section, medians taken (full run: 5)")
    p.add_argument("--server-config", action="append", metavar="KEY=VALUE", default=[],
                   help="a dynamic config value for the dev server, after tests/devserver.py's (repeatable), "
                        "e.g. history.transferProcessorMaxPollRPS=20 for the default")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the work directory (dev server DB, logs)")
    return p.parse_args(argv)


def environment(plan: Plan, worker: str) -> dict[str, Any]:
    return {
        "mode": "quick" if plan.quick else "full",
        "worker": worker,
        "python": platform.python_version(),
        "temporalio": version("temporalio"),
        "cpus": os.cpu_count(),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        # Set, and no bytecode cached: each worker process compiles what it imports at start.
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
    }


def fixed_knobs() -> dict[str, str]:
    from durable_agent_runner.worker.plugin import WORKER_DEFAULTS

    return {k: str(v) for k, v in WORKER_DEFAULTS.items()}


async def run(stack: Stack, plan: Plan, only: set[str], results: dict[str, Any], t0: float) -> None:
    env = results["environment"]

    def log(msg: str) -> None:
        env["load_1min_max"] = max(env.get("load_1min_max", 0.0), round(os.getloadavg()[0], 2))
        print(f"  [{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    await stack.connect()
    if "per-turn" in only:
        results["per_turn"] = await sections.per_turn(stack, plan, log)
    if "timeline" in only:
        results["timeline"] = await sections.turn_timeline(stack, plan, log)
    if "history" in only:
        results["history"] = await sections.history_growth(stack, plan, log)
    if "concurrency" in only:
        results["concurrency"] = await sections.concurrency(stack, plan, log, t0 + 0.5 * plan.budget_s)
    if "streaming" in only:
        results["streaming"] = await sections.streaming_latency(stack, plan, log)
    if "caching" in only:
        results["caching"] = await caching.caching(stack, log)
    if "evals" in only:
        cases, reps = (40, 1) if plan.quick else (evals.CASES, 3)
        results["evals"] = await evals.evals(stack, log, cases=cases, reps=reps)
    if "tuning" in only:  # last: its later rounds fill what is left of the budget
        results["tuning"] = await sections.tuning(stack, plan, log, t0 + plan.budget_s)


def render(results: dict[str, Any]) -> str:
    env = results["environment"]
    load = env.get("load_at_start"), env.get("load_at_end")
    parts = [
        f"DURABLE AGENT RUNNER BENCH  ({env['mode']} run, {env['started']}, python {env['python']}, "
        f"temporalio {env['temporalio']}, {env['cpus']} CPUs, worker: {env['worker']})",
        f"load average (1/5/15 min) at start {load[0]}, at end {load[1]}; highest 1-min load seen during the run "
        f"{env.get('load_1min_max', '-')}; took {env.get('elapsed_s', 0):.0f} s",
        f"build_worker's own Worker settings (the 'default' below): {results['build_worker_fixed']}",
    ]
    busiest = max(env.get("load_1min_max", 0.0), (load[0] or [0.0])[0], (load[1] or [0.0])[0])
    if busiest > (env["cpus"] or 1) + 2:
        parts.append("WARNING: the machine was busy with other work (1-min load above CPUs + 2 at some point; the "
                     "bench alone keeps about 2 busy): absolute figures are inflated; compare rows within a table, "
                     "which are measured interleaved.")  # fmt: skip
    if env.get("dont_write_bytecode"):
        parts.append("PYTHONDONTWRITEBYTECODE is set: with no cached bytecode, each worker process compiles "
                     "what it imports when it starts (the Docker image compiles it at build instead)")  # fmt: skip
    if env.get("server_dynamic_config"):
        parts.append(f"one dev server for every worker, its dynamic config: {env['server_dynamic_config']}")
    printers = [("per_turn", report.per_turn), ("history", report.history), ("concurrency", report.concurrency),
                ("tuning", report.tuning), ("streaming", report.streaming), ("timeline", report.timeline),
                ("caching", caching.report), ("evals", evals.report)]  # fmt: skip
    for key, fn in printers:
        if key in results:
            parts.append(fn(results[key]))
    if "per_turn" in results:
        parts.append(report.comparison(results["per_turn"], results.get("history")))
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.budget is not None:
        plan = replace(plan, budget_s=args.budget)
    if args.turns is not None:
        if args.turns < 2:
            print("bench: --turns must be at least 2 (a turn is the gap between two model calls)", file=sys.stderr)
            return 2
        plan = replace(plan, turns=args.turns)
    if args.reps is not None:
        if args.reps < 1:
            print("bench: --reps must be at least 1", file=sys.stderr)
            return 2
        plan = replace(plan, reps=args.reps)
    only = set(args.only or SECTIONS)
    results: dict[str, Any] = {"environment": environment(plan, args.worker), "plan": asdict(plan)}
    results["build_worker_fixed"] = fixed_knobs()
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    t0 = time.monotonic()
    stack = Stack(workdir, args.worker, args.server_config)
    results["environment"]["server_config"] = args.server_config
    results["environment"]["server_dynamic_config"] = list(stack.server_config_all)
    code = 0
    try:
        print(f"bench: starting dev server and fake model server (work dir {workdir})", file=sys.stderr)
        stack.start()
        asyncio.run(run(stack, plan, only, results, t0))
    except KeyboardInterrupt:
        print("\nbench: interrupted; stopping what it started", file=sys.stderr)
        code = 130
    except Exception as err:
        print(f"bench: failed: {type(err).__name__}: {err} (work dir {workdir})", file=sys.stderr)
        code = 1
    finally:
        stack.close()
    results["environment"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["environment"]["elapsed_s"] = round(time.monotonic() - t0, 1)
    print(render(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"\n(JSON written to {args.json})")
    if not args.keep and code == 0:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
