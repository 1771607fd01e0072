"""Fault suite: runs survive SIGKILLed workers, a restarted Temporal server and a misbehaving model.

Several scripted runs of the `chaos` agent (tests/fixtures/fault_agents.py) go at once, served by
two `python worker.py` processes on one task queue, one streaming model replies and one not.
While they run, a seeded schedule SIGKILLs workers (and starts them again) and restarts the
SQLite-persisted dev server, and an injector queues model faults at random for runs still in
flight: 429 with Retry-After, 500, 503, slow replies, replies slower than the agent's model
timeout, cut-off bodies and streams, malformed JSON and mid-stream error events.

Then every run must have completed with its scripted answer, its transcript must hold every tool
result in order (no message lost), each idempotent side effect must exist exactly once, the
attempt that history says completed each tool call must really have run it, and each history
must replay. The figures are printed whether or not the run passed.

The schedule and the fault kinds come from `random.Random(seed)`; set FAULT_SUITE_SEED to
replay a schedule (which run a fault lands on also depends on timing).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from durable_agent_runner.workflows import types as t
from tests.fixtures.fault_agents import attempts_path
from tests.helpers import replay

ROOT = Path(__file__).resolve().parent.parent
SEED = int(os.environ.get("FAULT_SUITE_SEED", "20250611"))
RUNS = 8
BUDGET = 110.0  # seconds for every run to finish, chaos included; the module stays under 150 s
MODEL_TIMEOUT = 8.0  # the chaos agent's model_timeout_seconds

T = TypeVar("T")

FAULTS: dict[str, dict[str, Any]] = {
    "429": {"kind": "status", "status": 429, "retry_after": 1},
    "500": {"kind": "status", "status": 500},
    "503": {"kind": "status", "status": 503, "retry_after_ms": 500},
    "slow": {"kind": "delay", "ms": 2500},
    "timeout": {"kind": "delay", "ms": int((MODEL_TIMEOUT + 2) * 1000)},  # past start-to-close
    "cut": {"kind": "cut", "after_events": 2},
    "malformed": {"kind": "malformed"},
    "error_event": {"kind": "error_event"},  # a stream's error event; a plain call's 500
}
PER_RUN_FAULTS = 3  # with kills, more could push a malformed reply to attempt 5: fatal by design
PER_RUN_MALFORMED = 2
TIMEOUT_FAULTS = 2  # each costs its run the model timeout


# ------------------------------------------------------------------------------ the runs


@dataclass
class Run:
    name: str
    model: str
    turns: list[list[tuple[str, dict[str, Any]]]]  # the tool calls of each turn but the last
    answer: str
    id: str = ""
    began: float = 0.0
    took: float | None = None
    result: t.RunResult | None = None
    error: str | None = None
    faults: list[str] = field(default_factory=list)  # queued for this run

    @property
    def labels(self) -> list[str]:
        return [args["label"] for calls in self.turns for _, args in calls]

    @property
    def done(self) -> bool:
        return self.took is not None


def plan(rng: random.Random, llm: Any, name: str) -> Run:
    """A deterministic script: 4-6 turns of 1-2 side-effecting calls, then an answer naming the run."""
    turns = []
    for turn in range(1, rng.randint(4, 6) + 1):
        calls = []
        for j in range(rng.randint(1, 2)):
            tool = rng.choice(["charge", "notify"])
            calls.append((tool, {"label": f"{name}.t{turn}.{j}.{tool}", "seconds": round(rng.uniform(0.3, 1.2), 2)}))
        turns.append(calls)
    answer = f"{name}: all {sum(map(len, turns))} effects done"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": tool, "arguments": args} for tool, args in calls]} for calls in turns
    ]
    sid = f"chaos-{name}-{uuid.uuid4().hex[:8]}"
    llm.add_script(sid, [*steps, {"content": answer}])
    return Run(name=name, model=f"script:{sid}", turns=turns, answer=answer)


def expected_transcript(run: Run) -> list[tuple[Any, ...]]:
    verb = {"charge": "charged", "notify": "notified"}
    out: list[tuple[Any, ...]] = [("user", f"chaos run {run.name}")]
    for calls in run.turns:
        out.append(("assistant", [(tool, args) for tool, args in calls]))
        out += [("tool", tool, f"{verb[tool]} {args['label']}", False) for tool, args in calls]
    out.append(("assistant", run.answer))
    return out


def shape(message: t.Message) -> tuple[Any, ...]:
    if isinstance(message, t.UserMessage):
        return ("user", message.content)
    if isinstance(message, t.ToolMessage):
        return ("tool", message.name, message.content, message.is_error)
    if message.tool_calls:
        return ("assistant", [(c.name, json.loads(c.arguments)) for c in message.tool_calls])
    return ("assistant", message.content)


# ---------------------------------------------------------------------------- the workers


class WorkerProcess:
    """`python worker.py` in its own process, so it can be SIGKILLed; streaming or not."""

    def __init__(self, name: str, stream: bool, server: Any, llm: Any, queue: str, logs: Path) -> None:
        self.name, self.stream, self.server, self.llm, self.queue, self.logs = name, stream, server, llm, queue, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.log = logs / f"worker-{name}-0.log"

    async def start(self) -> None:
        self.started += 1
        self.log = self.logs / f"worker-{self.name}-{self.started}.log"
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": self.server.target,
            "LLM_BASE_URL": self.llm.base_url,
            "LLM_STREAM": "1" if self.stream else "0",
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [sys.executable, "worker.py", "--tools", "tests/fixtures/fault_agents.py", "--task-queue", self.queue]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while b"worker polling" not in self.log.read_bytes():
            assert self.proc.poll() is None, f"worker {self.name} exited:\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"worker {self.name} did not start:\n{self.log.read_text()}"
            await asyncio.sleep(0.1)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    async def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9


# ------------------------------------------------------------------------------ the chaos


@dataclass
class Figures:
    began: float = field(default_factory=time.monotonic)
    timeline: list[str] = field(default_factory=list)
    kill_events: int = 0
    kills: Counter[str] = field(default_factory=Counter)  # worker name -> SIGKILLs
    restarts: list[float] = field(default_factory=list)  # dev-server downtime, seconds
    queued: Counter[str] = field(default_factory=Counter)

    def now(self) -> float:
        return time.monotonic() - self.began

    def note(self, text: str) -> None:
        self.timeline.append(f"t={self.now():5.1f}s  {text}")


def schedule(rng: random.Random) -> list[tuple[float, str, str]]:
    """(at, action, target): kills of one or both workers, two dev-server restarts."""
    targets = ["stream", "plain", "both"]
    return [
        (rng.uniform(1.5, 3.0), "kill", rng.choice(targets)),
        (rng.uniform(4.0, 5.5), "kill", rng.choice(targets)),
        (rng.uniform(7.0, 8.5), "restart-server", ""),
        (rng.uniform(12.0, 13.5), "kill", rng.choice(targets)),
        (rng.uniform(16.0, 18.0), "restart-server", ""),
        (rng.uniform(21.0, 23.0), "kill", rng.choice(targets)),
    ]


async def chaos(
    rng: random.Random, figures: Figures, workers: dict[str, WorkerProcess], server: Any, runs: list[Run]
) -> None:
    for at, action, target in schedule(rng):
        await asyncio.sleep(max(0.0, at - figures.now()))
        if all(r.done for r in runs):
            figures.note(f"{action} {target}: skipped, every run is done")
            continue
        if action == "kill":
            victims = list(workers.values()) if target == "both" else [workers[target]]
            for w in victims:
                w.kill()
                figures.kills[w.name] += 1
            figures.kill_events += 1
            figures.note(f"SIGKILL worker {target}")
            await asyncio.sleep(rng.uniform(0.3, 1.5))
            await asyncio.gather(*(w.start() for w in victims))
            figures.note(f"worker {target} started again")
        else:
            down = time.monotonic()
            figures.note("dev server: stopping (SIGTERM)")
            await asyncio.to_thread(server.stop)
            figures.note(f"dev server: stopped after {time.monotonic() - down:.1f}s; starting")
            await asyncio.to_thread(server.start)
            figures.restarts.append(time.monotonic() - down)
            figures.note(f"dev server: up again, {figures.restarts[-1]:.1f}s after the stop began")


def answered(requests: list[dict[str, Any]]) -> tuple[Counter[str], dict[str, bool]]:
    """Per model: the calls answered without a fault, and whether the latest one was."""
    clean = {r.get("model", ""): r.get("status") == 200 and not r.get("fault") for r in requests}
    return Counter(r.get("model") for r in requests if r.get("status") == 200 and not r.get("fault")), clean


async def inject(rng: random.Random, figures: Figures, llm: Any, runs: list[Run]) -> None:
    """Every 0.4-1.0 s, a fault for one run that has model calls ahead and none queued."""
    deck: list[str] = []
    timeouts = 0
    while not all(r.done for r in runs) and figures.now() < 30:
        await asyncio.sleep(rng.uniform(0.4, 1.0))
        if not deck:
            deck = [*FAULTS, "429", "500", "cut"]
            rng.shuffle(deck)
        pending = {f.get("model") for f in llm.pending_faults()}
        ok, clean = answered(llm.requests())
        eligible = [
            r
            for r in runs
            if not r.done
            and r.model not in pending
            and len(r.faults) < PER_RUN_FAULTS
            and ok[r.model] < len(r.turns)  # the final answer is still to come
        ]
        kind = deck[0]
        if kind == "malformed":  # at most PER_RUN_MALFORMED a run: MALFORMED_ATTEMPTS bad bodies fail it
            eligible = [
                r for r in eligible if r.faults.count("malformed") < PER_RUN_MALFORMED and clean.get(r.model, True)
            ]
        if kind == "timeout" and timeouts >= TIMEOUT_FAULTS:
            deck.pop(0)
            continue
        if not eligible:
            continue
        run = rng.choice(eligible)
        deck.pop(0)
        timeouts += kind == "timeout"
        llm.add_faults([{**FAULTS[kind], "model": run.model}])
        run.faults.append(kind)
        figures.queued[kind] += 1
        figures.note(f"fault {kind} queued for {run.name}")


def fault_name(fault: dict[str, Any]) -> str:
    if fault["kind"] == "status":
        return str(fault["status"])
    if fault["kind"] == "delay":
        return "timeout" if fault["ms"] > MODEL_TIMEOUT * 1000 else "slow"
    return str(fault["kind"])


# ------------------------------------------------------------------------ temporal helpers


async def retrying(call: Callable[[], Awaitable[T]], until: float) -> T:
    """A client call, retried while the dev server is down (it restarts in a few seconds)."""
    while True:
        try:
            return await call()
        except RPCError:
            if time.monotonic() > until:
                raise
            await asyncio.sleep(0.5)


async def follow(client: Client, run: Run, figures: Figures, until: float) -> None:
    handle = client.get_workflow_handle(run.id, result_type=t.RunResult)
    try:
        run.result = await retrying(handle.result, until)
    except WorkflowFailureError as err:
        run.error = f"{type(err.cause).__name__}: {err.cause}"
    run.took = time.monotonic() - run.began
    figures.note(f"{run.name} {'completed' if run.result else 'FAILED'}")


@dataclass
class History:
    model_attempts: list[int]
    tool_attempts: dict[str, int]  # idempotency key -> the attempt that completed
    task_timeouts: int


async def read_history(handle: WorkflowHandle[Any, Any]) -> History:
    history = await handle.fetch_history()
    scheduled: dict[int, tuple[str, str]] = {}  # event id -> (activity type, activity id)
    started: dict[int, int] = {}
    model: list[int] = []
    tools: dict[str, int] = {}
    timeouts = 0
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            scheduled[e.event_id] = (a.activity_type.name, a.activity_id)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started[e.activity_task_started_event_attributes.scheduled_event_id] = (
                e.activity_task_started_event_attributes.attempt
            )
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            sid = e.activity_task_completed_event_attributes.scheduled_event_id
            kind, activity_id = scheduled[sid]
            if kind == t.MODEL_CALL_ACTIVITY:
                model.append(started[sid])
            elif kind == t.TOOL_CALL_ACTIVITY:  # activity id "tool-<turn>-<call id>"
                call_id = activity_id.split("-", 2)[2]
                tools[f"{handle.id}:{call_id}"] = started[sid]
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            timeouts += 1
    return History(model, tools, timeouts)


def read_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


# -------------------------------------------------------------------------------- the test


async def test_runs_survive_killed_workers_server_restarts_and_model_faults(
    client, temporal_server, llm, task_queue, counter_file, tmp_path, capsys
):
    rng = random.Random(SEED)
    figures = Figures()
    runs = [plan(rng, llm, f"r{i}") for i in range(RUNS)]
    llm.set_latency(150, stream_event_ms=20)  # a model call takes a moment: kills land mid-call too
    workers = {
        name: WorkerProcess(name, stream, temporal_server, llm, task_queue, tmp_path)
        for name, stream in (("stream", True), ("plain", False))
    }
    histories: dict[str, History] = {}
    problems: list[str] = []
    wall: float | None = None
    try:
        await asyncio.gather(*(w.start() for w in workers.values()))
        figures = Figures()  # the clock starts with the runs
        until = time.monotonic() + BUDGET
        for run in runs:
            run.id = f"chaos-{SEED}-{run.name}-{uuid.uuid4().hex[:6]}"
            run.began = time.monotonic()
            await client.start_workflow(
                t.WORKFLOW_NAME,
                t.RunInput(prompt=f"chaos run {run.name}", agent="chaos", model=run.model),
                id=run.id,
                task_queue=task_queue,
            )
        followers = asyncio.gather(*(follow(client, r, figures, until) for r in runs))
        troublemakers = asyncio.gather(
            chaos(random.Random(rng.random()), figures, workers, temporal_server, runs),
            inject(random.Random(rng.random()), figures, llm, runs),
        )
        try:
            await asyncio.wait_for(asyncio.gather(followers, troublemakers), BUDGET)
        except TimeoutError:
            followers.cancel()
            troublemakers.cancel()
            problems.append(f"not every run finished within {BUDGET:.0f}s")
        wall = figures.now()
        for w in workers.values():  # a cancelled schedule may have left one down
            if w.proc is None or w.proc.poll() is not None:
                await w.start()

        for run in runs:
            handle = client.get_workflow_handle(run.id)
            until = time.monotonic() + 20
            histories[run.id] = await retrying(lambda h=handle: read_history(h), until)
            if not run.result:
                continue
            messages = await retrying(
                lambda h=handle: h.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript), until
            )
            if [shape(m) for m in messages.messages] != expected_transcript(run):
                problems.append(f"{run.name}: transcript differs from the script: {messages.messages}")
            try:
                await replay(handle)
            except Exception as err:
                problems.append(f"{run.name}: replay failed: {err!r}")
    finally:
        codes = {name: await w.stop() for name, w in workers.items()}
        report = render(figures, runs, histories, llm, counter_file, codes, wall or figures.now())
        with capsys.disabled():
            print(report, flush=True)
        llm.reset()

    # every run completed with the right answer
    outcomes = {r.name: (r.result.output if r.result else r.error) for r in runs}
    assert outcomes == {r.name: r.answer for r in runs}
    assert all(r.result and r.result.turns == len(r.turns) + 1 for r in runs)
    # no message lost, histories replay
    assert problems == []
    # no duplicate side effect: one effect per idempotency key, and each expected effect once
    effects = read_lines(counter_file)
    assert {key: n for key, n in Counter(key for _, key in effects).items() if n > 1} == {}
    assert sorted(label for label, _ in effects) == sorted(label for r in runs for label in r.labels)
    keys = {label: key for label, key in effects}
    for run in runs:
        assert all(keys[label].startswith(f"{run.id}:") for label in run.labels)
    # the attempt history says completed each call is one that really ran the tool (its last), or
    # a later one that took that run's result from its heartbeat: the earlier attempt was lost in
    # the model call it made next (machine/requests.py)
    ran: dict[str, list[int]] = {}
    for _, key, attempt, _ in read_lines(attempts_path(counter_file)):
        ran.setdefault(key, []).append(int(attempt))
    completed = {key: attempt for h in histories.values() for key, attempt in h.tool_attempts.items()}
    assert set(completed) == set(keys.values())
    assert all(max(ran[key]) <= attempt for key, attempt in completed.items()), (ran, completed)
    # the chaos really happened
    assert figures.kill_events >= 3 and len(figures.restarts) >= 1
    assert sum(figures.queued.values()) >= RUNS


def render(
    figures: Figures,
    runs: list[Run],
    histories: dict[str, History],
    llm: Any,
    counter_file: Path,
    codes: dict[str, int | None],
    wall: float,
) -> str:
    requests = llm.requests()
    hit: dict[str, list[str]] = {}
    for r in requests:
        if r.get("fault"):
            hit.setdefault(r.get("model", ""), []).append(fault_name(r["fault"]))
    hits = Counter(kind for kinds in hit.values() for kind in kinds)
    effects = read_lines(counter_file)
    attempts = read_lines(attempts_path(counter_file))
    per_key = Counter(key for _, key, _, _ in attempts)
    rerun = {key: n for key, n in per_key.items() if n > 1}
    completed = sum(r.result is not None for r in runs)
    lines = [
        "",
        f"==== fault suite · seed {SEED} (FAULT_SUITE_SEED={SEED} to repeat the schedule) ====",
        f"runs           {len(runs)}: {completed} completed, {len(runs) - completed} not; wall {wall:.1f}s",
        f"worker kills   {figures.kill_events} moments, {sum(figures.kills.values())} processes SIGKILLed "
        f"{dict(figures.kills)}, each started again",
        f"server restarts {len(figures.restarts)} (down {', '.join(f'{s:.1f}s' for s in figures.restarts) or '-'})",
        f"model faults   queued {sum(figures.queued.values())} {dict(sorted(figures.queued.items()))}",
        f"               hit    {sum(hits.values())} {dict(sorted(hits.items()))}; "
        f"left unused {len(llm.pending_faults())}",
        f"model requests {len([r for r in requests if r.get('model', '').startswith('script:chaos-')])}",
        f"tool calls     {sum(len(r.labels) for r in runs)}; effects {len(effects)} "
        f"(duplicates {len(effects) - len({k for _, k in effects})}); attempts {len(attempts)}; "
        f"calls re-run after a kill/restart {len(rerun)} (extra attempts {sum(rerun.values()) - len(rerun)}: "
        "each would have been a duplicate without the idempotency key)",
        f"wf task timeouts {sum(h.task_timeouts for h in histories.values())}; final worker exits {codes}",
        "",
        f"{'run':4} {'turns':>5} {'took':>6}  {'model attempts/turn':22} {'faults hit':30} outcome",
    ]
    for r in runs:
        h = histories.get(r.id)
        took = f"{r.took:.1f}s" if r.took is not None else "-"
        model = " ".join(map(str, h.model_attempts)) if h else "?"
        outcome = "ok" if r.result and r.result.output == r.answer else (r.error or "unfinished")
        lines.append(
            f"{r.name:4} {len(r.turns) + 1:>5} {took:>6}  {model:22} {','.join(hit.get(r.model, [])) or '-':30} "
            f"{outcome}"
        )
    lines += ["", "timeline:", *(f"  {line}" for line in figures.timeline), ""]
    return "\n".join(lines)


async def test_a_malformed_reply_after_rate_limits_is_retried(client, llm, task_queue, worker_factory):
    """Four 429s, then one malformed body: one bad reply, which errors.py promises to retry."""
    sid = f"chaos-ratelimited-{uuid.uuid4().hex[:8]}"
    llm.add_script(sid, [{"content": "fine in the end"}])
    llm.add_faults([{**FAULTS["429"], "retry_after": 0.1, "count": 4, "model": f"script:{sid}"}])
    llm.add_faults([{**FAULTS["malformed"], "model": f"script:{sid}"}])
    async with worker_factory():
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="go", agent="scripted", model=f"script:{sid}"),
            id=f"ratelimited-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=t.RunResult,
        )
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.output == "fine in the end"
