"""A run survives a SIGKILLed worker and a restarted Temporal server, and replays."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from temporalio.api.enums.v1 import EventType

from durable_agent_runner.config.connection import CORE_LOG
from durable_agent_runner.workflows import types as t
from tests.helpers import activity_attempts, activity_started, replay, script, start, status_of

ROOT = Path(__file__).resolve().parent.parent


def tool_call(name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def effects(path: Path) -> Counter[str]:
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines())


def start_worker_process(
    temporal_server, llm, task_queue: str, log: Path, tools: str = "tests/fixtures/agents.py"
) -> subprocess.Popen[bytes]:
    """`python worker.py` as a user runs it, in its own process so it can be SIGKILLed."""
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_server.target,
        "LLM_BASE_URL": llm.base_url,
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [sys.executable, "worker.py", "--tools", tools, "--task-queue", task_queue]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while b"worker polling" not in log.read_bytes():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"worker did not start:\n{log.read_text()}"
        time.sleep(0.1)
    return proc


async def wait_for(predicate, timeout: float = 30.0, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(every)


async def test_sigkilled_worker_mid_tool_resumes_with_each_completed_tool_run_once(
    client, temporal_server, llm, task_queue, counter_file, tmp_path
):
    model = script(
        llm,
        tool_call("record", label="before"),
        tool_call("slow_record", label="slow", seconds=4),
        tool_call("record", label="after"),
        {"content": "all done"},
    )
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log)
    handle = await start(client, task_queue, "go", agent="scripted", model=model)

    async def slow_tool_running() -> bool:
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        return (
            status.turn == 2
            and status.phase == "running_tools"
            and await activity_started(handle, t.TOOL_CALL_ACTIVITY)
        )

    await wait_for(slow_tool_running, timeout=60)  # a worker took its attempt: the slow tool is mid-sleep
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert effects(counter_file) == Counter({"before": 1})

    second = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.output == "all done" and result.turns == 4
        # every tool that completed ran exactly once; the killed attempt never completed
        assert effects(counter_file) == Counter({"before": 1, "slow": 1, "after": 1})
        assert await activity_attempts(handle, t.TOOL_CALL_ACTIVITY) == [1, 2, 1]
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0, "worker.py should exit 0 on SIGTERM"
    assert "stopped" in log.read_text().splitlines()[-1]
    assert log.read_text().count("event loop: uvloop") == 2  # both workers, as `python worker.py` runs
    await replay(handle)


async def test_temporal_server_restart_mid_run(client, temporal_server, llm, task_queue, worker_factory, counter_file):
    model = script(llm, tool_call("patient_record", label="through-restart", seconds=6), {"content": "survived"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)

        async def tool_running() -> bool:
            status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
            return status.phase == "running_tools"

        await wait_for(tool_running)
        # Not in a thread, on purpose: while the loop is held the tool's completion waits, and is sent
        # once the server is back. Sent while the server is down for longer than the SDK's retry
        # window, a completion is lost and the tool runs again (seen with the restart in a thread).
        temporal_server.stop()  # SQLite keeps the history
        await asyncio.sleep(1.0)
        temporal_server.start()
        result = await asyncio.wait_for(handle.result(), 90)
    assert result.output == "survived"
    assert effects(counter_file) == Counter({"through-restart": 1})
    await replay(handle)


async def test_the_sdk_cores_warnings_go_through_python_logging(temporal_server, worker_factory, caplog, capfd):
    """The SDK core's own warnings (here: polls retried while the server is down) reach the
    `temporalio.core` logger, so the worker's handlers, format and masking, not standard output:
    a bench whose pipe nobody read stopped every poll of its worker once that pipe was full."""
    caplog.set_level(logging.WARNING, logger=CORE_LOG.name)
    async with worker_factory():
        await asyncio.to_thread(temporal_server.stop)  # not holding the worker's loop
        try:
            deadline = time.monotonic() + 40
            while not (core := [r for r in caplog.records if r.name.startswith(CORE_LOG.name)]):
                assert time.monotonic() < deadline, "no warning of the SDK core reached its logger"
                await asyncio.sleep(0.2)
        finally:
            await asyncio.to_thread(temporal_server.start)
    assert "retried" in core[0].getMessage() and core[0].levelno == logging.WARNING
    assert "retried" not in capfd.readouterr().out


async def test_sigkilled_worker_mid_model_call_is_noticed_in_seconds(
    client, temporal_server, llm, task_queue, tmp_path
):
    model = script(llm, {"content": "answered after all"})
    llm.add_faults([{"kind": "delay", "ms": 8000, "model": model}])  # a slow first reply
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log)
    handle = await start(client, task_queue, "go", agent="scripted", model=model)

    async def model_call_in_flight() -> bool:
        return any(r["model"] == model for r in llm.requests())

    await wait_for(model_call_in_flight)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    killed_at = time.monotonic()
    second = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    took = time.monotonic() - killed_at
    assert result.output == "answered after all"
    assert await activity_attempts(handle, t.MODEL_CALL_ACTIVITY) == [2]
    # the heartbeat timeout (10 s), not the 300 s start-to-close timeout, moved the call
    assert took < 25, f"the dead worker's model call took {took:.1f}s to move"


async def kill_and_replace(first: subprocess.Popen[bytes], temporal_server, llm, task_queue, log, tools: str):
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    return start_worker_process(temporal_server, llm, task_queue, log, tools=tools)


async def test_sigkilled_worker_mid_handoff_resumes_with_the_next_agent(
    client, temporal_server, llm, task_queue, tmp_path
):
    tools = "tests/fixtures/team_agents.py"
    model = script(llm, {"tool_calls": [{"name": "transfer_to_billing"}]}, {"content": "billing here"})
    llm.add_faults([{"kind": "delay", "ms": 1500, "count": 10, "model": model}])  # every call takes a while
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log, tools=tools)
    handle = await start(client, task_queue, "about my invoice", agent="triage", model=model)

    async def billing_is_thinking() -> bool:
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        return status.agent == "billing" and status.phase == "calling_model"

    await wait_for(billing_is_thinking)  # handed off; the next agent's first model call is in flight
    second = await kill_and_replace(first, temporal_server, llm, task_queue, log, tools)
    try:
        result = await asyncio.wait_for(handle.result(), 90)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert (result.agent, result.output) == ("billing", "billing here")
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [("triage", "billing")]
    await replay(handle)


async def test_sigkilled_worker_mid_child_run_resumes_parent_and_child(
    client, temporal_server, llm, task_queue, tmp_path
):
    tools = "examples/support_team.py"  # refunds runs the researcher as a child run
    llm.add_faults([{"kind": "delay", "ms": 1500, "count": 20, "model": "team"}])
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log, tools=tools)
    handle = await start(client, task_queue, "I was charged twice for order 1234, please refund", agent="triage",
                         model="team")  # fmt: skip

    async def child_running() -> bool:
        history = await handle.fetch_history()
        return any(e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED for e in history.events)

    await wait_for(child_running, timeout=60)
    second = await kill_and_replace(first, temporal_server, llm, task_queue, log, tools)
    try:
        result = await asyncio.wait_for(handle.result(), 120)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert result.agent == "refunds" and result.output_object is not None
    assert result.output_object["order_id"] == "1234"
    history = await handle.fetch_history()
    (child_id,) = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    child = client.get_workflow_handle(child_id, result_type=t.RunResult)
    assert (await child.result()).agent == "researcher"
    await replay(handle)
    await replay(child)


async def test_sigkilled_worker_mid_approval_check_is_noticed_in_seconds(
    client, temporal_server, llm, task_queue, counter_file, tmp_path
):
    """A worker that dies while a call's approval check runs stalls nothing: the hook heartbeats,
    so another worker takes the check over within seconds (not the 300 s start-to-close), and
    meanwhile status says the call is being checked, not that it runs."""
    tools = "tests/fixtures/slow_check_agents.py"
    model = script(llm, tool_call("send_report", label="q3"), {"content": "sent it"})
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log, tools=tools)
    handle = await start(client, task_queue, "send the q3 report", agent="careful", model=model)

    async def checking() -> bool:
        return effects(counter_file)["check"] == 1

    await wait_for(checking)
    status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert "checking whether send_report(label=q3) needs approval" in status.last_step, status.last_step
    assert "running" not in status.last_step
    killed_at = time.monotonic()
    second = await kill_and_replace(first, temporal_server, llm, task_queue, log, tools)
    try:

        async def awaiting_approval() -> bool:
            return bool((await status_of(handle)).pending_approvals)

        await wait_for(awaiting_approval, timeout=90)
        took = time.monotonic() - killed_at
        # the hook's heartbeat timeout (10 s) moved the check to the new worker
        assert took < 30, f"the dead worker's approval check took {took:.1f}s to move"
        (pending,) = (await status_of(handle)).pending_approvals
        decision = t.ApprovalDecision(call_id=pending.call_id, approve=True, by="tester")
        await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert result.output == "sent it"
    assert effects(counter_file) == Counter({"check": 2, "sent": 1})
    assert await activity_attempts(handle, t.HOOK_ACTIVITY) == [2]
    await replay(handle)
