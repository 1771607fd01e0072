"""Forks that reuse what was done (issue 27): a fork reuses the recorded results of the turns
before its fork point (no tool, no child run again); `--live-tools` runs them again first;
`client.py diff` shows where a fork and its origin diverge."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from durable_agent_runner import Agent, Registry, ToolContext, tool
from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.cli.debug import cmd_fork
from durable_agent_runner.client import AgentClient
from durable_agent_runner.client.export import export_run
from durable_agent_runner.machine import rerun
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, replay_history, script, start, transcript
from tests.test_agents import requests_for
from tests.test_approvals import decide, pending, update
from tests.test_client import cli  # noqa: F401  (the fixture)

E = EventType


@tool
def tally(label: str, ctx: ToolContext) -> str:
    """Record a side effect and say how many times it has happened.

    Args:
        label: What to record.
    """
    path = Path(os.environ["SIDE_EFFECTS_FILE"])
    with path.open("a", encoding="utf-8") as f:
        f.write(f"{label} {ctx.idempotency_key}\n")
    return f"{label} #{len(path.read_text().splitlines())}"


def team(llm: Any) -> tuple[Registry, str]:
    """`lead` tallies at turn 1, asks `scholar` (a child run) at turn 2, answers at turn 3."""
    scholar = Agent(name="scholar", model=script(llm, {"content": "Tides follow the moon."}))
    lead_model = script(llm, calls(("tally", {"label": "t1"})), calls(("ask", {"input": "tides"})), {"content": "done"})
    lead = Agent(name="lead", model=lead_model, tools=[tally, scholar.as_tool(name="ask")])
    return Registry(agents=[lead]), lead_model


async def fork(client: Client, task_queue: str, run_id: str, at: int, **flags: Any) -> WorkflowHandle[Any, Any]:
    new_id = f"{run_id}-fork-{uuid.uuid4().hex[:6]}"
    args = argparse.Namespace(
        run_id=run_id, at_turn=at, id=new_id, json=True, task_queue=task_queue, **{"prompt": None, **flags}
    )
    assert await cmd_fork(AgentClient(client), args) == 0
    return client.get_workflow_handle(new_id, result_type=t.RunResult)


async def before_first_model_call(handle: WorkflowHandle[Any, Any]) -> tuple[list[str], list[str], int]:
    """The activities scheduled and child runs started before the run's first model call, and
    how many model calls it made in all."""
    activities: list[str] = []
    children: list[str] = []
    model_calls = 0
    for e in (await handle.fetch_history()).events:
        if e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            model_calls += name == t.MODEL_CALL_ACTIVITY
            if not model_calls:
                activities.append(name)
        elif e.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED and not model_calls:
            children.append(e.start_child_workflow_execution_initiated_event_attributes.workflow_id)
    return activities, children, model_calls


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def test_a_fork_reuses_the_tool_calls_and_child_runs_before_its_fork_point(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path
) -> None:
    registry, model = team(llm)
    async with worker_factory(registry=registry):
        origin = await start(client, task_queue, "Explain tides", agent="lead")
        assert (await origin.result()).output == "done"
        assert len(counter_file.read_text().splitlines()) == 1
        forked = await fork(client, task_queue, origin.id, 3)
        result = await forked.result()
        messages = await transcript(forked)
    assert result.output == "done" and result.turns == 3
    activities, children, model_calls = await before_first_model_call(forked)
    assert t.TOOL_CALL_ACTIVITY not in activities and children == []  # nothing ran before model call 3
    assert model_calls == 1
    assert len(counter_file.read_text().splitlines()) == 1  # the tool did not run again
    history = await forked.fetch_history()
    assert not any(e.event_type == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED for e in history.events)
    # the fork's one model call read the recorded results
    assert tool_results(requests_for(llm, model)[-1]) == ["t1 #1", "Tides follow the moon."]
    assert [m.content for m in messages if isinstance(m, t.ToolMessage)] == ["t1 #1", "Tides follow the moon."]
    assert "scholar" not in result.usage_by_agent  # no child ran in the fork
    await replay(forked)


async def test_live_tools_runs_the_recorded_calls_again_then_goes_on_live(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path, tmp_path: Path
) -> None:
    registry, model = team(llm)
    async with worker_factory(registry=registry):
        origin = await start(client, task_queue, "Explain tides", agent="lead")
        await origin.result()
        calls_before = len(requests_for(llm, model))
        forked = await fork(client, task_queue, origin.id, 3, live_tools=True)
        result = await forked.result()
        status: t.RunStatus = await forked.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert result.output == "done" and result.turns == 3
    effects = counter_file.read_text().splitlines()
    assert [line.split()[0] for line in effects] == ["t1", "t1"]  # it ran again, under a new key
    assert effects[0].split()[1] != effects[1].split()[1]
    activities, children, model_calls = await before_first_model_call(forked)
    assert activities.count(t.TOOL_CALL_ACTIVITY) == 1
    assert len(children) == 1 and children[0].startswith(f"{forked.id}.")  # a new child run of the fork's own
    assert model_calls == 1 and len(requests_for(llm, model)) == calls_before + 1  # no model call for turns 1-2
    assert tool_results(requests_for(llm, model)[-1]) == ["t1 #2", "Tides follow the moon."]  # the fresh results
    assert result.usage_by_agent["scholar"].requests == 1  # the child's usage counts in the fork
    assert status.forked_from is not None and status.forked_from.live_tools
    exported = await export_run(client, forked.id, CaptureStore(tmp_path))  # the rerun, turn by turn
    results = [
        (line["turn"], line["output"], line.get("child_run_id")) for line in exported if line["type"] == "tool_result"
    ]
    # the tool ran again in turn 1's name; the child run's answer is there too (asked before any model call)
    assert results == [(1, "t1 #2", None), (None, "Tides follow the moon.", children[0])]
    assert [line["turn"] for line in exported if line["type"] == "model_call"] == [3]
    assert exported[0]["forked_from"] == status.forked_from.model_dump(mode="json")  # as status says it
    await replay(forked)


async def test_live_tools_asks_again_for_a_call_that_needs_approval_and_skips_a_rejected_one(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path
) -> None:
    model = script(
        llm, calls(("send", {"label": "x"})), calls(("transfer", {"amount": 500, "to": "b"})), {"content": "ok"}
    )
    async with worker_factory():
        origin = await start(client, task_queue, "go", agent="guarded", model=model)
        (first,) = await pending(origin)
        await update(origin, decide(first.call_id, by="alice"))
        (second,) = await pending(origin)
        await update(origin, decide(second.call_id, approve=False, by="alice", reason="too much"))
        await origin.result()
        asked = len(requests_for(llm, model))
        forked = await fork(client, task_queue, origin.id, 3, live_tools=True)
        (again,) = await pending(forked)  # the approved call asks a person again, before any model call
        assert again.tool == "send" and len(requests_for(llm, model)) == asked
        await update(forked, decide(again.call_id, by="bob"))
        assert (await forked.result()).output == "ok"
    effects = [line.split()[0] for line in counter_file.read_text().splitlines()]
    assert effects == ["send:x", "send:x"]  # the rejected transfer did not run, in either run
    assert len(requests_for(llm, model)) == asked + 1


async def test_diff_shows_the_turn_a_fork_changed(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, cli: Any
) -> None:
    model = script(llm, calls(("add", {"a": 1, "b": 2})), calls(("add", {"a": 3, "b": 4})), {"content": "seven"})
    async with worker_factory():
        origin = await start(client, task_queue, "add things", agent="scripted", model=model)
        await origin.result()
        forked = await fork(client, task_queue, origin.id, 3, prompt="now in French")
        await forked.result()
        # A diff reads both runs by query, which the worker answers by replaying each: on a loaded
        # machine that can take longer than the default 10 s. What the test reads is the diff.
        read = ("--wait", "60")
        text = await cli("diff", origin.id, forked.id, *read, timeout=90)
        as_json = await cli("diff", origin.id, forked.id, "--json", *read, timeout=90)
        same = await cli("diff", origin.id, origin.id, *read, timeout=90)
        unknown = await cli("diff", origin.id, "no-such-run")
    assert text.code == 0, text.err
    assert as_json.code == 0 and same.code == 0, (as_json.out, same.err)  # a failed read prints {"error": ...}
    lines = text.out.splitlines()
    assert "first difference: turn 3" in lines and "same through turn 2 (4 messages)" in lines
    b_side = lines[lines.index("B from turn 3:") :]
    assert any("now in French" in line for line in b_side)  # the edited turn, first
    assert f"fork of {origin.id} before model call 3" in text.out
    diff = json.loads(as_json.out)
    assert diff["first_difference"] == 3 and diff["same_turns"] == 2
    (turn3,) = diff["b"]["from_difference"]
    assert turn3["turn"] == 3 and [m["role"] for m in turn3["messages"]] == ["tool", "user", "assistant"]
    assert turn3["messages"][1]["content"] == "now in French"
    assert "same: 3 turn(s)" in same.out
    assert unknown.code == 2 and unknown.err.splitlines() == ["client.py: error: no run with id 'no-such-run'"]


@pytest.mark.pure
def test_what_a_live_fork_runs_again() -> None:
    """Tools and child runs that ran; not a handoff, a rejected call, a dropped call, or a call
    answered without running. Each as the agent in charge at its turn."""
    helper = Agent(name="helper", instructions="h", tools=[tally])
    lead = Agent(name="lead", instructions="l", tools=[tally, helper.as_tool(name="ask")], handoffs=[helper])
    spec = lead.spec().model_copy(update={"team": [helper.spec()]})
    s = RunState()
    s.agent = spec
    at = "2026-01-01T00:00:00Z"
    rejected = t.ApprovalRecord(call_id="c3", tool="tally", approved=False, by="al", at=at)
    s.messages = [
        t.UserMessage(content="go"),
        t.AssistantMessage(tool_calls=[t.ToolCall(call_id="c1", name="tally", arguments='{"label": "a"}')]),
        t.ToolMessage(call_id="c1", name="tally", content="a #1"),
        t.AssistantMessage(
            tool_calls=[
                t.ToolCall(call_id="c2", name="ask", arguments='{"input": "x"}'),
                t.ToolCall(call_id="c3", name="tally", arguments='{"label": "b"}'),
                t.ToolCall(call_id="c4", name="tally", arguments='{"label": "c"}'),
                t.ToolCall(call_id="c5", name="nope"),
                t.ToolCall(call_id="c6", name="transfer_to_helper"),
            ]
        ),
        t.ToolMessage(call_id="c2", name="ask", content="x!"),
        t.ToolMessage(call_id="c3", name="tally", content="rejected", is_error=True, approval=rejected),
        t.ToolMessage(call_id="c4", name="tally", content="error: bob dropped this call before it ran", is_error=True),
        t.ToolMessage(call_id="c5", name="nope", content="error: unknown tool", is_error=True),
        t.ToolMessage(call_id="c6", name="transfer_to_helper", content='{"assistant": "helper"}'),
        t.AssistantMessage(tool_calls=[t.ToolCall(call_id="c7", name="tally", arguments='{"label": "d"}')]),
        t.ToolMessage(call_id="c7", name="tally", content="d #2"),
    ]
    s.handoffs = [t.HandoffRecord(from_agent="lead", to_agent="helper", turn=2, at=at, call_id="c6")]
    s.turn = 3
    steps = rerun.recorded(s)
    got = [(step.turn, step.agent.name, [(p.call.call_id, p.action) for p in step.plan.calls]) for step in steps]
    assert got == [(1, "lead", [("c1", "tool")]), (2, "lead", [("c2", "child")]), (3, "helper", [("c7", "tool")])]
    again: rerun.Reruns | None = rerun.Reruns.of(s)
    turns = []
    for _ in steps:
        assert again is not None
        step, again = again.next(s)
        turns.append(step is not None and s.turn)
    assert turns == [1, 2, 3] and again is not None
    assert again.next(s) == (None, None) and s.turn == 3  # back to the fork point
    fresh = {"c1": t.ToolMessage(call_id="c1", name="tally", content="a #9")}
    assert next(m.content for m in rerun.merged(s.messages, fresh) if isinstance(m, t.ToolMessage)) == "a #9"
    # a handoff filter dropped an earlier reply: the replies are numbered back from the fork point
    s.turn = 4
    got = [(step.turn, step.agent.name, [p.call.call_id for p in step.plan.calls]) for step in rerun.recorded(s)]
    assert got == [(2, "lead", ["c1"]), (4, "helper", ["c7"])]  # at turn 3 helper has no `ask`: not run


async def test_the_checked_in_live_tools_fork_replays() -> None:
    """tests/histories/fork_live_tools_1_1.fork.json (tests/record_history.py --fork-at 3
    --live-tools, of examples/support_team): behind the patch marker, the researcher child of
    turn 2 runs again before the fork's one model call; the history replays."""
    from temporalio.client import WorkflowHistory

    path = Path(__file__).parent / "histories" / "fork_live_tools_1_1.fork.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replay_history(history)
    kinds = [EventType.Name(e.event_type) for e in history.events]
    marker = kinds.index("EVENT_TYPE_MARKER_RECORDED")
    child = kinds.index("EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED")
    first_model_call = next(
        i
        for i, e in enumerate(history.events)
        if e.activity_task_scheduled_event_attributes.activity_type.name == t.MODEL_CALL_ACTIVITY
    )
    patch = history.events[marker].marker_recorded_event_attributes.details["patch-data"].payloads[0].data
    assert json.loads(patch)["id"] == t.FORK_LIVE_TOOLS_PATCH and marker < child < first_model_call
    assert kinds.count("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED") == 2  # one model call, its output check


