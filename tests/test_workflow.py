"""Whole runs on a real Temporal dev server, the model being fake_llm over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agent_runner.client.export import local_result
from durable_agent_runner.config.connection import DATA_CONVERTER
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine.progress import COUNTERS_EVERY_SECONDS
from durable_agent_runner.workflows import types as t
from tests.helpers import (
    activity_attempts,
    bytes_per_turn,
    calls,
    context_queries,
    events_per_turn,
    replay,
    replay_history,
    script,
    start,
    starts_turn,
    strict_replayer,
    transcript,
    without_retried_tasks,
)


@pytest.mark.parametrize("api, stream", [("chat", False), ("chat", True), ("responses", False), ("responses", True)])
async def test_demo_run_answers_with_tool_results(client, task_queue, worker_factory, llm, api, stream):
    settings = LLMSettings(base_url=llm.base_url, model="demo", api=api, stream=stream)
    async with worker_factory(settings=settings):
        handle = await start(client, task_queue, "What's the weather in Tokyo and Paris? Which is warmer?")
        result = await handle.result()
        messages = await transcript(handle)
    assert "Tokyo" in result.output and "Paris" in result.output and "71.6" in result.output
    assert result.turns == 3 and result.agent == "demo"
    assert result.usage.requests == 3 and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    first = messages[1]
    assert isinstance(first, t.AssistantMessage)
    asked = [json.loads(c.arguments)["city"] for c in first.tool_calls]
    assert asked == ["Tokyo", "Paris"]
    # results are appended in the order the model asked for them
    assert [json.loads(m.content)["city"] for m in messages[2:4]] == ["Tokyo", "Paris"]
    path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    assert [(r["path"], r["body"].get("stream", False)) for r in llm.requests()] == [(path, stream)] * 3


async def test_parallel_tool_calls_are_scheduled_together(client, task_queue, worker_factory, llm, counter_file):
    three = calls(*(("record", {"label": f"city-{i}"}) for i in range(3)))
    model = script(llm, three, {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)
        await handle.result()
    events = (await handle.fetch_history()).events
    kinds = [e.event_type for e in events]
    scheduled = [
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == t.TOOL_CALL_ACTIVITY
    ]
    first_three = scheduled[:3]
    # three tool activities scheduled by one workflow task, before any of them completed
    assert first_three == list(range(first_three[0], first_three[0] + 3))
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED not in kinds[first_three[0] : first_three[2]]
    summaries = [events[i].user_metadata.summary.data.decode() for i in first_three]
    assert all("record(label=city-" in s for s in summaries), summaries


async def test_every_activity_has_a_readable_summary(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Tokyo?")
        await handle.result()
    events = (await handle.fetch_history()).events
    kinds = (EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_MARKER_RECORDED)
    summaries = [  # decoded as the Web UI would, through the data converter (and any codec)
        (await client.data_converter.decode([e.user_metadata.summary], [str]))[0]
        for e in events
        if e.event_type in kinds and e.HasField("user_metadata")
    ]
    assert summaries[0] == "resolve agent demo (local)"  # the run's own worker serves the agent
    # the worker's LLM_MODEL, pinned at the start; the demo's lookups may come back with the reply
    assert "turn 1 · model demo · 1 message · local tools with the reply" in summaries
    assert not any("tool:" in s for s in summaries)  # and they did: no activity of their own


async def test_a_cheap_call_that_fails_with_the_reply_runs_as_a_local_activity(
    client, task_queue, worker_factory, llm, counter_file
):
    """The call's one try with the reply fails (its backend is busy): the turn runs it as a local
    activity in the task that handles the reply, with its own retries and summary."""
    model = script(llm, calls(("shaky", {"label": "x"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="noter", model=model)
        assert (await handle.result()).output == "done"
        messages = await transcript(handle)
    (answer,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert answer.content == "noted x on try 2" and not answer.is_error
    assert counter_file.read_text().splitlines() == [f"x {handle.id}:{answer.call_id}"] * 2
    events = (await handle.fetch_history()).events
    summaries = [
        (await client.data_converter.decode([e.user_metadata.summary], [str]))[0]
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and e.HasField("user_metadata")
    ]
    assert summaries == ["resolve agent noter (local)", "turn 1 · tool: shaky(label=x) (local)"]
    await replay(handle)


async def test_a_run_starts_in_one_workflow_task_and_reads_no_context_by_query(
    client, task_queue, worker_factory, llm, monkeypatch
):
    """The run's own worker serves the agent: it resolves it as a local activity and schedules
    the first model call in the same workflow task, and every model call, the first too, finds
    its context in the worker's cache instead of querying the workflow."""
    queried = context_queries(monkeypatch)
    async with worker_factory():
        handle = await start(
            client,
            task_queue,
            "go",
            agent="quick",
            model=script(llm, calls(("quick_add", {"a": 1, "b": 1})), {"content": "2"}),
        )
        assert (await handle.result()).output == "2"
    assert queried == []
    head = (await events_per_turn(handle, start=True))[0]  # up to the first model call
    assert head.count("WORKFLOW_TASK_COMPLETED") == 1 and "ACTIVITY_TASK_SCHEDULED" not in head, head
    await replay(handle)


