"""A lone routed tool's activity makes the next model call itself (machine/requests.py), on the
dev server: one activity and one workflow task a turn, the reply used once, the tool run once
even when its worker dies during that model call, and a pause asked for meanwhile still holds."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import signal
from collections import Counter

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner import Registry, tool
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.client import AgentClient
from durable_agent_runner.client.control import model_calls_made
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import (
    activity_attempts,
    events_per_turn,
    heartbeat_payloads,
    replay,
    script,
    start,
    transcript,
    without_retried_tasks,
)
from tests.test_durability import effects, kill_and_replace, start_worker_process, tool_call, wait_for

TURN = [
    "ACTIVITY_TASK_SCHEDULED",
    "ACTIVITY_TASK_STARTED",
    "ACTIVITY_TASK_COMPLETED",
    "WORKFLOW_TASK_SCHEDULED",
    "WORKFLOW_TASK_STARTED",
    "WORKFLOW_TASK_COMPLETED",
]


async def in_phase(handle, phase: str, turn: int | None = None) -> bool:
    status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    return status.phase == phase and turn in (None, status.turn)


async def heartbeat_payloads_at_least(handle, n: int) -> bool:
    return await heartbeat_payloads(handle, t.TOOL_CALL_ACTIVITY) >= n


def requests_for(llm, model: str) -> int:
    return sum(r["model"] == model for r in llm.requests())


async def test_a_turn_whose_tool_is_an_activity_is_one_activity_and_one_workflow_task(
    client, task_queue, worker_factory, llm
):
    model = "loop:8:10"
    before = requests_for(llm, model)
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="looper", model=model)
        result = await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        messages = await transcript(handle)
        events = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
    assert result.turns == 8
    turns = await events_per_turn(handle)
    middle = [  # the run's own events: no upsert or marker, nor a workflow task the server retried under load
        [e for e in without_retried_tasks(turn) if e not in ("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", "MARKER_RECORDED")]
        for turn in turns[1:-1]
    ]
    assert middle and all(turn == TURN for turn in middle), turns
    # every reply made ahead was used: one request a turn, no model activity after the first
    assert requests_for(llm, model) - before == 8
    assert len(await activity_attempts(handle, t.MODEL_CALL_ACTIVITY)) == 1
    assert status.turn == 8 and result.usage.requests == 8
    assert [m.role for m in messages[:4]] == ["user", "assistant", "tool", "assistant"]
    # the events time the tool and the call made after it apart, as the activity's worker saw them
    finished = [e for e in events if e.kind == "tool_finished"]
    started = [e for e in events if e.kind == "model_started"][1:]
    assert len(finished) == len(started) == 7 and all(f.at == s.at for f, s in zip(finished, started, strict=True))
    replied = [e for e in events if e.kind == "model_finished"][1:]
    assert all(s.at <= r.at for s, r in zip(started, replied, strict=True))
    await replay(handle)


async def test_a_worker_killed_during_the_call_ahead_leaves_the_tool_run_once(
    client, temporal_server, llm, task_queue, counter_file, tmp_path
):
    model = script(llm, tool_call("slow_record", label="slow", seconds=2), {"content": "all done"})
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log)
    handle = await start(client, task_queue, "go", agent="scripted", model=model)

    await wait_for(lambda: in_phase(handle, "running_tools"))
    llm.add_faults([{"kind": "delay", "ms": 8000, "model": model}])  # the call ahead: slow
    await wait_for(lambda: asyncio.sleep(0, requests_for(llm, model) == 2))
    # the server holds the tool's result in its activity's heartbeat (after the call's progress)
    await wait_for(lambda: heartbeat_payloads_at_least(handle, 2), timeout=60)
    second = await kill_and_replace(first, temporal_server, llm, task_queue, log, tools="tests/fixtures/agents.py")
    assert effects(counter_file) == Counter({"slow": 1})
    try:
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert result.output == "all done" and result.turns == 2
    assert effects(counter_file) == Counter({"slow": 1})  # the retry took the result its heartbeat kept
    assert await activity_attempts(handle, t.TOOL_CALL_ACTIVITY) == [2]
    assert requests_for(llm, model) == 3  # the first call, the lost call ahead, its retry
    await replay(handle)


async def test_a_pause_asked_for_while_the_tool_runs_drops_the_reply_and_counts_it(
    client, task_queue, worker_factory, llm, counter_file, hold
):
    tool_runs = hold("slow")
    model = script(llm, tool_call("slow_record", label="slow", seconds=60), {"content": "all done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)

        await wait_for(lambda: in_phase(handle, "running_tools"))
        await handle.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="bob"), result_type=t.RunStatus)
        tool_runs.set()
        await wait_for(lambda: in_phase(handle, "paused"))
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert status.turn == 1 and status.usage.requests == 2  # the dropped reply's tokens count
        events = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
        assert [e.kind for e in events.events].count("model_dropped") == 1
        await handle.execute_update(t.RESUME_UPDATE, t.ResumeRequest(by="bob"), result_type=t.RunStatus)
        result = await handle.result()
    assert result.output == "all done" and result.turns == 2 and result.usage.requests == 3
    assert requests_for(llm, model) == 3
    await replay(handle)


async def test_a_watcher_sees_the_call_ahead_stream_under_its_turn(client, task_queue, worker_factory, llm):
    """The next turn's text streams from the tool's activity (its heartbeats) before the turn's
    events say the call was made: the watcher shows it live, under a header of its own, once."""
    story = "Tokyo is sunny and mild today, and Paris sits under low cloud; walk in Tokyo this afternoon."
    model = script(llm, tool_call("add", a=2, b=3), {"content": story})
    llm.set_latency(0, stream_event_ms=150)  # the reply streams for about two seconds
    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=True)
    try:
        async with worker_factory(settings=settings):
            handle = await start(client, task_queue, "tell me", agent="scripted", model=model)
            out = io.StringIO()
            code = await asyncio.wait_for(watch(AgentClient(client), handle.id, out=out), 60)
            json_out = io.StringIO()
            await asyncio.wait_for(watch(AgentClient(client), handle.id, as_json=True, out=json_out), 60)
    finally:
        llm.set_latency(0)
    assert code == 0
    text = out.getvalue()
    assert text.count("── turn 2") == 1 and text.count(story) == 1, text
    assert text.index("── turn 2") < text.index(story)
    result = await handle.result()
    assert result.output == story and result.usage.requests == 2


def then(tool_timeout: float) -> t.CallAhead:
    call = t.ModelCallInput(agent="", model=None, turn=3, transcript_len=4)
    return t.CallAhead(upto=3, call=call, tool_timeout_seconds=tool_timeout)


async def test_a_tool_that_makes_the_next_call_keeps_its_own_timeout_and_a_retry_does_not_run_it_again():
    """Temporal's start-to-close covers the tool and the model call; the tool's own bound holds
    inside it. A retry whose earlier attempt's heartbeat holds the tool's result runs nothing."""
    ran: list[str] = []

    @tool
    async def slow(label: str) -> str:
        """Take a while."""
        ran.append(label)
        await asyncio.sleep(0.5)
        return f"done {label}"

    activities = ToolActivities(Registry(tools=[slow]), heartbeat_interval=0.02)
    request = t.ToolCallInput(call_id="c1", tool="slow", args={"label": "a"}, idempotency_key="wf:c1", turn=2)
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(activities.call_tool, request.model_copy(update={"then": then(0.1)}))
    assert info.value.type == "ToolTimedOut" and "past its timeout of 0.1s" in info.value.message
    assert not info.value.non_retryable  # retried as Temporal's own timeout would be
    # no call ahead asked for: the tool's timeout is Temporal's, as ever
    assert (await ActivityEnvironment().run(activities.call_tool, request)).output == "done a"

    kept = t.ToolResult(call_id="c1", tool="slow", output="done earlier").model_dump(mode="json")
    retry = ActivityEnvironment()
    retry.info = dataclasses.replace(retry.info, attempt=2, heartbeat_details=[{"turn": 3, "attempt": 1}, kept])
    result = await retry.run(activities.call_tool, request.model_copy(update={"then": then(5)}))
    assert result.output == "done earlier" and ran == ["a", "a"]  # not run a third time
    assert result.ahead is None  # no model to call here: the turn calls it itself


async def test_a_fork_counts_the_model_calls_tools_made(client, task_queue, worker_factory, llm, counter_file):
    """`fork --at-turn N` is refused past the run's last model call, counted from its history:
    the calls its tools' activities made count with the model activities."""
    model = script(
        llm,
        *[tool_call("record", label=f"r{i}") for i in range(3)],
        tool_call("slow_record", label="slow", seconds=6),
        {"content": "done"},
    )
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)

        await wait_for(lambda: in_phase(handle, "running_tools", turn=4))
        described = await handle.describe()
        assert (described.typed_search_attributes.get(t.SA_TURN) or 0) < 4  # written at most every 5 s
        assert await model_calls_made(client, handle.id) == 4  # one model activity, three made by tools
        await handle.terminate()
