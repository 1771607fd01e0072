"""The Python client end to end, as a user's program uses it: `durable_agent_runner.connect()`,
start, typed result, live events with streamed text, approve / reject with who decided, cancel,
sessions, and the typed errors (not found, refused, no worker answered, the run's own failure)."""

from __future__ import annotations

import time
import uuid
from contextlib import aclosing
from typing import Any

import pytest
from pydantic import BaseModel

import durable_agent_runner as dar
from durable_agent_runner import Agent, Registry
from durable_agent_runner.client import RunEvent, RunInfo, TextDelta
from durable_agent_runner.config.llm import LLMSettings
from tests.fixtures import agents as fixtures
from tests.helpers import calls, script

STORY = (
    "Tokyo is sunny and mild today at twenty two degrees, while Paris sits under low cloud at fifteen; "
    "Tokyo is the warmer and brighter choice by far."
)


class Ticket(BaseModel):
    title: str
    priority: int


ticketer = Agent(name="ticketer", instructions="File a ticket.", output_type=Ticket)


@pytest.fixture(scope="module")
def agents() -> Registry:
    return Registry(agents=[ticketer, fixtures.scripted, fixtures.guarded, fixtures.chatter, fixtures.looper])


@pytest.fixture
async def api(temporal_server, task_queue, monkeypatch) -> dar.AgentClient:
    """Connected as a user's program connects: from the environment client.py reads."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_server.target)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "default")
    monkeypatch.setenv("AGENT_TASK_QUEUE", task_queue)
    client = await dar.connect()
    assert client.task_queue == task_queue and client.temporal.namespace == "default"
    return client


async def story(run: dar.RunHandle, until: str | None = None, nth: int = 1) -> list[Any]:
    """The run's events, up to (and with) the `nth` of kind `until`, or all of them."""
    seen: list[Any] = []
    async with aclosing(run.events()) as events:
        async for item in events:
            seen.append(item)
            if until is not None and isinstance(item, RunEvent) and item.kind == until:
                nth -= 1
                if nth == 0:
                    break
    return seen


async def test_start_result_status_and_live_events_with_text_deltas(api, worker_factory, llm, agents):
    llm.set_latency(0, stream_event_ms=60)  # the reply takes about a second to stream
    model = script(llm, calls(("add", {"a": 2, "b": 3})), {"content": STORY})
    streaming = LLMSettings(base_url=llm.base_url, model="demo", stream=True)
    async with worker_factory(settings=streaming, registry=agents):
        run = await api.start(fixtures.scripted, "weather?", model=model, max_turns=5)
        items = await story(run)
        answer = await run.result()
        info = await run.status()
        again = [i for i in await story(api.get(run.id)) if isinstance(i, RunEvent)]  # its reads need a worker
    assert answer == STORY and run.id.startswith("scripted-weather-")
    kinds = [i.kind for i in items if isinstance(i, RunEvent)]
    assert kinds[0] == "model_started" and kinds[-1] == "final"
    assert "tool_started" in kinds and "tool_finished" in kinds
    deltas = [i for i in items if isinstance(i, TextDelta)]
    finished = max(n for n, i in enumerate(items) if isinstance(i, RunEvent) and i.kind == "model_finished")
    assert len(deltas) >= 2 and all(items.index(d) < finished for d in deltas)  # shown while it streamed
    assert STORY.startswith("".join(d.text for d in deltas if d.turn == 2))
    assert isinstance(info, RunInfo) and info.status == "completed" and info.turn == 2
    assert info.usage.total_tokens > 0 and info.usage.requests == 2 and info.error is None
    assert [e.kind for e in again] == kinds  # a finished run tells its story again, then the stream ends


async def test_typed_output_comes_back_as_the_agents_type(api, worker_factory, llm, agents):
    model = script(llm, {"json": {"title": "Printer on fire", "priority": 1}})
    async with worker_factory(registry=agents):
        run = await api.start(ticketer, "The printer is on fire", model=model)
        ticket = await run.result()
        by_name = await api.get(run.id).result()
        typed_later = await api.get(run.id, output_type=Ticket).result()
    assert ticket == Ticket(title="Printer on fire", priority=1)
    assert by_name == {"title": "Printer on fire", "priority": 1}  # no type given: the JSON data
    assert typed_later == ticket


async def test_approve_and_reject_record_who_and_the_model_gets_the_reason(
    api, worker_factory, llm, agents, counter_file
):
    model = script(
        llm, calls(("send", {"label": "draft"})), calls(("send", {"label": "spam"})), {"content": "understood"}
    )
    async with worker_factory(registry=agents):
        run = await api.start("guarded", "send both", model=model)
        first = (await story(run, until="approval_requested"))[-1]
        receipt = await run.approve(first.call_id, {"label": "final"}, by="alice")
        assert receipt.approved and receipt.call_id == first.call_id
        with pytest.raises(dar.DecisionRefused, match="already approved"):
            await run.reject(first.call_id, "changed my mind", by="alice")
        with pytest.raises(dar.DecisionRefused, match="refused it"):
            await run.approve("call_does_not_exist", by="alice")
        waiting = (await story(api.get(run.id), until="approval_requested", nth=2))[-1]
        assert waiting.call_id != first.call_id
        await run.reject(waiting.call_id, "we never send spam", by="bob")
        assert await run.result() == "understood"
        info = await run.status()
    assert counter_file.read_text().count("send:final") == 1 and "spam" not in counter_file.read_text()
    sent = llm.requests()[-1]["body"]["messages"]
    rejected = [m["content"] for m in sent if m["role"] == "tool"][-1]
    assert "rejected by bob" in rejected and "we never send spam" in rejected
    assert [(d.by, d.approved) for d in info.decisions] == [("alice", True), ("bob", False)]
    with pytest.raises(dar.DecisionRefused, match=r"has ended \(completed\): no call of it is pending$"):
        await run.approve(waiting.call_id, by="alice")