async def test_max_turns_fails_clearly_and_keeps_the_transcript(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="looper", model="loop:50:10", max_turns=3)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        cause = caught.value.cause
        assert isinstance(cause, ApplicationError)
        assert cause.type == "MaxTurnsExceeded" and cause.non_retryable
        assert "max_turns (3) exceeded" in cause.message
        messages = await transcript(handle)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    # three model turns, two answered by tools, the third asked for more
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert status.phase == "failed" and status.turn == 3


async def test_tool_errors_go_back_to_the_model(client, task_queue, worker_factory, llm):
    model = script(
        llm,
        calls(
            ("launch_rocket", {}),
            ("add", "{not json"),
            ("add", {"a": "three", "b": 1}),
            ("explode", {"message": "kaboom"}),
            ("add", {"a": 2, "b": 3}),
        ),
        {"content": "recovered"},
    )
    async with worker_factory():
        handle = await start(client, task_queue, "try everything", agent="scripted", model=model)
        result = await handle.result()
        results = [m for m in await transcript(handle) if isinstance(m, t.ToolMessage)]
    assert result.output == "recovered"
    assert [m.is_error for m in results] == [True, True, True, True, False]
    assert "unknown tool 'launch_rocket'" in results[0].content
    assert "invalid JSON" in results[1].content
    assert "a:" in results[2].content  # names the field that failed validation
    assert "ValueError: kaboom" in results[3].content
    assert results[4].content == "5"
    # the model saw the errors in its next request
    last = llm.requests()[-1]["body"]["messages"]
    assert sum(1 for m in last if m["role"] == "tool") == 5


async def test_infrastructure_failures_retry_then_reach_the_model(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("flaky", {}), ("always_down", {})), {"content": "ok"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)
        await handle.result()
        flaky, down = [m for m in await transcript(handle) if isinstance(m, t.ToolMessage)]
    assert not flaky.is_error and flaky.content == "worked on attempt 2"
    assert down.is_error and "failed after 2 attempt(s)" in down.content


async def test_each_tool_call_gets_a_stable_idempotency_key(client, task_queue, worker_factory, llm, counter_file):
    model = script(llm, calls(("record", {"label": "a"}), ("record", {"label": "b"})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="scripted", model=model)
        await handle.result()
    lines = counter_file.read_text().split()
    assert sorted(lines[::2]) == ["a", "b"]
    # the run's own ids (turn 1, calls 0 and 1), whatever the provider called them
    assert sorted(lines[1::2]) == [f"{handle.id}:call_1_0", f"{handle.id}:call_1_1"]


async def test_rate_limit_with_retry_after_is_retried(client, task_queue, worker_factory, llm):
    llm.add_faults([{"kind": "status", "status": 429, "retry_after": 1, "code": "rate_limit_exceeded", "count": 2}])
    async with worker_factory():
        handle = await start(client, task_queue, "hello", agent="scripted", model="echo")
        result = await handle.result()
    assert result.output == "echo: hello"
    assert await activity_attempts(handle, t.MODEL_CALL_ACTIVITY) == [3]


@pytest.mark.parametrize(
    "fault, kind, text",
    [
        (
            {"kind": "status", "status": 401, "message": "Incorrect API key provided"},
            "ModelHTTP401",
            "Incorrect API key",
        ),
        (
            {"kind": "status", "status": 429, "code": "insufficient_quota", "message": "quota gone"},
            "ModelQuotaExceeded",
            "quota gone",
        ),
    ],
)
async def test_non_retryable_model_errors_fail_the_run_at_once(
    client, task_queue, worker_factory, llm, fault, kind, text
):
    llm.add_faults([fault])
    async with worker_factory():
        handle = await start(client, task_queue, "hello", agent="scripted", model="echo")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == kind and text in cause.message
    assert len(llm.requests()) == 1


async def test_an_agent_no_worker_serves_fails_clearly_within_its_wait(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "hi", agent="nobody", agent_wait_seconds=2)
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), timeout=30)
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "UnknownAgent"
    assert f"no worker serves agent 'nobody': nothing polled task queue {task_queue}@nobody for 2s" in cause.message


