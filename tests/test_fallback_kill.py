"""A worker SIGKILLed in the middle of a fallback (issue 33, item 4): `python worker.py` in its own
process, killed as soon as the switch is in the run's story while the next model's first reply is
still on its way. A new worker resumes the run on the model it had reached: the failing model is
never asked again, the run completes, each tool runs once, and the history replays.
tests/test_fallback.py stops an in-process worker cleanly for the same case."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

import pytest
from temporalio.client import WorkflowExecutionStatus

from durable_agent_runner.workflows import types as t
from tests.helpers import activity_attempts, replay, script, start
from tests.test_durability import effects, start_worker_process, tool_call, wait_for
from tests.test_fallback import FOREVER, events, requests_for


async def test_a_worker_sigkilled_right_after_the_switch_resumes_on_the_model_reached(
    client, temporal_server, llm, task_queue, counter_file, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("LLM_MAX_ATTEMPTS", "2")  # worker.py's retry bound: a 529 forever uses it in about a second
    down = script(llm, {"content": "never said"})
    up = script(llm, tool_call("record", label="after-switch"), {"content": "done on the model reached"})
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": down}])
    llm.add_faults([{"kind": "delay", "ms": 6000, "model": up}])  # the next model's first reply is slow
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        handle = await start(client, task_queue, "go", agent="scripted", model=down, fallback_models=[up])

        async def switched_and_asking() -> bool:  # the switch made, the next model's first call in flight
            story = await events(handle)
            return any(e.kind == t.EventKind.MODEL_FALLBACK for e in story) and requests_for(llm, up) > 0

        await wait_for(switched_and_asking, timeout=60, every=0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    asked_down = requests_for(llm, down)
    assert asked_down == 2  # its retry bound, all before the kill
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    second = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        result = await asyncio.wait_for(handle.result(), 90)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        story = await events(handle)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert result.output == "done on the model reached"
    assert requests_for(llm, down) == asked_down  # the failed model is never asked again
    assert requests_for(llm, up) == 3  # the call the kill cut, that call again, then turn 2
    assert [e.kind for e in story].count(t.EventKind.MODEL_FALLBACK) == 1  # the switch is not made twice
    (switch,) = status.switches
    assert (switch.from_model, switch.to_model, switch.turn) == (down, up, 1)
    assert status.model == up and set(status.usage_by_model) == {up}  # cost counted on the model reached
    assert effects(counter_file) == Counter({"after-switch": 1})
    assert (await activity_attempts(handle, t.MODEL_CALL_ACTIVITY))[0] == 2  # the cut call, retried on `up`
    await replay(handle)
