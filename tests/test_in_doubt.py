"""Calls in doubt go to a person: a `once` tool's attempt that ends without a result (its worker
SIGKILLed mid-call) is never run again by the run itself; `client.py resolve` decides it."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner import Registry, tool
from durable_agent_runner.client import AgentClient
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.calls import PlannedCall, attempt_ended, resolved, runs, with_reply
from durable_agent_runner.machine.doubts import Doubts
from durable_agent_runner.workflows import types as t
from tests.helpers import beating, calls, replay, script, start, status_of, transcript
from tests.test_client import cli  # noqa: F401  (a fixture: client.py as a subprocess)
from tests.test_durability import start_worker_process, wait_for

TOOLS = "tests/fixtures/once_agents.py"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def starts(path: Path) -> Counter[str]:
    """Attempts that began, by `tool:label` (each tool writes its start line first)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split()[0].removeprefix("start:") for line in lines if line.startswith("start:"))


def keys(path: Path, what: str) -> set[str]:
    return {line.split()[1] for line in path.read_text().splitlines() if line.split()[0] == what}


@pytest.fixture
def block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """While this file exists, the fixture tools block (so the test can kill their worker)."""
    path = tmp_path / "block"
    path.touch()
    monkeypatch.setenv("ONCE_BLOCK_FILE", str(path))
    return path


