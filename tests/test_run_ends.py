"""How runs end, and what a person sees then: cancelled while waiting, a model that never
recovers (bounded retries, the provider's last words), signals that do not parse, stale decisions."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, CancelledError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.client.export import export_run
from durable_agent_runner.workflows import types as t
from tests.fixtures.agents import _guarded_policy, _guarded_tools
from tests.helpers import calls, replay, script, start
from tests.test_approvals import decide, pending, status, update
from tests.test_client import ROOT, cli  # noqa: F401  (the fixture)

PHASE = t.SA_PHASE
PENDING = t.SA_PENDING

impatient = Agent(name="impatient", tools=_guarded_tools, approvals=_guarded_policy, model_max_attempts=3)


@pytest.fixture
def registry_plus() -> Registry:
    reg = Registry.from_modules(["examples.demo_agent", "tests.fixtures.agents"])
    reg.add_agent(impatient)
    return reg


async def search_attributes_settle(handle, want_phase: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        sa = (await handle.describe()).typed_search_attributes
        if sa.get(PHASE) == want_phase or time.monotonic() > deadline:
            return sa
        await asyncio.sleep(0.2)


async def test_a_run_cancelled_while_waiting_leaves_nothing_waiting(
    cli, client, task_queue, worker_factory, llm, tmp_path
):
    model = script(llm, calls(("send", {"label": "x"})), {"content": "never"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        assert isinstance(caught.value.cause, CancelledError)
        sa = await search_attributes_settle(handle, "cancelled")
        assert sa.get(PHASE) == "cancelled" and sa.get(PENDING) == 0
        s = await status(handle)
        assert s.status == "cancelled" and s.pending_approvals == []
        # what the CLI shows: no call waiting, no approve hint
        shown = await cli("status", handle.id, "--json")
        body = json.loads(shown.out)
        assert body["status"] == "cancelled" and body["pending_approvals"] == []
        human = await cli("status", handle.id)
        assert "waiting:" not in human.out and "approve" not in human.out
        refused = await cli("approve", handle.id, waiting.call_id)
        assert refused.code == 2 and "has ended (cancelled): no call of it is pending" in refused.err
        lines = await export_run(client, handle.id, CaptureStore(tmp_path))
        assert lines[0]["status"] == "cancelled" and lines[-1]["type"] == "result"
        await replay(handle)


async def test_a_terminated_run_shows_how_it_ended(cli, client, task_queue, worker_factory, llm, tmp_path):
    model = script(llm, calls(("send", {"label": "x"})), {"content": "never"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        await pending(handle)
        await handle.terminate(reason="operator stopped it")
        body = json.loads((await cli("status", handle.id, "--json")).out)
        assert body["status"] == "terminated" and body["phase"] == "terminated" and body["pending_approvals"] == []
        lines = await export_run(client, handle.id, CaptureStore(tmp_path))
        assert lines[0]["status"] == "terminated" and lines[-1]["error"] == "operator stopped it"


async def test_a_model_that_never_recovers_fails_the_run_with_its_last_error(
    client, task_queue, worker_factory, llm, registry_plus
):
    model = script(llm, {"content": "unreachable"})
    llm.add_fault("status", status=503, count=50, model=model)
    async with worker_factory(registry=registry_plus):
        handle = await start(client, task_queue, "hi", agent="impatient", model=model)
        started = time.monotonic()
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), timeout=60)
        cause = caught.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "ModelHTTP503"
        assert "HTTP 503" in cause.message and "turn 1" in cause.message
        assert time.monotonic() - started < 30  # 3 attempts, 1 s and 2 s apart
        assert len([r for r in llm.requests() if r["body"].get("model") == model]) == 3
        s = await status(handle)
        assert s.status == "failed" and "HTTP 503" in (s.error or "")


async def test_a_signal_that_does_not_parse_is_shown_in_status(cli, client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "x"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        await handle.signal(t.APPROVAL_SIGNAL, {"approve": "maybe"})
        await handle.signal(t.APPROVAL_SIGNAL, "not even an object")
        await handle.signal(t.APPROVAL_SIGNAL, {"call_id": waiting.call_id, "approve": True, "turn": 7})
        deadline = time.monotonic() + 10
        while len((s := await status(handle)).ignored_signals) < 3:
            assert time.monotonic() < deadline, s
            await asyncio.sleep(0.1)
        assert all("not a decision" in r for r in s.ignored_signals[:2]), s.ignored_signals
        assert "waiting in turn 1, not turn 7" in s.ignored_signals[2]
        assert s.pending_approvals  # none of them decided anything
        shown = await cli("status", handle.id)
        assert shown.out.count("ignored:") == 3
        await update(handle, decide(waiting.call_id, turn=1))
        assert (await handle.result()).output == "done"
        await replay(handle)


async def test_a_decision_for_another_turn_is_refused(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "x"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await update(handle, decide(waiting.call_id, turn=2))
        assert isinstance(caught.value.cause, ApplicationError) and caught.value.cause.type == "UnknownCall"
        await update(handle, decide(waiting.call_id, turn=1))
        await handle.result()
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_watch_prints_a_huge_answer_without_a_traceback(cli, client, task_queue, worker_factory, llm):
    answer = "lorem ipsum " * 300_000  # 3.6 MB: past gRPC's 4 MB once framed, past the event cap
    model = script(llm, {"content": answer})
    async with worker_factory():
        handle = await start(client, task_queue, "write a lot", agent="guarded", model=model)
        assert (await handle.result()).output == answer
        watched = await cli("watch", handle.id, timeout=60)
        result = await cli("result", handle.id, timeout=60)
    assert watched.code == 0 and "Traceback" not in watched.err, str(watched)[:2000]
    assert watched.out.startswith("── turn 1") and "client.py result` prints it whole" in watched.out
    assert result.code == 0 and result.out == answer + "\n"


def test_a_base_url_without_a_scheme_stops_the_worker_at_once():
    env = {**os.environ, "LLM_BASE_URL": "localhost:8000/v1", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "worker.py: error: LLM_BASE_URL must be an http:// or https:// URL with a host, and no blanks, "
        "not 'localhost:8000/v1'"
    )


def test_a_startup_error_that_echoes_the_key_prints_it_masked():
    key = "sk-live-0123456789abcdefSECRET"
    env = {
        **os.environ,
        "LLM_API_KEY": key,
        "LLM_BASE_URL": f"localhost:8000/v1?key={key}",
        "TEMPORAL_ADDRESS": "127.0.0.1:1",
    }
    done = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert key not in done.stderr and "0123456789abcdef" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "worker.py: error: LLM_BASE_URL must be an http:// or https:// URL with a host, and no blanks, "
        "not 'localhost:8000/v1?key=***…'"
    )