async def test_cancel_ends_the_run_and_result_raises_run_cancelled(api, worker_factory, llm, agents):
    model = script(llm, {"tool_calls": [{"name": "slow_record", "arguments": {"label": "a", "seconds": 30}}]})
    async with worker_factory(registry=agents):
        run = await api.start("scripted", "slow work", model=model)
        await story(run, until="tool_started")
        await run.cancel()
        with pytest.raises(dar.RunCancelled) as caught:
            await run.result()
        assert caught.value.status == "cancelled"
        assert (await run.status()).status == "cancelled"
        with pytest.raises(dar.DecisionRefused, match="already ended"):
            await run.cancel()


async def test_a_failed_run_raises_its_own_error_type(api, worker_factory, llm, agents):
    async with worker_factory(registry=agents):
        run = await api.start("looper", "go", model="loop:50:10", max_turns=2)
        with pytest.raises(dar.RunFailed) as caught:
            await run.result()
    assert caught.value.error_type == "MaxTurnsExceeded" and "max_turns (2) exceeded" in caught.value.message
    assert not isinstance(caught.value, dar.RunCancelled)


async def test_a_session_answers_messages_then_ends(api, worker_factory, llm, agents):
    model = script(llm, {"content": "hello Ada"}, {"content": "you are Ada"})
    async with worker_factory(registry=agents):
        chat = await api.start_session("chatter", model=model)
        receipt = await chat.send("my name is Ada", by="ada")
        assert receipt.message == 1 and await chat.answer(1) == "hello Ada"
        assert await chat.ask("who am I?", by="ada") == "you are Ada"
        ended = await chat.end("done", by="ada")
        assert ended.messages == 2 and ended.unanswered == 0
        result = await chat.outcome()
        kinds = [e.kind for e in await story(api.get_session(chat.id)) if isinstance(e, RunEvent)]
        with pytest.raises(dar.DecisionRefused, match="has ended"):
            await chat.send("still there?", by="ada")
    assert result.messages == 2 and result.ended_by == "ended by ada: done"
    assert kinds.count("answered") == 2 and kinds[-1] == "ended"


async def test_an_unknown_run_is_run_not_found(api):
    run = api.get(f"no-such-run-{uuid.uuid4().hex[:8]}")
    for call in (run.result, run.status, run.cancel, lambda: run.approve("call_1", by="x"), lambda: story(run)):
        with pytest.raises(dar.RunNotFound, match="no run with id"):
            await call()
    with pytest.raises(dar.RunNotFound):
        await api.get_session(run.id).send("hi")


async def test_no_worker_answered_is_bounded_by_wait(api):
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker polls it
    chat = await api.start_session("chatter", task_queue=queue)
    began = time.monotonic()
    with pytest.raises(dar.NoWorkerAnswered, match="no worker answered within 1s"):
        await chat.send("anyone?", wait=1)
    with pytest.raises(dar.NoWorkerAnswered):
        await chat.approve("call_1", by="x", wait=1)
    assert time.monotonic() - began < 10
    await api.temporal.get_workflow_handle(chat.id).terminate("test over")


async def test_web_ui_links_name_the_namespace_the_client_is_connected_to(
    api, temporal_server, worker_factory, llm, agents, monkeypatch
):
    """`connect(namespace=...)` may differ from TEMPORAL_NAMESPACE: a run's link (the handle's, its
    status's and its row in a list) names the namespace the run is in. Before, each read the
    environment's, and linked a page of another namespace."""
    monkeypatch.setenv("TEMPORAL_UI_URL", "https://ui.example.com")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "elsewhere")
    client = await dar.connect(namespace="default", task_queue=api.task_queue)
    assert client.temporal.namespace == "default"
    model = script(llm, {"content": "done"})
    async with worker_factory(registry=agents):
        run = await client.start(fixtures.scripted, "hi", model=model)
        assert await run.result() == "done"
        info = await run.status()
        [row] = [r for r in await client.list(limit=50) if r.run_id == run.id]
    page = f"https://ui.example.com/namespaces/default/workflows/{run.id}"
    assert info.ui_url == page and row.ui_url == page
    assert run.ui_url == page  # 1.4.6: the handle says it too
    # and `AgentClient.connect`, as temporalio's `Client.connect` teaches, is the same client
    same = await dar.AgentClient.connect(namespace="default", task_queue=api.task_queue)
    assert isinstance(same, dar.AgentClient) and same.temporal.namespace == "default"
    assert (same.task_queue, same.ui) == (client.task_queue, client.ui)
