"""Small helpers for workflow tests: start a run, read its history, group events by turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.service import RPCError
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import NondeterminismError

from durable_agent_runner.client.updates import PASSING
from durable_agent_runner.config.connection import DATA_CONVERTER
from durable_agent_runner.workflows import AgentRun, DeliverMessage
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.eval_run import EvalRun
from durable_agent_runner.workflows.score_run import ScoreRun
from durable_agent_runner.workflows.types import evals as te
from durable_agent_runner.workflows.types import live_scores as tl

T = TypeVar("T")

# AgentRun runs outside the sandbox (workflows/agent.py says why); its replays run inside it, so
# the engine's logic (machine/ and the workflow classes of workflows/) is imported afresh in the
# sandbox, and a clock, random number, environment variable, file or restricted module reached
# while replaying fails the replay. Passed through: pydantic and jsonschema (they validate), and
# the contracts, which are data: workflows/types/ (workflows/ruff.toml bans clocks, randomness,
# the environment and I/O in them too) and the eval cases, verdicts and evaluator specs a
# workflow carries (durable_agent_runner.evals). Building their ~150 pydantic classes afresh was
# three quarters of a replay's CPU: the 37 checked-in histories took 20 s to replay, 4.4 s now.
CONTRACTS = ("durable_agent_runner.workflows.types", "durable_agent_runner.evals")
STRICT_SANDBOX = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("pydantic", "jsonschema", *CONTRACTS)
)


def event(kind: str, *, seq: int = 0, turn: int = 1, at: datetime | None = None, **fields: Any) -> t.AnyRunEvent:
    """One event of `kind`, built as the run builds it (its kind's class). A call's events name a
    call and tool, a reply's carries usage, unless the test gives its own."""
    if kind in CALL_KINDS or kind == "handoff":
        fields = {"call_id": "call_1", "tool": "send", **fields}
    if kind in ("model_finished", "model_dropped"):
        fields.setdefault("usage", t.Usage())
    return t.RUN_EVENT.validate_python(
        {"seq": seq, "at": at or datetime.now(UTC), "kind": kind, "turn": turn, **fields}
    )


CALL_KINDS = {cls.model_fields["kind"].default for cls in t.CallEvent.__subclasses__()}


# The workflows the suite's histories hold, by the type name a history's start event gives.
REPLAYED = {
    t.WORKFLOW_NAME: AgentRun,
    t.DELIVER_WORKFLOW: DeliverMessage,
    te.EVAL_WORKFLOW: EvalRun,
    tl.SCORE_WORKFLOW: ScoreRun,
}  # all `sandboxed=False`


def strict_replayer(*names: str) -> Replayer:
    """A replayer of our workflows in STRICT_SANDBOX (they are `sandboxed=False`, so they run in
    the replayer's unsandboxed runner: that is the one given the sandbox). Given type names, it
    holds those alone: each replay prepares every workflow it holds, importing its module afresh
    in the sandbox (half of a one-run replay's CPU for the other three)."""
    return Replayer(
        workflows=[REPLAYED[name] for name in names] if names else list(REPLAYED.values()),
        data_converter=DATA_CONVERTER,
        workflow_runner=STRICT_SANDBOX,
        unsandboxed_workflow_runner=STRICT_SANDBOX,
    )


def script(llm: Any, *steps: dict[str, Any]) -> str:
    """Register a fake_llm script (one step per model turn) and return its model name."""
    sid = uuid.uuid4().hex[:8]
    llm.add_script(sid, list(steps))
    return f"script:{sid}"


def calls(*items: tuple[str, object]) -> dict[str, Any]:
    """A script step that asks for these tool calls, in this order."""
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in items]}


async def start(client: Client, task_queue: str, prompt: str, **fields: Any) -> WorkflowHandle[Any, t.RunResult]:
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    return await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(prompt=prompt, **fields),
        id=run_id,
        task_queue=task_queue,
        result_type=t.RunResult,
    )


async def through_gaps(read: Callable[[], Awaitable[T]], attempts: int = 10) -> T:
    """`read()`, asked again (a second apart, `attempts` times at most) when no worker answered it:
    a SIGKILLed worker's sticky queue before the server hands the run to a new one (CI saw
    "context canceled"), a restarting server. As client.py's reads do."""
    for attempt in range(attempts):
        try:
            return await read()
        except RPCError as err:
            if err.status not in PASSING or attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("not reached")


async def status_of(handle: WorkflowHandle[Any, Any]) -> t.RunStatus:
    """The run's status, read through gaps (`through_gaps`), each read bounded at 20 s."""
    bound = timedelta(seconds=20)
    status: t.RunStatus = await through_gaps(
        lambda: handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=bound)
    )
    return status


async def transcript(handle: WorkflowHandle[Any, Any]) -> list[t.Message]:
    result: t.Transcript = await handle.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
    return result.messages


