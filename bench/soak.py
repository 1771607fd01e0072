"""`python -m bench.soak`: many runs through crashes, restarts and model faults; outside pytest.

50 scripted runs of the fault suite's `chaos` agent (tests/fixtures/fault_agents.py: every tool
call makes a side effect keyed by its idempotency key and logs each attempt), at most
--concurrency at a time, on two `python worker.py` processes (one streaming model replies). Over
the runs a worker is SIGKILLed 20 times (one at a time, a fresh process started after each), the
SQLite-persisted dev server restarts 5 times, and fake_llm injects model faults: 429, 500, 503,
slow replies, replies past the model timeout, cut streams, malformed bodies, error events (when
each lands: bench/soak_chaos.py). The scripts, the schedule and the fault kinds come from --seed.

Then it prints: runs completed with their scripted answer; duplicate side effects (each tool call
that history says completed made exactly one effect, and no call made one under two keys); lost
messages (each run's `agent.transcript` against its script); wall time; kills and restarts done;
and a replay of every run's history under the current code. Exit 0 only if all of that is clean.

Every wait is bounded: the runs get --deadline less CHECK_SECONDS, the checks what remains (at
least CHECK_SECONDS); what is unfinished by then is reported. Workers, the dev server and fake_llm
listen on 127.0.0.1 and are stopped on any exit.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

from bench.soak_chaos import Log, disrupt, inject, schedule
from bench.stack import Stack
from durable_agent_runner.workflows import types as t
from tests.fixtures.fault_agents import attempts_path
from tests.helpers import replay
from tests.test_fault_suite import (
    History,
    Run,
    WorkerProcess,
    expected_transcript,
    fault_name,
    plan,
    read_history,
    read_lines,
    retrying,
    shape,
)

CHECK_SECONDS = 120.0  # kept back from the deadline for reading histories, transcripts and replays
UNFINISHED = "unfinished at the deadline"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=50, help="agent runs (default 50)")
    p.add_argument("--concurrency", type=int, default=10, help="runs in flight at once, at most (default 10)")
    p.add_argument("--kills", type=int, default=20, help="worker SIGKILLs (default 20)")
    p.add_argument("--restarts", type=int, default=5, help="dev-server restarts (default 5)")
    p.add_argument("--faults", type=int, default=60, help="model faults to queue (default 60)")
    p.add_argument("--timeouts", type=int, default=4, help="of which past the model timeout, at most (default 4)")
    p.add_argument("--seed", type=int, default=20250611, help="scripts, schedule and fault kinds (default 20250611)")
    p.add_argument("--deadline", type=float, default=900.0, help="seconds for the whole soak (default 900)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (dev server DB, logs)")
    return p.parse_args(argv)


async def drive(client: Client, run: Run, queue: str, slots: asyncio.Semaphore, log: Log, until: float) -> None:
    """Start one run when a slot is free and wait for its outcome, through server restarts."""
    run_id = f"soak-{run.name}-{uuid.uuid4().hex[:6]}"

    async def start() -> None:
        try:
            await client.start_workflow(
                t.WORKFLOW_NAME,
                t.RunInput(prompt=f"chaos run {run.name}", agent="chaos", model=run.model),
                id=run_id,
                task_queue=queue,
            )
        except WorkflowAlreadyStartedError:
            pass  # the first try reached the server; its reply did not reach us

    async with slots:
        run.began = time.monotonic()
        handle = client.get_workflow_handle(run_id, result_type=t.RunResult)
        try:
            await asyncio.wait_for(retrying(start, until), until - time.monotonic())
            run.id = run_id  # only runs the server has are checked afterwards
            run.result = await asyncio.wait_for(retrying(handle.result, until), until - time.monotonic())
        except TimeoutError:
            run.error = UNFINISHED
            return
        except WorkflowFailureError as err:
            run.error = f"{type(err.cause).__name__}: {err.cause}"
        except Exception as err:
            run.error = f"{type(err).__name__}: {err}"
        run.took = time.monotonic() - run.began
        log.note(f"{run.name} {'completed' if run.result else 'FAILED'} in {run.took:.1f}s")


@dataclass
class Checked:
    histories: dict[str, History] = field(default_factory=dict)  # run name -> history
    transcripts: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)  # run name -> shapes
    replays: dict[str, str] = field(default_factory=dict)  # run name -> "ok" or the failure
    errors: list[str] = field(default_factory=list)


async def check(client: Client, runs: list[Run], checked: Checked, until: float) -> None:
    """Each started run's history, transcript and replay; one at a time, gently on two cores."""
    for run in (r for r in runs if r.id):
        handle = client.get_workflow_handle(run.id)
        try:
            checked.histories[run.name] = await retrying(functools.partial(read_history, handle), until)
            query = functools.partial(handle.query, t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
            transcript = await retrying(query, until)
            checked.transcripts[run.name] = [shape(m) for m in transcript.messages]
        except Exception as err:
            checked.errors.append(f"{run.name}: reading history or transcript: {type(err).__name__}: {err}")
        try:
            await replay(handle)
            checked.replays[run.name] = "ok"
        except Exception as err:
            checked.replays[run.name] = f"{type(err).__name__}: {err}"


def lost_and_extra(run: Run, actual: list[tuple[Any, ...]]) -> tuple[int, int]:
    """Expected messages missing from the transcript, and messages in it the script never sent.
    A run that did not complete is held to the part of its script it reached."""
    want = expected_transcript(run)
    if run.result is None:
        want = want[: len(actual)]
    expected, got = Counter(map(repr, want)), Counter(map(repr, actual))
    return sum((expected - got).values()), sum((got - expected).values())


def right(run: Run) -> bool:
    return run.result is not None and run.result.output == run.answer and run.result.turns == len(run.turns) + 1


def report(args: argparse.Namespace, runs: list[Run], log: Log, checked: Checked, llm: Any, effects: Path,
           wall: float, total: float) -> tuple[str, bool]:  # fmt: skip
    """The figures, and whether everything held."""
    good = [r for r in runs if right(r)]
    unfinished = [r for r in runs if not r.done]
    failed = [r for r in runs if r.done and not right(r)]
    # side effects: every tool call history says completed must have made exactly one
    made = read_lines(effects)
    per_key, per_label = Counter(key for _, key in made), Counter(label for label, _ in made)
    completed = {key for h in checked.histories.values() for key in h.tool_attempts}
    dup_keys = sum(n - 1 for n in per_key.values() if n > 1)
    dup_labels = sum(n - 1 for n in per_label.values() if n > 1)  # one call, two idempotency keys
    missing = sorted(key for key in completed if per_key[key] == 0)
    attempts = Counter(key for _, key, _, _ in read_lines(attempts_path(effects)))
    rerun = [n for n in attempts.values() if n > 1]
    # messages
    lost = {r.name: lost_and_extra(r, checked.transcripts[r.name]) for r in runs if r.name in checked.transcripts}
    n_lost, n_extra = sum(a for a, _ in lost.values()), sum(b for _, b in lost.values())
    replay_failures = {name: why for name, why in checked.replays.items() if why != "ok"}
    # model faults, as the model server saw them land
    requests = llm.requests()
    hit = Counter(fault_name(r["fault"]) for r in requests if r.get("fault"))
    models = {r.model for r in runs}
    calls = sum(r.get("model") in models for r in requests)
    kills, restarts = sum(log.kills.values()), len(log.restarts)
    histories = checked.histories.values()
    downs = ", ".join(f"{s:.1f}s" for s in log.restarts)

    ok = (
        len(good) == len(runs)
        and dup_keys == dup_labels == len(missing) == n_lost == n_extra == 0
        and not replay_failures
        and not checked.errors
        and len(checked.replays) == len(runs)
        and (kills, restarts) == (args.kills, args.restarts)
    )
    lines = [
        "",
        f"==== soak · seed {args.seed} · {len(runs)} runs, at most {args.concurrency} at once · "
        f"{'ALL HELD' if ok else 'PROBLEMS'} ====",
        f"runs completed      {len(good)} of {len(runs)} with the scripted answer "
        f"({len(failed)} failed or wrong, {len(unfinished)} unfinished)",
        f"duplicate effects   {dup_keys + dup_labels} (same idempotency key {dup_keys}, same call under two keys "
        f"{dup_labels}); completed tool calls {len(completed)}, effects {len(made)}, "
        f"completed calls with no effect {len(missing)}",
        f"                    calls retried after a kill/restart {len(rerun)} (extra attempts "
        f"{sum(rerun) - len(rerun)}: each a duplicate but for the idempotency key)",
        f"lost messages       {n_lost} (and {n_extra} unexpected) over {len(lost)} transcripts",
        f"wall time           {wall:.1f}s for the runs; {total:.1f}s in all, checks included",
        f"worker kills        {kills} of {args.kills} ({dict(log.kills)}), each followed by a fresh worker",
        f"server restarts     {restarts} of {args.restarts} (down {downs or '-'})"
        + (f"; {log.skipped} chaos events skipped: runs over or deadline passed" if log.skipped else ""),
        f"model faults        queued {sum(log.queued.values())} {dict(sorted(log.queued.items()))}; "
        f"landed {sum(hit.values())} {dict(sorted(hit.items()))}; {calls} model requests",
        f"model attempts      {sum(len(h.model_attempts) for h in histories)} calls completed, "
        f"{sum(a > 1 for h in histories for a in h.model_attempts)} of them after a retry; "
        f"workflow task timeouts {sum(h.task_timeouts for h in histories)}",
        f"replay              {len(checked.replays) - len(replay_failures)} of {len(runs)} histories replay under "
        f"the current code; failures {len(replay_failures)}",
    ]
    lines += [f"  unfinished: {r.name} ({r.id or 'never started'})" for r in unfinished]
    lines += [f"  {r.name}: {r.error or (r.result.output if r.result else '?')!r}" for r in failed]
    lines += [f"  {name}: lost {a}, unexpected {b}" for name, (a, b) in lost.items() if a or b]
    lines += [f"  {name}: replay failed: {why}" for name, why in replay_failures.items()]
    lines += [f"  effect missing for completed call {key}" for key in missing]
    lines += [f"  {e}" for e in checked.errors]
    return "\n".join(lines), ok


async def soak(args: argparse.Namespace, stack: Stack, workdir: Path, began: float) -> bool:
    rng = random.Random(args.seed)
    until = began + max(args.deadline - CHECK_SECONDS, 0.0)
    effects = Path(os.environ["SIDE_EFFECTS_FILE"])
    client = await stack.connect()
    stack.llm.set_latency(150, stream_event_ms=20)  # a model call takes a moment: kills land mid-call too
    runs = [plan(rng, stack.llm, f"s{i:02d}") for i in range(args.runs)]
    queue = f"soak-{uuid.uuid4().hex[:8]}"
    workers = {
        name: WorkerProcess(name, stream, stack.server, stack.llm, queue, workdir)
        for name, stream in (("stream", True), ("plain", False))
    }
    checked = Checked()
    try:
        await asyncio.gather(*(w.start() for w in workers.values()))
        log = Log()  # the clock starts with the runs
        slots = asyncio.Semaphore(args.concurrency)
        outcomes = await asyncio.gather(
            *(drive(client, run, queue, slots, log, until) for run in runs),
            disrupt(random.Random(rng.random()), log, schedule(rng, args.kills, args.restarts), workers,
                    stack.server, stack.llm, runs, until),
            inject(random.Random(rng.random()), log, args.faults, args.timeouts, stack.llm, runs, until),
            return_exceptions=True,  # a worker that fails to come back is a finding: report it, go on
        )  # fmt: skip
        for error in (e for e in outcomes if isinstance(e, BaseException)):
            traceback.print_exception(error)
            checked.errors.append(f"a run or the chaos stopped on {type(error).__name__}: {error}")
        wall = log.now()
        log.note(f"runs over ({sum(r.done for r in runs)} of {len(runs)} done); checking histories")
        check_until = max(began + args.deadline, time.monotonic() + CHECK_SECONDS)
        try:
            await asyncio.wait_for(check(client, runs, checked, check_until), check_until - time.monotonic())
        except TimeoutError:
            checked.errors.append(f"checks unfinished at the deadline ({len(checked.replays)} runs checked)")
    finally:
        await asyncio.gather(*(w.stop() for w in workers.values()))
    text, ok = report(args, runs, log, checked, stack.llm, effects, wall, time.monotonic() - began)
    print(text, flush=True)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    os.environ["SIDE_EFFECTS_FILE"] = str(workdir / "side_effects.log")  # the workers inherit it
    stack = Stack(workdir)
    # The client's own retries while the dev server restarts are expected: no WARN line for each.
    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=quiet)))
    code = 1
    try:
        print(f"soak: starting dev server and fake model server (work dir {workdir})", file=sys.stderr)
        stack.start()
        code = 0 if asyncio.run(soak(args, stack, workdir, began)) else 1
    except KeyboardInterrupt:
        print("\nsoak: interrupted; stopping what it started", file=sys.stderr)
        code = 130
    except Exception as err:
        print(f"soak: failed: {type(err).__name__}: {err} (work dir {workdir})", file=sys.stderr)
    finally:
        stack.close()
    if code == 0 and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"soak: work dir kept: {workdir}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