@pytest.fixture
def workers(temporal_server, llm, task_queue, tmp_path: Path) -> Any:
    """`workers()` starts `python worker.py` on the once fixtures; any left running is killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def make() -> subprocess.Popen[bytes]:
        started.append(start_worker_process(temporal_server, llm, task_queue, tmp_path / "worker.log", tools=TOOLS))
        return started[-1]

    yield make
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# ------------------------------------------------------------------------------------ pure


def _agent(**tool: Any) -> t.AgentSpec:
    return t.AgentSpec(name="a", version="v1", tools=[t.ToolSpec(name="pay", **tool)])


def _planned() -> PlannedCall:
    return PlannedCall(call=t.ToolCall(call_id="c1", name="pay", arguments='{"to": "bob"}'), action="tool")


@pytest.mark.pure
def test_a_once_call_runs_as_one_routed_attempt_never_local_nor_with_the_reply() -> None:
    assert runs(_planned(), _agent(once=True), '{"to": "bob"}') == "once"
    assert runs(_planned(), _agent(), '{"to": "bob"}') == "activity"
    assert with_reply(_agent(once=True, local=True), 1) is None  # a once tool never rides with a reply
    with pytest.raises(ValueError, match="once=True cannot be local"):
        tool(lambda: "x", name="both", once=True, local=True)


@pytest.mark.pure
def test_only_a_once_calls_lost_attempt_is_in_doubt() -> None:
    planned = _planned()
    assert attempt_ended(planned, "once", "timeout", "activity Heartbeat timeout", 1) is None
    assert attempt_ended(planned, "once", "shutdown", "Worker is shutting down", 1) is None  # a deploy
    own = attempt_ended(planned, "once", "error", "ConnectionError: bank down", 1)  # the tool's own error
    assert own is not None and own.is_error and "bank down" in own.content
    lost = attempt_ended(planned, "activity", "timeout", "activity Heartbeat timeout", 5)
    assert lost is not None and lost.content.startswith("error: tool 'pay' failed after 5 attempt(s)")


@pytest.mark.pure
def test_each_resolution_becomes_a_rerun_or_what_the_model_reads() -> None:
    planned = _planned()

    def record(action: str, **fields: Any) -> t.CallResolution:
        return t.CallResolution(call_id="c1", tool="pay", action=action, by="ops", at=NOW, **fields)

    assert resolved(planned, record("rerun")) == "rerun"
    given = resolved(planned, record("result", result='{"receipt": 7}'))
    assert isinstance(given, t.ToolMessage) and given.content == '{"receipt": 7}' and not given.is_error
    assert given.resolution is not None and given.resolution.by == "ops"
    text = resolved(planned, record("result", result='"paid bob"'))
    assert isinstance(text, t.ToolMessage) and text.content == "paid bob"  # a JSON string is the text
    failed = resolved(planned, record("fail", reason="no such payment"))
    assert isinstance(failed, t.ToolMessage) and failed.is_error
    assert failed.content == "error: tool 'pay' failed: no such payment (reported by ops)"


@pytest.mark.pure
def test_a_resolution_is_refused_unless_its_call_is_in_doubt() -> None:
    doubts = Doubts()
    with pytest.raises(DecisionRefused, match="call c1 is not in doubt; in doubt: none"):
        doubts.check(t.ResolveCall(call_id="c1", action="rerun"))
    doubts.mark(
        t.InDoubtCall(call_id="c1", tool="pay", arguments={}, turn=1, scheduled_at=NOW, ended_at=NOW, ended="x")
    )
    doubts.check(t.ResolveCall(call_id="c1", action="rerun"))
    with pytest.raises(DecisionRefused, match="in doubt for time 1, not 2"):
        doubts.check(t.ResolveCall(call_id="c1", action="rerun", doubt=2))
    doubts.apply(t.ResolveCall(call_id="c1", action="rerun", by="ops"), NOW)
    assert doubts.times("c1") == 1 and doubts.decided("c1", 1) is not None
    with pytest.raises(DecisionRefused, match="ops resolved it"):
        doubts.check(t.ResolveCall(call_id="c1", action="rerun"))
    for bad in ({"action": "result"}, {"action": "result", "result": "{nope"}, {"action": "fail"}):
        with pytest.raises(pydantic.ValidationError):
            t.ResolveCall.model_validate({"call_id": "c1", **bad})


# --------------------------------------------------------------------------- with a server


async def test_a_once_tool_that_raises_its_own_error_is_told_to_the_model_not_in_doubt(
    client, llm, task_queue, worker_factory
):
    model = script(llm, calls(("refuse", {"label": "x"})), {"content": "gave up"})
    async with worker_factory(registry=Registry.from_modules(["tests.fixtures.once_agents"])):
        handle = await start(client, task_queue, "go", agent="payer", model=model)
        assert (await handle.result()).output == "gave up"
        told = [m for m in await transcript(handle) if isinstance(m, t.ToolMessage)]
        assert told[0].is_error and "failed after 1 attempt(s)" in told[0].content
        assert "bank unreachable" in told[0].content
        assert not (await status_of(handle)).resolutions


async def test_calls_in_doubt_are_never_rerun_and_each_resolution_works(
    client, temporal_server, llm, task_queue, counter_file, block, workers, cli
):
    model = script(
        llm,
        calls(("pay", {"label": "alice"}), ("pay", {"label": "bob"}), ("pay", {"label": "carol"})),
        {"content": "all settled"},
    )
    first = workers()
    handle = await start(client, task_queue, "pay them", agent="payer", model=model)

    async def all_started() -> bool:  # each tool runs, and its first heartbeat reached the server
        return len(starts(counter_file)) == 3 and await beating(handle, t.TOOL_CALL_ACTIVITY) == 3

    await wait_for(all_started)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    workers()

    async def all_in_doubt() -> bool:
        return len((await status_of(handle)).in_doubt) == 3

    await wait_for(all_in_doubt, timeout=60)
    await asyncio.sleep(2)  # time enough for a retry, had there been one
    assert starts(counter_file) == Counter({"pay:alice": 1, "pay:bob": 1, "pay:carol": 1})

    shown = await cli("status", handle.id, "--json")
    assert shown.code == 0, shown
    status = shown.json()
    assert status["status"] == "in_doubt" and status["phase"] == "in_doubt"
    doubt = {d["arguments"]["label"]: d for d in status["in_doubt"]}
    assert doubt["alice"]["tool"] == "pay" and doubt["alice"]["ended"] == "heartbeat timeout"
    assert doubt["alice"]["started_at"] is not None  # from the attempt's own heartbeat
    text = (await cli("status", handle.id)).out
    assert f"in doubt: {doubt['bob']['call_id']}  pay(" in text and "ended without a result" in text
    assert f"resolve: python client.py resolve {handle.id} {doubt['bob']['call_id']}" in text
    sa = (await handle.describe()).typed_search_attributes
    assert sa.get(t.SA_PHASE) == "in_doubt" and sa.get(t.SA_IN_DOUBT) is True

    block.unlink()  # a rerun may now finish
    alice, bob, carol = (doubt[n]["call_id"] for n in ("alice", "bob", "carol"))
    rerun = await cli("resolve", handle.id, alice, "--rerun", "--by", "ops", "--json")
    assert rerun.code == 0 and rerun.json()["action"] == "rerun", rerun
    given = await cli("resolve", handle.id, bob, "--result", '{"receipt": 7}', "--by", "ops")
    assert given.code == 0 and "has the given result: resolved by ops" in given.out, given
    again = await cli("resolve", handle.id, bob, "--fail", "late")
    assert again.code == 2 and f"call {bob} is not in doubt: ops resolved it (result)" in again.out + again.err
    failed = await cli("resolve", handle.id, carol, "--fail", "the bank has no such payment", "--by", "ops")
    assert failed.code == 0, failed

    assert (await asyncio.wait_for(handle.result(), 60)).output == "all settled"
    assert starts(counter_file) == Counter({"pay:alice": 2, "pay:bob": 1, "pay:carol": 1})
    assert len(keys(counter_file, "start:pay:alice")) == 1  # the rerun had the call's idempotency key
    seen = {m.call_id: m for m in await transcript(handle) if isinstance(m, t.ToolMessage)}
    assert seen[alice].content == "pay alice done" and seen[alice].resolution is None
    assert seen[bob].content == '{"receipt": 7}' and not seen[bob].is_error
    assert seen[bob].resolution is not None and seen[bob].resolution.by == "ops"
    assert seen[carol].is_error and "the bank has no such payment (reported by ops)" in seen[carol].content
    events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
    assert [e.kind for e in events].count("call_in_doubt") == 3
    assert sorted(e.detail for e in events if e.kind == "call_resolved") == [
        "failed: the bank has no such payment by ops",
        "result given by ops",
        "run again by ops",
    ]
    final = (await cli("status", handle.id)).out
    assert f"resolved: {bob}  pay result given: " in final and "in doubt:" not in final
    # The export holds every resolution, and the result a person gave as the call's result.
    lines = await AgentClient(client).get(handle.id).export()
    resolved = {line["call_id"]: line for line in lines if line["type"] == "resolution"}
    assert {c: (r["action"], r["by"], r["tool"]) for c, r in resolved.items()} == {
        alice: ("rerun", "ops", "pay"),
        bob: ("result", "ops", "pay"),
        carol: ("fail", "ops", "pay"),
    }
    assert resolved[carol]["reason"] == "the bank has no such payment"
    given = [line for line in lines if line["type"] == "tool_result" and line.get("given_by")]
    assert [(g["call_id"], g["output"], g["given_by"]) for g in given] == [(bob, '{"receipt": 7}', "ops")]
    await replay(handle)


async def test_a_tool_without_the_flag_still_retries_after_its_worker_dies(
    client, temporal_server, llm, task_queue, counter_file, block, workers
):
    model = script(llm, calls(("fetch", {"label": "report"})), {"content": "fetched"})
    first = workers()
    handle = await start(client, task_queue, "fetch it", agent="payer", model=model)

    async def started() -> bool:
        return bool(starts(counter_file))

    await wait_for(started)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    block.unlink()
    workers()
    assert (await asyncio.wait_for(handle.result(), 60)).output == "fetched"
    assert starts(counter_file) == Counter({"fetch:report": 2})  # retried by Temporal, as before
    events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
    assert "call_in_doubt" not in [e.kind for e in events]


async def test_an_approved_once_call_in_doubt_never_reruns_without_a_person(
    client, temporal_server, llm, task_queue, counter_file, block, workers
):
    model = script(llm, calls(("pay", {"label": "dave"})), {"content": "settled"})
    first = workers()
    handle = await start(client, task_queue, "pay dave", agent="careful_payer", model=model)

    async def asked() -> bool:
        return bool((await status_of(handle)).pending_approvals)

    await wait_for(asked)
    call_id = (await status_of(handle)).pending_approvals[0].call_id
    decision = t.ApprovalDecision(call_id=call_id, approve=True, by="alice")
    await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)

    async def started() -> bool:
        return bool(starts(counter_file))

    await wait_for(started)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    block.unlink()  # a rerun would now finish at once: none must start
    workers()

    async def in_doubt() -> bool:
        return bool((await status_of(handle)).in_doubt)

    await wait_for(in_doubt, timeout=60)
    await asyncio.sleep(3)
    status = await status_of(handle)
    assert status.phase == "in_doubt" and not status.pending_approvals
    assert [d.by for d in status.decisions] == ["alice"]  # approved once; not asked again
    assert starts(counter_file) == Counter({"pay:dave": 1})
    # A signal that cannot apply is kept in the status, not applied; the signal (the Web UI's way) resolves it too.
    await handle.signal(t.RESOLVE_SIGNAL, t.ResolveCall(call_id="call_9_9", action="rerun"))
    await handle.signal(t.RESOLVE_SIGNAL, t.ResolveCall(call_id=call_id, action="fail", reason="unsure", by="bob"))
    assert (await asyncio.wait_for(handle.result(), 30)).output == "settled"
    assert starts(counter_file) == Counter({"pay:dave": 1})
    done = await status_of(handle)
    (record,) = done.resolutions
    assert any("call call_9_9 is not in doubt" in note for note in done.ignored_signals), done.ignored_signals
    assert record.by == "bob" and record.action == "fail"
    await replay(handle)


async def test_resolve_without_a_worker_exits_3_like_approve(client, task_queue, cli):
    handle = await start(client, task_queue, "nobody serves this queue", agent="payer")
    done = await cli("resolve", handle.id, "call_1_0", "--rerun", "--wait", "1", "--json")
    assert done.code == 3, done
    assert "no worker" in done.json()["error"].lower(), done
    await handle.terminate("test over")


async def test_cancel_ends_the_wait_of_a_call_in_doubt(client, llm, task_queue, worker_factory, cli):
    label = uuid.uuid4().hex[:8]  # hasty_pay's first attempt for a label outlives its 1 s bound
    model = script(llm, calls(("hasty_pay", {"label": label})), {"content": "never"})
    async with worker_factory(registry=Registry.from_modules(["tests.fixtures.once_agents"])):
        handle = await start(client, task_queue, "pay", agent="hasty_payer", model=model)

        async def in_doubt() -> bool:
            return bool((await status_of(handle)).in_doubt)

        await wait_for(in_doubt, timeout=30)
        assert (await status_of(handle)).in_doubt[0].ended == "start-to-close timeout"
        cancelled = await cli("cancel", handle.id)
        assert cancelled.code == 0, cancelled
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
        status = await status_of(handle)
        assert status.phase == "cancelled" and not status.in_doubt


async def test_a_graceful_worker_shutdown_mid_call_puts_it_in_doubt(
    client, temporal_server, llm, task_queue, counter_file, block, workers
):
    """A deploy stops the worker with SIGTERM while a `once` tool runs: the SDK cancels the attempt
    after its grace period. That attempt ended without a result, as a killed one does: the call is
    in doubt, and the run is neither cancelled nor told the tool failed."""
    model = script(llm, calls(("wire", {"label": "dora"})), {"content": "settled"})
    first = workers()
    handle = await start(client, task_queue, "pay dora", agent="deployed_payer", model=model)

    async def started() -> bool:
        return starts(counter_file)["wire:dora"] == 1

    await wait_for(started)
    first.send_signal(signal.SIGTERM)  # graceful: the worker cancels what still runs, then stops
    first.wait(60)
    workers()

    async def in_doubt() -> bool:
        return len((await status_of(handle)).in_doubt) == 1

    await wait_for(in_doubt, timeout=60)  # before: "failed after 1 attempt(s)" was told the model
    await asyncio.sleep(2)  # time enough for a retry, had there been one
    assert starts(counter_file) == Counter({"wire:dora": 1})
    status = await status_of(handle)
    assert status.phase == "in_doubt" and status.in_doubt[0].tool == "wire"
    assert status.in_doubt[0].ended == "its worker shut down before it finished"
    await handle.terminate()
