"""The soak's troublemakers (see bench/soak.py): worker SIGKILLs, dev-server restarts, model faults.

Each is released when the runs, together, have had a given share of their model calls answered
(the fault suite's `answered`), not at a fixed time: so the chaos is spread over the work however
fast the machine is, and the last of it comes while runs are still in flight. A worker is killed
one at a time, so the other carries on, and a fresh process replaces it at once. Model faults
follow the fault suite's rules (tests/test_fault_suite.py), which keep every run winnable.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.test_fault_suite import FAULTS, PER_RUN_FAULTS, PER_RUN_MALFORMED, Run, WorkerProcess, answered

SPREAD = 0.9  # the last event comes once 90% of the model calls are answered
POLL = 0.5  # seconds between looks at the model server's request log
FAULT_KINDS = [*FAULTS, "429", "500", "cut"]  # the common ones twice as often, as in the suite


@dataclass
class Log:
    """What the chaos really did, and a timestamped line on stderr for each thing."""

    began: float = field(default_factory=time.monotonic)
    kills: Counter[str] = field(default_factory=Counter)  # worker name -> SIGKILLs
    restarts: list[float] = field(default_factory=list)  # seconds from SIGTERM to serving again
    queued: Counter[str] = field(default_factory=Counter)  # model fault kind -> queued
    skipped: int = 0  # chaos events not performed: no run was in flight any more

    def now(self) -> float:
        return time.monotonic() - self.began

    def note(self, text: str) -> None:
        print(f"  [{self.now():6.1f}s] {text}", file=sys.stderr, flush=True)


def schedule(rng: random.Random, kills: int, restarts: int) -> list[str]:
    """Which worker each kill hits, with the server restarts spread evenly among the kills."""
    events = [rng.choice(["stream", "plain"]) for _ in range(kills)]
    for i in range(restarts):
        events.insert(int((i + 0.5) * (kills + restarts) / restarts), "server")
    return events


def in_flight(runs: list[Run], until: float) -> bool:
    return not all(r.done for r in runs) and time.monotonic() < until


async def share_reached(share: float, llm: Any, runs: list[Run], until: float) -> bool:
    """Wait until `share` of all the runs' model calls are answered; False if the runs ended first."""
    total = sum(len(r.turns) + 1 for r in runs)
    while in_flight(runs, until):
        ok, _ = answered(llm.requests())
        if sum(min(ok[r.model], len(r.turns) + 1) for r in runs) >= share * total:
            return True
        await asyncio.sleep(POLL)
    return False


async def disrupt(
    rng: random.Random,
    log: Log,
    events: list[str],
    workers: dict[str, WorkerProcess],
    server: Any,
    llm: Any,
    runs: list[Run],
    until: float,
) -> None:
    for k, event in enumerate(events):
        if await share_reached((k + 1) / (len(events) + 1) * SPREAD, llm, runs, until):
            await asyncio.sleep(rng.uniform(0.2, 1.5))  # off the beat of the model replies
        if not in_flight(runs, until):
            log.skipped = len(events) - k
            log.note(f"{log.skipped} chaos events skipped: every run is over or the deadline has passed")
            return
        if event == "server":
            down = time.monotonic()
            log.note(f"dev server: SIGTERM (restart {len(log.restarts) + 1})")
            await asyncio.to_thread(server.stop)
            await asyncio.to_thread(server.start)
            log.restarts.append(time.monotonic() - down)
            log.note(f"dev server: serving again after {log.restarts[-1]:.1f}s")
        else:
            worker = workers[event]
            pid = worker.proc.pid if worker.proc else None
            worker.kill()
            log.kills[event] += 1
            log.note(f"SIGKILL worker {event} (pid {pid}; kill {sum(log.kills.values())})")
            await asyncio.sleep(rng.uniform(0.3, 1.5))
            await worker.start()
            log.note(f"worker {event}: a fresh process is polling (pid {worker.proc.pid if worker.proc else '?'})")


def queue_fault(rng: random.Random, log: Log, llm: Any, runs: list[Run], max_timeouts: int) -> bool:
    """One fault for a run with model calls ahead and none queued; False if none could take it."""
    kind = rng.choice([k for k in FAULT_KINDS if k != "timeout" or log.queued["timeout"] < max_timeouts])
    pending = {f.get("model") for f in llm.pending_faults()}
    ok, clean = answered(llm.requests())
    eligible = [
        r
        for r in runs
        if r.id
        and not r.done
        and r.model not in pending
        and len(r.faults) < PER_RUN_FAULTS
        and ok[r.model] < len(r.turns)  # its final answer is still to come
        # at most PER_RUN_MALFORMED a run, never right after another fault: bad bodies add up to fatal
        and (kind != "malformed" or (r.faults.count("malformed") < PER_RUN_MALFORMED and clean.get(r.model, True)))
    ]
    if not eligible:
        return False
    run = rng.choice(eligible)
    llm.add_faults([{**FAULTS[kind], "model": run.model}])
    run.faults.append(kind)
    log.queued[kind] += 1
    log.note(f"model fault {kind} queued for {run.name}")
    return True


async def inject(
    rng: random.Random, log: Log, count: int, max_timeouts: int, llm: Any, runs: list[Run], until: float
) -> None:
    for j in range(count):
        if not await share_reached((j + 1) / (count + 1) * SPREAD, llm, runs, until):
            return
        while not queue_fault(rng, log, llm, runs, max_timeouts):
            if not in_flight(runs, until):
                return
            await asyncio.sleep(POLL)