async def test_live_tools_asks_a_person_before_it_runs_a_once_call_again(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path
) -> None:
    """A `once` call a --live-tools fork would run again goes to a person first, as a call in
    doubt does: nothing runs until they decide; `rerun` runs it (under the fork's own key)."""
    model = script(llm, calls(("pay", {"label": "ann"})), {"content": "paid"})
    async with worker_factory(registry=Registry.from_modules(["tests.fixtures.once_agents"])):
        origin = await start(client, task_queue, "pay ann", agent="payer", model=model)
        assert (await origin.result()).output == "paid"
        asked = len(requests_for(llm, model))
        forked = await fork(client, task_queue, origin.id, 2, live_tools=True)
        async with asyncio.timeout(20):
            while not (status := await forked.query(t.STATUS_QUERY, result_type=t.RunStatus)).in_doubt:
                await asyncio.sleep(0.1)
        (doubt,) = status.in_doubt
        assert doubt.tool == "pay" and doubt.fork_of == origin.id and status.phase == "in_doubt"
        assert "a --live-tools fork runs a once call again only when a person says so" in doubt.ended
        await asyncio.sleep(1.0)  # a person's call: nothing runs meanwhile
        assert [line.split()[0] for line in counter_file.read_text().splitlines()] == ["start:pay:ann", "done:pay:ann"]
        assert len(requests_for(llm, model)) == asked
        decision = t.ResolveCall(call_id=doubt.call_id, action="rerun", by="bob")
        await forked.execute_update(t.RESOLVE_UPDATE, decision, result_type=t.ResolveReceipt)
        result = await forked.result()
    assert result.output == "paid" and result.turns == 2
    effects = counter_file.read_text().splitlines()
    assert [line.split()[0] for line in effects].count("done:pay:ann") == 2  # run again once a person said so
    assert effects[1].split()[1] != effects[-1].split()[1]  # under the fork's own idempotency key
    await replay(forked)


