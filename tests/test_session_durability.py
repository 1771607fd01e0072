"""Sessions that outlive workers, servers and executions: nothing sent is lost or answered twice."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client

from durable_agent_runner.cli.session import end_session, get_exchange, send_message, wait_answer
from durable_agent_runner.client import updates
from durable_agent_runner.workflows import types as t
from tests.helpers import replay, script, transcript
from tests.test_durability import effects, start_worker_process, tool_call, wait_for
from tests.test_sessions import open_session, status

pytestmark = pytest.mark.asyncio


async def test_session_survives_killed_workers_and_server_restarts(
    client: Client,
    temporal_server: Any,
    llm: Any,
    task_queue: str,
    counter_file: Any,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = script(
        llm,
        tool_call("slow_record", label="m1", seconds=4),
        {"content": "one"},
        {"content": "two"},
        tool_call("patient_record", label="m3", seconds=6),
        {"content": "three"},
    )
    log = tmp_path / "worker.log"
    worker = start_worker_process(temporal_server, llm, task_queue, log)
    try:
        handle = await open_session(client, task_queue, model=model)
        await send_message(client, handle.id, "first", by="a")

        async def phase(name: str) -> bool:
            return (await status(handle)).phase == name

        # A worker SIGKILLed during an answer: the answer completes, its tool ran once. Reads of
        # the answer that no worker can take meanwhile time out; the wait notes each and asks again.
        await wait_for(lambda: phase("running_tools"))
        await asyncio.sleep(1.0)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        gaps: list[str] = []

        async def a_gap() -> bool:
            return bool(gaps)

        with monkeypatch.context() as patch:
            patch.setattr(updates, "READ_TIMEOUT", timedelta(seconds=1))  # where wait_answer reads it
            waiting = asyncio.create_task(wait_answer(client, handle.id, 1, on_gap=lambda said, _: gaps.append(said)))
            await wait_for(a_gap)
            worker = start_worker_process(temporal_server, llm, task_queue, log)
            assert (await asyncio.wait_for(waiting, 60)).output == "one"

        # Killed between messages; the message sent while no worker runs is taken once one does.
        await wait_for(lambda: phase("waiting_for_message"))
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        sending = asyncio.create_task(send_message(client, handle.id, "second", by="a", message_id="m-2"))
        await asyncio.sleep(1.0)
        worker = start_worker_process(temporal_server, llm, task_queue, log)
        receipt = await asyncio.wait_for(sending, 60)
        again = await send_message(client, handle.id, "second", by="a", message_id="m-2")  # a retry
        assert receipt.message == 2 and again.duplicate and again.message == 2
        assert (await wait_answer(client, handle.id, 2)).output == "two"

        # The server restarted between messages, and again during an answer.
        await wait_for(lambda: phase("waiting_for_message"))
        temporal_server.restart()
        await wait_for(lambda: _alive(handle), timeout=60)
        await send_message(client, handle.id, "third", by="a")
        await wait_for(lambda: phase("running_tools"), timeout=60)
        temporal_server.restart()
        assert (await asyncio.wait_for(wait_answer(client, handle.id, 3), 90)).output == "three"

        users = [m.content for m in await transcript(handle) if isinstance(m, t.UserMessage)]
        assert users == ["first", "second", "third"]
        assert effects(counter_file) == Counter({"m1": 1, "m3": 1})
        await end_session(client, handle.id, by="a")
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.messages == 3 and result.output == "three"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
    await replay(handle)


async def _alive(handle: Any) -> bool:
    try:
        await status(handle)
        return True
    except Exception:
        return False


async def test_session_across_continue_as_new_between_and_within_answers(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, hold: Any
) -> None:
    tool_runs = hold("a")
    model = script(
        llm,
        tool_call("slow_record", label="a", seconds=60),
        tool_call("record", label="b"),
        {"content": "answer one"},
        {"content": "answer two"},
        {"content": "answer three"},
    )
    async with worker_factory():
        handle = await open_session(client, task_queue, agent="hopper", model=model)
        await send_message(client, handle.id, "first", by="a")
        await wait_for(lambda: _phase_is(handle, "running_tools"))
        # Queued during a multi-turn answer that continues as new after every turn.
        second = await send_message(client, handle.id, "second", by="a")
        third = await send_message(client, handle.id, "third", by="a")
        tool_runs.set()
        outputs = [(await wait_answer(client, handle.id, k)).output for k in (1, 2, 3)]
        assert outputs == ["answer one", "answer two", "answer three"]
        assert (second.message, third.message) == (2, 3)
        users = [m.content for m in await transcript(handle) if isinstance(m, t.UserMessage)]
        assert users == ["first", "second", "third"]
        executions = [wf async for wf in client.list_workflows(f"WorkflowId='{handle.id}'")]
        assert len(executions) >= 4
        first = await get_exchange(client, handle.id, 1)
        assert first is not None and first.output == "answer one" and first.turns == 3
        await end_session(client, handle.id, by="a")
        result = await handle.result()
        assert result.messages == 3


async def _phase_is(handle: Any, phase: str) -> bool:
    return (await status(handle)).phase == phase


async def test_five_hundred_messages_with_small_histories(client: Client, task_queue: str, worker_factory: Any) -> None:
    pad = "x" * 1000
    async with worker_factory():
        handle = await open_session(client, task_queue, model="echo")
        for batch in range(10):
            for k in range(batch * 50 + 1, batch * 50 + 51):
                await send_message(client, handle.id, f"msg {k} {pad}", by="a")
            last = await wait_answer(client, handle.id, batch * 50 + 50)
            assert last.output == f"echo: msg {batch * 50 + 50} {pad}"
        for k in (1, 137, 250, 499, 500):
            exchange = await get_exchange(client, handle.id, k)
            assert exchange is not None and exchange.output == f"echo: msg {k} {pad}", k
        st = await status(handle)
        assert st.session is not None and (st.session.messages, st.session.answered) == (500, 500)
        assert st.session.compactions >= 1
        await end_session(client, handle.id, by="a")
        result = await handle.result()
        assert result.messages == 500
        sizes = []
        async for wf in client.list_workflows(f"WorkflowId='{handle.id}'"):
            history = await client.get_workflow_handle(handle.id, run_id=wf.run_id).fetch_history()
            sizes.append(sum(e.ByteSize() for e in history.events))
        assert len(sizes) > 1 and max(sizes) < 4 * 2**20, sizes
        print(f"500 messages: {len(sizes)} executions, largest history {max(sizes):,} bytes")