async def replay(handle: WorkflowHandle[Any, Any]) -> None:
    """Replays the run's own history under the current code; raises on non-determinism."""
    await replay_history(await handle.fetch_history())


def marker_ids(history: WorkflowHistory) -> list[str]:
    """The ids of the patch markers in a history (the SDK's `core_patch` markers)."""
    ids = []
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if marker.marker_name == "core_patch":
            ids.append(json.loads(marker.details["patch-data"].payloads[0].data)["id"])
    return ids


async def replay_history(history: WorkflowHistory) -> None:
    """Replays one history in the strict sandbox, with a replayer of its own workflow alone. On
    non-determinism, the failure carries the events around the one it names (and the history is
    written to the temp dir), so a flake that a CI log alone keeps can still be read."""
    name = history.events[0].workflow_execution_started_event_attributes.workflow_type.name
    try:
        await (strict_replayer(name) if name in REPLAYED else strict_replayer()).replay_workflow(history)
    except NondeterminismError as err:
        kept = Path(tempfile.gettempdir()) / f"nondeterministic-{uuid.uuid4().hex[:8]}.json"
        kept.write_text(history.to_json())
        found = re.search(r"HistoryEvent\(id: (\d+)", str(err))
        at = int(found.group(1)) if found else len(history.events)
        first, last = max(1, at - 40), at + 12
        window = "\n".join(event_line(e) for e in history.events if first <= e.event_id <= last)
        raise AssertionError(f"{err}\nhistory written to {kept}; events {first}..{last}:\n{window}") from err


def event_line(event: Any) -> str:
    """One history event, as a line: its id, type and what it names (activity, child, marker)."""
    kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    named = ""
    if event.HasField("activity_task_scheduled_event_attributes"):
        a = event.activity_task_scheduled_event_attributes
        named = f"{a.activity_type.name} {a.activity_id}"
    elif event.HasField("start_child_workflow_execution_initiated_event_attributes"):
        named = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
    elif event.HasField("child_workflow_execution_completed_event_attributes"):
        named = event.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id
    elif event.HasField("child_workflow_execution_started_event_attributes"):
        named = event.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
    elif event.HasField("activity_task_completed_event_attributes"):
        named = f"of {event.activity_task_completed_event_attributes.scheduled_event_id}"
    elif event.HasField("marker_recorded_event_attributes"):
        named = event.marker_recorded_event_attributes.marker_name
    return f"{event.event_id:>5} {kind} {named}".rstrip()


def starts_turn(event: Any) -> bool:
    """A model call scheduled: the model activity, or a tool activity that makes the next model
    call once its tool has run (its input's `then`, machine/requests.py; payloads not encrypted)."""
    if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return False
    a = event.activity_task_scheduled_event_attributes
    if a.activity_type.name == t.MODEL_CALL_ACTIVITY:
        return True
    return a.activity_type.name == t.TOOL_CALL_ACTIVITY and any(b'"then":{' in p.data for p in a.input.payloads)


async def bytes_per_turn(handle: WorkflowHandle[Any, Any]) -> list[int]:
    """History bytes added by each turn: the events from one model-call activity being
    scheduled up to (not including) the next one."""
    history = await handle.fetch_history()
    turns: list[int] = []
    for event in history.events:
        if starts_turn(event):
            turns.append(0)
        if turns:
            turns[-1] += event.ByteSize()
    return turns


def payload_bytes(event: Any) -> int:
    """The bytes of what a run's code put into an event or got back from an activity: the inputs
    an activity was scheduled with, its result, a marker's details (a local activity, a patch).
    Not the event's other fields, which the server fills in and a loaded machine varies (an
    attempt's last failure, a workflow task's timeout, a throttled search-attribute upsert)."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return event.activity_task_scheduled_event_attributes.input.ByteSize()
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return event.activity_task_completed_event_attributes.result.ByteSize()
    if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
        return sum(p.ByteSize() for p in event.marker_recorded_event_attributes.details.values())
    return 0


async def payload_bytes_per_turn(handle: WorkflowHandle[Any, Any]) -> list[int]:
    """`payload_bytes` of each turn's events, turns as in `bytes_per_turn`."""
    history = await handle.fetch_history()
    turns: list[int] = []
    for event in history.events:
        if starts_turn(event):
            turns.append(0)
        if turns:
            turns[-1] += payload_bytes(event)
    return turns


async def events_per_turn(handle: WorkflowHandle[Any, Any], start: bool = False) -> list[list[str]]:
    """Each turn's events (names without the EVENT_TYPE_ prefix), from one model call being
    scheduled up to the next; with `start`, first the events before the first model call. An
    upsert the SDK makes for a patch marker (TemporalChangeVersion alone) is CHANGE_VERSION."""
    history = await handle.fetch_history()
    turns: list[list[str]] = [[]] if start else []
    for event in history.events:
        if starts_turn(event):
            turns.append([])
        if turns:
            name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            turns[-1].append("CHANGE_VERSION" if set(fields) == {"TemporalChangeVersion"} else name)
    return turns