@pytest.mark.pure
def test_a_live_forks_once_call_asks_first_unless_a_person_just_approved_it() -> None:
    from durable_agent_runner.machine.calls import PlannedCall, asks_first

    call = t.ToolCall(call_id="c1", name="pay", arguments='{"label": "ann"}')
    again = PlannedCall(call=call, action="tool", again=True)
    assert asks_first(again, "once", approved=False)
    assert not asks_first(again, "once", approved=True)  # a person approved it in this fork
    assert not asks_first(again, "activity", approved=False)  # a tool that may run again
    assert not asks_first(PlannedCall(call=call, action="tool"), "once", approved=False)  # a live call


async def test_the_checked_in_live_fork_of_a_once_call_replays() -> None:
    """tests/histories/fork_once_1_3.fork.json (tests/record_history.py fork_once_1_3 "pay ann"
    --tools tests.fixtures.once_agents --agent payer --script … --fork-at 2 --live-tools
    --fork-resolve rerun): behind its patch marker, the fork's `once` call waits for a person
    (a resolve update) before its tool activity, and only then runs; the history replays."""
    from temporalio.client import WorkflowHistory

    from durable_agent_runner.workflows.patches import FORK_ONCE_PATCH

    path = Path(__file__).parent / "histories" / "fork_once_1_3.fork.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replay_history(history)
    events = history.events
    patches = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in events
        if e.event_type == E.EVENT_TYPE_MARKER_RECORDED
    ]
    assert FORK_ONCE_PATCH in patches
    kinds = [e.event_type for e in events]
    resolved = kinds.index(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert events[resolved].workflow_execution_update_accepted_event_attributes.accepted_request.input.name == (
        t.RESOLVE_UPDATE
    )
    tool = next(
        i
        for i, e in enumerate(events)
        if e.activity_task_scheduled_event_attributes.activity_type.name == t.TOOL_CALL_ACTIVITY
    )
    assert resolved < tool  # asked first, run after


@pytest.mark.pure
def test_a_diff_that_differs_from_the_first_turn_says_nothing_is_the_same() -> None:
    """Before: `same through turn 0 (0 messages)`."""
    from durable_agent_runner.cli.diff import render
    from durable_agent_runner.client.diff import DiffSide, RunDiff

    reply = {"turn": 1, "messages": [{"role": "assistant", "content": "hi"}]}
    side = DiffSide(run_id="a", messages=1, model_calls=1, from_difference=[reply])
    lines = render(RunDiff(a=side, b=side.model_copy(update={"run_id": "b"}), same_turns=0, same_messages=0,
                           first_difference=1)).splitlines()  # fmt: skip
    assert lines[2:4] == ["nothing the same: they differ from their first turn", "first difference: turn 1"]
    same_start = RunDiff(a=side, b=side, same_turns=1, same_messages=2, first_difference=2)
    assert "same through turn 1 (2 messages)" in render(same_start).splitlines()