async def test_a_run_cancelled_while_its_agent_is_resolved_ends_cancelled(client, task_queue, worker_factory):
    """A cancel that reaches a run while its agent's resolve waits on the agent's queue (routed:
    no worker here serves it) ends the run cancelled (2.0.5, `cancel-in-resolve-2.0.5`), where it
    failed with `ResolveAgentFailed: Cancelled`; its history records the patch's marker, replays,
    and is the patch's checked-in history."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.exceptions import CancelledError

    from durable_agent_runner.client import AgentClient
    from durable_agent_runner.workflows.patches import CANCEL_RESOLVE_PATCH
    from tests.helpers import marker_ids

    async with worker_factory():
        handle = await start(client, task_queue, "hi", agent="nobody", agent_wait_seconds=60)
        async with asyncio.timeout(30):  # the routed resolve is scheduled on the agent's queue, and waits
            while not (await handle.describe()).raw_description.pending_activities:
                await asyncio.sleep(0.1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), timeout=30)
        info = await AgentClient(client, task_queue=task_queue).get(handle.id).status()
        history = await handle.fetch_history()
        await replay(handle)
    assert isinstance(caught.value.cause, CancelledError)
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert info.status == "cancelled" and info.error is not None and info.error.type == "CancelledError", info
    assert CANCEL_RESOLVE_PATCH in marker_ids(history)
    if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
        (Path(__file__).parent / "histories" / "cancel_resolve_2_0_5.json").write_text(history.to_json())


async def test_status_names_the_agent_a_run_was_started_for_when_it_failed_before_resolving_it(
    client, task_queue, worker_factory
):
    """A run that never resolved its agent has none in its state: status names the one it was
    started for (its AgentName, as the client and a schedule set it), where it said `agent: ?`."""
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from durable_agent_runner.client import AgentClient

    async with worker_factory():
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="hi", agent="nobody", agent_wait_seconds=2),
            id=f"test-{uuid.uuid4().hex[:12]}",
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(t.SA_AGENT, "nobody")]),
        )
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), timeout=30)
        info = await AgentClient(client, task_queue=task_queue).get(handle.id).status()
    assert (info.status, info.agent) == ("failed", "nobody")


async def test_the_api_key_never_enters_history(client, task_queue, worker_factory, llm):
    secret = f"sk-test-{uuid.uuid4().hex}"
    settings = LLMSettings(base_url=llm.base_url, model="demo", api_key=secret)
    async with worker_factory(settings=settings):
        handle = await start(client, task_queue, "Weather in Tokyo?")
        await handle.result()
    history = (await handle.fetch_history()).to_json()
    assert secret not in history
    assert all(
        r["headers"].get("authorization") == f"Bearer {secret}"
        for r in llm.requests()
        if r["path"].endswith("/completions")
    )


async def test_the_agent_is_frozen_into_history_at_start(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Tokyo?")
        await handle.result()
    events = (await handle.fetch_history()).events
    first = next(e for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and local_result(e))
    assert local_result(first) == (t.RESOLVE_AGENT_ACTIVITY, first.marker_recorded_event_attributes.details["result"])
    spec = t.AgentSpec.model_validate_json(first.marker_recorded_event_attributes.details["result"].payloads[0].data)
    assert spec.name == "demo" and "concise weather assistant" in spec.instructions
    assert [s.name for s in spec.tools] == ["get_weather", "get_forecast", "convert_temperature", "send_report"]
    assert spec.tools[-1].approval == "always"
    assert spec.tools[0].parameters["required"] == ["city"]


async def test_history_per_turn_stays_flat(client, task_queue, worker_factory, llm):
    """With sizable messages, turn 30 adds at most 1.5x the bytes turn 3 adds: each message
    enters history once, not once per turn."""
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="looper", model="loop:32:4000")
        result = await handle.result()
    assert result.turns == 32
    per_turn = await bytes_per_turn(handle)
    assert per_turn[2] > 8000  # the messages really are sizable: 4 KB out, 4 KB back
    assert per_turn[29] <= 1.5 * per_turn[2], per_turn
    await replay(handle)


async def test_search_attributes_are_written_at_most_once_a_turn_and_true_at_the_end(
    client, task_queue, worker_factory, llm
):
    """Counters go out with a phase a person filters on, and otherwise at most every
    COUNTERS_EVERY_SECONDS by when the model's replies arrived: a quick run writes them on its
    first turn and at its end, and a turn in between is two activities and two workflow tasks,
    12 events at most."""
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="looper", model="loop:6:10")
        result = await handle.result()
    turns = await events_per_turn(handle, start=True)  # turns[0]: the start, up to the first model call
    upserts = [turn.count("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES") for turn in turns]
    assert upserts[0] == 1 and upserts[-1] == 1 and all(n <= 1 for n in upserts), upserts
    assert sum(upserts[1:-1]) < len(turns) - 2, upserts  # the run took well under 5 s a turn
    assert all(len(turn) <= 12 for turn in turns[1:-1] if "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" not in turn), turns
    found = (await handle.describe()).typed_search_attributes
    assert found.get(t.SA_PHASE) == "completed"
    assert found.get(t.SA_TURN) == result.turns == 6
    assert found.get(t.SA_TOKENS) == result.usage.total_tokens > 0
    await replay(handle)


async def test_a_finished_run_replays_under_the_current_code(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Tokyo and Paris?")
        await handle.result()
    await replay(handle)


async def test_checked_in_histories_still_replay():
    """Histories recorded by earlier code must replay: a change that breaks them breaks runs in flight.
    Those of 1.0 were recorded with no patch marker: from 1.0 on, a change to workflow code is a
    patch (`workflow.patched`) with a history of its own checked in beside them."""
    import gzip
    from collections.abc import AsyncIterator

    from temporalio.client import WorkflowHistory

    folder = Path(__file__).parent / "histories"
    files = sorted(folder.glob("*.json"))
    assert files, "no recorded histories in tests/histories"
    recorded = {path.stem: path.read_text() for path in files}
    # the long ones, gzipped (eval_drain_1_4_3: 1,172 events)
    recorded |= {
        path.name.removesuffix(".json.gz"): gzip.decompress(path.read_bytes()).decode()
        for path in folder.glob("*.json.gz")
    }
    histories = [WorkflowHistory.from_json(name, text) for name, text in recorded.items()]

    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in histories:
            yield history

    # One replayer worker for them all: less than half the time of one per history.
    done = await strict_replayer().replay_workflows(each(), raise_on_replay_failure=False)
    names = {history.run_id: history.workflow_id for history in histories}
    failed = {names.get(run, run): repr(err) for run, err in done.replay_failures.items()}
    for history in histories:  # the first that failed, again alone: its error shows the events around it
        if history.run_id in done.replay_failures:
            await replay_history(history)
    assert not failed, failed
    for name in (
        "weather_1_0",
        "approval_1_0",
        "breakpoint_1_0",
        "support_team_1_0",
        "session_1_0",
        "child_failed_1_0",
    ):
        assert "core_patch" not in recorded[name], f"{name}: 1.0 histories carry no patch marker"
    # a run starts in one workflow task: the agent resolved locally, the first model call scheduled
    events = WorkflowHistory.from_json("weather_1_0", recorded["weather_1_0"]).events
    first_call = next(i for i, e in enumerate(events) if e.HasField("activity_task_scheduled_event_attributes"))
    head = events[:first_call]
    assert sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in head) == 1
    assert [found[0] for e in head if (found := local_result(e))] == [t.RESOLVE_AGENT_ACTIVITY]
    # the demo's cheap tools run with the model's replies: no marker, no activity of their own
    assert [found[0] for e in events if (found := local_result(e))] == [t.RESOLVE_AGENT_ACTIVITY]
    assert t.TOOL_CALL_ACTIVITY not in recorded["weather_1_0"]
    summaries = [e.user_metadata.summary.data.decode() for e in events if e.HasField("user_metadata")]
    assert sum(s.endswith('local tools with the reply"') for s in summaries) == 3
    # an approval checked by the hook and decided by update, then a routed tool activity
    approval = recorded["approval_1_0"]
    assert t.HOOK_ACTIVITY in approval and t.APPROVAL_UPDATE in approval and t.TOOL_CALL_ACTIVITY in approval
    # a handoff, an agent run as a child (recorded beside it), hooks
    team = recorded["support_team_1_0"]
    assert "startChildWorkflowExecutionInitiatedEventAttributes" in team and t.HOOK_ACTIVITY in team
    assert "support_team_1_0.call_2_0" in recorded
    # a session: messages by update, answers, a compaction by the model, an end
    conversation = recorded["session_1_0"]
    assert t.SESSION_SEND_UPDATE in conversation and t.SESSION_END_UPDATE in conversation
    assert t.COMPACT_ACTIVITY in conversation
    # a pause with edits, then a resume; and a fork of that run, started from its carried state
    debugged = recorded["breakpoint_1_0"]
    assert debugged.count(t.EDIT_UPDATE) >= 2 and t.RESUME_UPDATE in debugged
    # a child that failed (its failure carries its usage) and one that was cancelled (it signals it)
    assert "childWorkflowExecutionFailedEventAttributes" in recorded["child_failed_1_0"]
    assert "childWorkflowExecutionCanceledEventAttributes" in recorded["child_cancelled_1_0"]
    assert t.CHILD_USAGE_SIGNAL in recorded["child_cancelled_1_0"]
    assert t.CHILD_USAGE_SIGNAL in recorded["child_cancelled_1_0.call_1_0"]
    # 1.1: two calls of a `once` tool in doubt (their one attempt timed out), behind the patch
    # in-doubt-1.1: one resolved with a rerun (its own activity), one with a result
    doubted = recorded["in_doubt_1_1"]
    markers = [
        e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
        for e in WorkflowHistory.from_json("in_doubt_1_1", doubted).events
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert [json.loads(m)["id"] for m in markers] == ["in-doubt-1.1"]
    assert doubted.count(t.RESOLVE_UPDATE) == 2 and "-rerun-1" in doubted  # the rerun, an activity of its own
    # 1.2: a lone routed tool's activity makes the next model call (call-ahead-1.2): after the
    # first, every model call rides with a tool's result, and a turn is six events
    ahead = WorkflowHistory.from_json("call_ahead_1_2", recorded["call_ahead_1_2"]).events
    patches = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in ahead
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert patches == ["call-ahead-1.2"]
    kinds = [e.activity_task_scheduled_event_attributes.activity_type.name for e in ahead if starts_turn(e)]
    assert kinds == [t.MODEL_CALL_ACTIVITY] + [t.TOOL_CALL_ACTIVITY] * 3
    # 1.4.8: Temporal suggested continue-as-new by the first reply (the server told to, at 8
    # events): the lone routed call's activity makes no model call (`then` is null), which the run
    # would drop, and the run continues as new (no-ahead-before-continue-1.4.8)
    continued = WorkflowHistory.from_json("ahead_continue_1_4_8", recorded["ahead_continue_1_4_8"]).events
    assert [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in continued
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ] == ["no-ahead-before-continue-1.4.8"]
    (tool_input,) = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in continued
        if e.activity_task_scheduled_event_attributes.activity_type.name == t.TOOL_CALL_ACTIVITY
    ]
    assert json.loads(tool_input)["then"] is None
    assert continued[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    fork = WorkflowHistory.from_json("breakpoint_1_0.fork", recorded["breakpoint_1_0.fork"])
    start = fork.events[0].workflow_execution_started_event_attributes.input.payloads
    (fork_input,) = await DATA_CONVERTER.decode(start, [t.RunInput])
    assert fork_input.carry is not None and fork_input.carry.forked_from == t.ForkLink(run_id="breakpoint_1_0", turn=2)


A_TURN = [  # a turn whose calls ran with the model's reply: the model activity, one workflow task
    "ACTIVITY_TASK_SCHEDULED",
    "ACTIVITY_TASK_STARTED",
    "ACTIVITY_TASK_COMPLETED",
    "WORKFLOW_TASK_SCHEDULED",
    "WORKFLOW_TASK_STARTED",
    "WORKFLOW_TASK_COMPLETED",
]


def test_a_retried_workflow_task_is_not_counted_as_the_runs() -> None:
    """session_1_0 was recorded with a first workflow task that timed out (start to close)."""
    from temporalio.client import WorkflowHistory

    path = Path(__file__).parent / "histories" / "session_1_0.json"
    events = [
        EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        for e in WorkflowHistory.from_json("session_1_0", path.read_text()).events
    ]
    head = events[: events.index("WORKFLOW_TASK_COMPLETED") + 1]
    assert head == ["WORKFLOW_EXECUTION_STARTED", *A_TURN[3:5], "WORKFLOW_TASK_TIMED_OUT", *A_TURN[3:]]
    assert without_retried_tasks(head) == ["WORKFLOW_EXECUTION_STARTED", *A_TURN[3:]]
    # a turn whose task timed out (the flake's first turn: 9 events) or failed, or whose sticky
    # queue was not polled in time, is the run's 6
    for retried in (
        [*A_TURN[:5], "WORKFLOW_TASK_TIMED_OUT", *A_TURN[3:]],
        [*A_TURN[:5], "WORKFLOW_TASK_FAILED", *A_TURN[3:]],
        [*A_TURN[:4], "WORKFLOW_TASK_TIMED_OUT", *A_TURN[3:]],
    ):
        assert without_retried_tasks(retried) == A_TURN, retried


def counters_written(received: list[datetime]) -> list[bool]:
    """After which model replies the run writes its counters (turn, tokens, …) in an upsert, by
    workflows/steps.py's rule: when the reply clock (the replies' `received_at`, from the first
    reply on) has moved COUNTERS_EVERY_SECONDS since the last write."""
    written, last = [], received[0]
    for at in received:
        written.append((at - last).total_seconds() >= COUNTERS_EVERY_SECONDS)
        last = at if written[-1] else last
    return written


@pytest.mark.parametrize("slow", [False, True], ids=["", "a slow second reply"])
async def test_cheap_calls_come_back_with_the_models_reply(client, task_queue, worker_factory, llm, counter_file, slow):
    """A cheap tool's calls run in the model activity, once its reply is whole: a turn of them
    is the model activity and one workflow task, 6 events of the run's, no marker; each call ran
    once, with the idempotency key the turn gives it. A tool with side effects stays a routed
    activity. A reply that comes COUNTERS_EVERY_SECONDS after the last counters' write adds
    their upsert to its turn (`slow`: the second reply, 6 s late, as on a loaded machine)."""
    model = script(
        llm,
        calls(("note", {"label": "a"}), ("note", {"label": "b"})),  # two at once
        *[calls(("quick_add", {"a": i, "b": 1})) for i in range(2)],
        calls(("record", {"label": "side"})),
        {"content": "done"},
    )
    if slow:  # faults are taken in order by the calls they match: the first call none, the second 6 s
        llm.add_faults([{"kind": "delay", "ms": 0, "model": model}, {"kind": "delay", "ms": 6_000, "model": model}])
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="noter", model=model)
        result = await handle.result()
        messages = await transcript(handle)
    assert result.output == "done"
    tool_messages = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert [m.content for m in tool_messages] == ["noted a", "noted b", "1", "2", "recorded side"]
    lines = sorted(line for line in counter_file.read_text().splitlines() if line)
    ids = {m.content.split()[-1]: m.call_id for m in tool_messages[:2]}
    assert lines == [
        f"a {handle.id}:{ids['a']}",
        f"b {handle.id}:{ids['b']}",
        f"side {handle.id}:{tool_messages[4].call_id}",
    ]
    history = await handle.fetch_history()
    model_calls = {
        e.event_id
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == t.MODEL_CALL_ACTIVITY
    }
    replies = [
        await DATA_CONVERTER.decode(e.activity_task_completed_event_attributes.result.payloads, [t.ModelReply])
        for e in history.events
        if e.activity_task_completed_event_attributes.scheduled_event_id in model_calls
    ]
    ran = [[r.output for r in reply.tool_results] for (reply,) in replies]
    assert ran == [["noted a", "noted b"], ["1"], ["2"], []]  # the record call ran on its own
    # Each turn's own events (the server's retried workflow tasks left out): the model activity
    # and one workflow task, and the counters' upsert after the replies whose turn writes them.
    turns = [without_retried_tasks(turn) for turn in await events_per_turn(handle)]
    received = [reply.received_at for (reply,) in replies]
    assert all(received)
    written = counters_written([at for at in received if at is not None])
    assert written[1] or not slow  # the slow run's second reply writes them, 6 s after the first
    upsert = ["UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"]
    assert turns[:3] == [A_TURN + (upsert if due else []) for due in written[:3]], turns  # notes, two additions
    assert not any("MARKER_RECORDED" in turn for turn in turns[:3])
    # record: a routed activity, which makes the last model call itself (machine/requests.py)
    assert len(turns) == 5 and turns[4][:3] == [
        "ACTIVITY_TASK_SCHEDULED",
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
    ], turns
    summaries = [e.user_metadata.summary.data for e in history.events if e.HasField("user_metadata")]
    assert any(b"model " in s and b"local tools with the reply" in s for s in summaries)
    await replay(handle)


async def test_a_cheap_call_that_outlasts_the_model_calls_bound_runs_on_its_own(
    client, task_queue, worker_factory, llm, counter_file, monkeypatch
):
    """A model call spends at most WITH_REPLY_SECONDS on the calls it runs with its reply: one
    still running then is abandoned (it noted nothing), and the turn runs it as a local activity."""
    from durable_agent_runner.activities import model as model_activity

    monkeypatch.setattr(model_activity, "WITH_REPLY_SECONDS", 0.3)
    model = script(llm, calls(("slow_note", {"label": "x", "seconds": 1.0})), {"content": "done"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="noter", model=model)
        assert (await handle.result()).output == "done"
        messages = await transcript(handle)
    (answer,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert answer.content == "recorded x after 1.0s"
    assert counter_file.read_text().splitlines() == [f"x {handle.id}:{answer.call_id}"]  # once, on its own
    history = await handle.fetch_history()
    assert [found[0] for e in history.events if (found := local_result(e))] == [
        t.RESOLVE_AGENT_ACTIVITY,
        t.TOOL_CALL_ACTIVITY,
    ]
    await replay(handle)


async def test_a_local_tool_on_a_worker_without_the_agent_runs_routed(
    client, task_queue, worker_factory, llm, registry
):
    """The workflow's worker does not hold the run's version of the agent: the local call says
    so, and the run makes it an ordinary activity on that version's own queue."""
    from temporalio.worker import Worker

    from durable_agent_runner.activities.tool_activities import ToolActivities

    model = script(llm, calls(("quick_add", {"a": 2, "b": 2})), {"content": "four"})
    frozen = registry.agent("quick").spec().model_copy(update={"version": "elsewhere", "model": model})
    version_queue = t.agent_task_queue(task_queue, "quick", "elsewhere")
    elsewhere = Worker(client, task_queue=version_queue, activities=[ToolActivities(registry).call_tool])
    async with worker_factory(), elsewhere:
        handle = await start(client, task_queue, "go", agent="quick", frozen=frozen)
        result = await handle.result()
        messages = await transcript(handle)
    assert result.output == "four"
    assert any(isinstance(m, t.ToolMessage) and m.content == "4" for m in messages)
    history = await handle.fetch_history()
    routed = [
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == t.TOOL_CALL_ACTIVITY
    ]
    assert routed == [version_queue]
    await replay(handle)


async def test_a_local_model_call_needs_no_dispatch_and_no_stream(client, task_queue, worker_factory, llm):
    """An agent that opts in runs its model call as a local activity too: a turn with a local tool
    is a few events in one workflow task; the request is not streamed; a 500 is retried."""
    model = script(llm, *[calls(("quick_add", {"a": i, "b": 1})) for i in range(3)], {"content": "done"})
    llm.add_faults([{"kind": "status", "status": 500, "count": 1}])
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="nimble", model=model)
        result = await handle.result()
    assert result.output == "done" and result.turns == 4
    requests = [r["body"] for r in llm.requests() if r["body"].get("model") == model]
    assert len(requests) == 5 and not any(body.get("stream") for body in requests)  # one retried after the 500
    turns = await events_per_turn(handle)
    assert turns == [], "no model-call activity is ever scheduled"
    history = await handle.fetch_history()
    kinds = [e.event_type for e in history.events]
    # 2.0's marker, the resolve and 4 model calls; the tool calls came back with the replies
    assert kinds.count(EventType.EVENT_TYPE_MARKER_RECORDED) == 6
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds  # the agent was resolved locally too
    await replay(handle)