async def heartbeat_payloads(handle: WorkflowHandle[Any, Any], activity: str) -> int:
    """How many values the last heartbeat of the run's pending activity of that name that the
    server holds carries (0: none, or no such activity pending)."""
    pending = (await handle.describe()).raw_description.pending_activities
    return max((len(p.heartbeat_details.payloads) for p in pending if p.activity_type.name == activity), default=0)


async def beating(handle: WorkflowHandle[Any, Any], activity: str) -> int:
    """How many of the run's pending activities of that name the server holds a heartbeat of: a
    worker killed before its first beat reached the server leaves no "attempt started" to show."""
    pending = (await handle.describe()).raw_description.pending_activities
    return sum(p.activity_type.name == activity and p.HasField("last_heartbeat_time") for p in pending)


async def pending_activities(handle: WorkflowHandle[Any, Any]) -> str:
    """The run's pending activities as the server holds them, "; "-separated, for a failure message:
    scheduled and never started (no worker polled its queue?) reads apart from started and slow."""
    pending = (await handle.describe()).raw_description.pending_activities
    lines = [
        f"{p.activity_type.name} {PendingActivityState.Name(p.state)} attempt {p.attempt}"
        f" scheduled {p.scheduled_time.ToDatetime():%H:%M:%S.%f}"
        + (f" last beat {p.last_heartbeat_time.ToDatetime():%H:%M:%S.%f}" if p.HasField("last_heartbeat_time") else "")
        + (f" last failure {p.last_failure.message!r}" if p.HasField("last_failure") else "")
        for p in pending
    ]
    return "; ".join(lines) or "none"


async def activity_started(handle: WorkflowHandle[Any, Any], activity: str) -> bool:
    """Whether an activity of that name is pending and a worker has started its attempt."""
    pending = (await handle.describe()).raw_description.pending_activities
    return any(
        p.activity_type.name == activity and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for p in pending
    )


async def activity_attempts(handle: WorkflowHandle[Any, Any], activity: str) -> list[int]:
    """The attempt number of each completed activity of that name, in order."""
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    started: dict[int, int] = {}
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            started[a.scheduled_event_id] = a.attempt
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            sid = e.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled.get(sid) == activity:
                attempts.append(started[sid])
    return attempts


def context_queries(monkeypatch: Any) -> list[int]:
    """From now on in this test, the `upto` of every model call that read its context by query
    (not from the worker's cache), in order."""
    from durable_agent_runner.activities.model import ModelActivities

    queried: list[int] = []
    original = ModelActivities.read_context

    async def counted(self: ModelActivities, upto: int) -> Any:
        queried.append(upto)
        return await original(self, upto)

    monkeypatch.setattr(ModelActivities, "read_context", counted)
    return queried


@contextlib.contextmanager
def closed_address() -> Iterator[str]:
    """An address where nobody listens, and kept so: a socket bound to it that never listens makes
    every connection attempt fail at once, and no other process (the suite runs in several) can
    take the port meanwhile, as it could a port merely found free."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


TASK_ATTEMPT = ("WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED")
TASK_RETRIED = ("WORKFLOW_TASK_TIMED_OUT", "WORKFLOW_TASK_FAILED")


def without_retried_tasks(turn: list[str]) -> list[str]:
    """A turn's events less the workflow task attempts the server retried. On a loaded machine a
    task can time out (not done within its 10 s, or its sticky queue not polled in time) or fail
    (an activation past the SDK's deadlock bound): the server records its SCHEDULED (STARTED) and
    TIMED_OUT (FAILED), then the attempt that completes. None of them is a command of the run."""
    kept: list[str] = []
    for name in turn:
        if name in TASK_RETRIED:
            while kept and kept[-1] in TASK_ATTEMPT:
                kept.pop()
        else:
            kept.append(name)
    return kept


async def client_py_until(args: list[str], env: dict[str, str], words: bytes, seconds: float = 60) -> tuple[Any, bytes]:
    """Starts `client.py ARGS` and reads its standard error until a line holds `words` (within
    `seconds`, its start-up included): the process, still running, and that line. Fails, killing
    it, when it ends without saying them or says them too late."""
    root = Path(__file__).resolve().parent.parent
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "client.py", *args, cwd=root, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(seconds):
            while words not in (line := await proc.stderr.readline()):
                assert line, f"client.py ended without saying {words!r}"
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc, line


async def client_py_says(args: list[str], env: dict[str, str], words: bytes, seconds: float = 60) -> bytes:
    """`client_py_until`, then the process killed: the line that held `words`."""
    proc, line = await client_py_until(args, env, words, seconds)
    proc.kill()
    await proc.wait()
    return line
