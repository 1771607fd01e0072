"""Lifecycle hooks on a real dev server: the exactly-once ones once per event of the run's log,
across a SIGKILLed worker too; the at-least-once ones with the raw request and response, again
for a retried attempt; and hooks that raise or hang break and stall nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from durable_agent_runner import Registry
from durable_agent_runner.cli.watch import events_since
from durable_agent_runner.workflows import types as t
from tests.fixtures.lifecycle_hooks import Hanging, Raising, Recording
from tests.helpers import calls, script, start, through_gaps
from tests.test_durability import kill_and_replace, start_worker_process, tool_call, wait_for

FIXTURE = "tests/fixtures/lifecycle_hooks.py"
KEY = "sk-lifecycle-0123456789abcdef"
# Which exactly-once hook each kind of event calls (besides on_event, which every event calls).
HOOK_OF = {
    "model_started": "on_model_start",
    "model_finished": "on_model_end",
    "tool_started": "on_tool_start",
    "tool_finished": "on_tool_end",
    "approval_requested": "on_approval_requested",
    "approval_decided": "on_approval_decided",
    "handoff": "on_handoff",
    "final": "on_agent_end",
}
EXACTLY_ONCE = {*HOOK_OF.values(), "on_agent_start", "on_event"}


def read(path: Path, run_id: str | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [x for x in lines if run_id is None or x.get("run_id") == run_id]


def of(lines: list[dict[str, Any]], hook: str) -> list[dict[str, Any]]:
    return [x for x in lines if x["hook"] == hook]


async def all_events(client, run_id: str) -> list[t.RunEvent]:
    """The run's events, read through gaps (CI: "Timeout expired" on a loaded machine)."""
    return (await through_gaps(lambda: events_since(client, run_id, 0))).events


async def delivered(client, path: Path, run_id: str, timeout: float = 30.0) -> list[t.RunEvent]:
    """Waits until the feed has called on_event for the run's last event, then a little longer, so
    that an event delivered twice would show; returns the run's events."""
    events = await all_events(client, run_id)

    async def caught_up() -> bool:
        return any(x["seq"] == events[-1].seq for x in of(read(path, run_id), "on_event"))

    await wait_for(caught_up, timeout=timeout)
    await asyncio.sleep(1.5)  # several polls of the feed: nothing more may arrive
    return events


def assert_each_step_once(lines: list[dict[str, Any]], events: list[t.RunEvent]) -> None:
    """on_event once per event, in order, and each kind's own hook once per event of that kind."""
    assert [(x["seq"], x["kind"]) for x in of(lines, "on_event")] == [(e.seq, e.kind) for e in events]
    for kind, hook in HOOK_OF.items():
        assert [x["seq"] for x in of(lines, hook)] == [e.seq for e in events if e.kind == kind], hook


async def approve(handle, call_id: str) -> None:
    decision = t.ApprovalDecision(call_id=call_id, approve=True, by="alice")
    await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)


async def pending(handle, timeout: float = 20.0) -> t.PendingApproval:
    async def waiting() -> bool:
        s = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        return bool(s.pending_approvals)

    await wait_for(waiting, timeout=timeout, every=0.1)
    s = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    return s.pending_approvals[0]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
async def test_each_step_once_and_each_model_call_with_its_raw_request_and_response(
    client, task_queue, worker_factory, llm, settings, counter_file, tmp_path, stream
):
    path = tmp_path / "hooks.jsonl"
    model = script(llm, calls(("record", {"label": "first"})), calls(("send", {"label": "report"})),
                   {"content": "sent the report"})  # fmt: skip
    keyed = settings.model_copy(update={"stream": stream, "api_key": SecretStr(KEY)})
    hooks = Recording(str(path))
    async with worker_factory(settings=keyed, run_hooks=[hooks], hooks_state_dir=tmp_path / "state"):
        handle = await start(client, task_queue, "record it, then send the report", agent="guarded", model=model)
        waiting = await pending(handle)
        await approve(handle, waiting.call_id)
        result = await handle.result()
        events = await delivered(client, path, handle.id)
    assert result.output == "sent the report"
    lines = read(path, handle.id)

    # exactly once: every event, in order, each kind's hook once per event of that kind
    assert_each_step_once(lines, events)
    kinds = Counter(e.kind for e in events)
    assert kinds["tool_started"] == 2 and kinds["approval_requested"] == 1 and kinds["approval_decided"] == 1
    (started,) = of(lines, "on_agent_start")
    assert (started["name"], started["seq"]) == ("guarded", events[0].seq)
    (ended,) = of(lines, "on_agent_end")
    assert (ended["name"], ended["kind"], ended["output"]) == ("guarded", "final", "sent the report")
    (decided,) = of(lines, "on_approval_decided")
    assert decided["decision"] == "approved by alice" and decided["call_id"] == waiting.call_id
    assert [x["call"] for x in of(lines, "on_tool_start")] == ["record(label=first)", "send(label=report)"]
    assert [x["model"] for x in of(lines, "on_model_start")] == [model] * 3
    assert of(lines, "on_model_end")[-1]["text"] == "sent the report"

    # at least once, here once each: the raw request (the messages so far) and the raw response
    requests = of(lines, "on_model_request")
    assert [(x["turn"], x["attempt"]) for x in requests] == [(1, 1), (2, 1), (3, 1)]
    first, _, last = (x["request"] for x in requests)
    assert first["model"] == model and first.get("stream", False) is stream
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "record it, then send the report"
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last["messages"][-1]["content"] == "sent report"
    responses = of(lines, "on_model_response")
    assert len(responses) == 3 and responses[-1]["text"] == "sent the report"
    if stream:
        assert responses[-1]["body"] is None
        data = [line.removeprefix("data:").strip() for line in responses[-1]["sse_lines"] if line.startswith("data:")]
        chunks = [json.loads(d) for d in data if d != "[DONE]"]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        assert text == "sent the report"  # the raw SSE lines, whose deltas make up the reply
    else:
        assert responses[-1]["sse_lines"] is None
        assert responses[-1]["body"]["choices"][0]["message"]["content"] == "sent the report"
    assert [(x["tool"], x["arguments"]) for x in of(lines, "on_tool_call")] == [
        ("record", {"label": "first"}),
        ("send", {"label": "report"}),
    ]
    assert [(x["result"], x["is_error"]) for x in of(lines, "on_tool_result")] == [
        ("recorded first", False),
        ("sent report", False),
    ]
    assert KEY[:12] not in path.read_text()  # the key never reaches a hook


async def test_a_handoff_starts_the_next_agent(client, task_queue, worker_factory, llm, tmp_path):
    path = tmp_path / "hooks.jsonl"
    team = Registry.from_modules(["tests.fixtures.team_agents"])
    model = script(llm, calls(("transfer_to_billing", {})), {"content": "billing here"})
    async with worker_factory(registry=team, run_hooks=[Recording(str(path))], hooks_state_dir=tmp_path / "s"):
        handle = await start(client, task_queue, "about my invoice", agent="triage", model=model)
        result = await handle.result()
        events = await delivered(client, path, handle.id)
    assert result.agent == "billing"
    lines = read(path, handle.id)
    assert_each_step_once(lines, events)
    (handoff,) = of(lines, "on_handoff")
    assert (handoff["source"], handoff["target"]) == ("triage", "billing")
    assert [(x["name"], x["seq"]) for x in of(lines, "on_agent_start")] == [
        ("triage", events[0].seq),
        ("billing", handoff["seq"]),
    ]
    assert [x["agent"] for x in of(lines, "on_model_start")] == ["triage", "billing"]
    (ended,) = of(lines, "on_agent_end")
    assert (ended["name"], ended["output"]) == ("billing", "billing here")


async def test_a_killed_worker_neither_skips_nor_repeats_a_step(
    client, temporal_server, llm, task_queue, counter_file, tmp_path, monkeypatch
):
    path = tmp_path / "hooks.jsonl"
    monkeypatch.setenv("LIFECYCLE_HOOKS_FILE", str(path))
    monkeypatch.setenv("HOOKS_STATE_DIR", str(tmp_path / "state"))
    model = script(
        llm,
        tool_call("record", label="before"),
        tool_call("slow_record", label="slow", seconds=4),
        tool_call("record", label="after"),
        {"content": "all done"},
    )
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log, tools=FIXTURE)
    handle = await start(client, task_queue, "go", agent="scripted", model=model)

    async def slow_tool_called() -> bool:
        lines = read(path, handle.id)
        return any(x.get("tool") == "slow_record" for x in of(lines, "on_tool_start")) and any(
            x.get("tool") == "slow_record" and x["attempt"] == 1 for x in of(lines, "on_tool_call")
        )

    # the first worker's feed has delivered up to the slow tool's start, and its attempt, now
    # mid-sleep, has reported the call
    await wait_for(slow_tool_called, timeout=60)
    second = await kill_and_replace(first, temporal_server, llm, task_queue, log, FIXTURE)
    try:
        result = await asyncio.wait_for(handle.result(), 60)
        events = await delivered(client, path, handle.id)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    assert result.output == "all done"
    lines = read(path, handle.id)
    assert_each_step_once(lines, events)  # across the kill: nothing skipped, nothing repeated
    feeds = Counter(x["pid"] for x in of(lines, "on_event"))
    assert set(feeds) == {first.pid, second.pid}, "each worker's feed delivered its part"
    slow = next(e for e in events if e.kind == "tool_started" and e.tool == "slow_record")
    # at least once: the killed attempt and its retry each reported the call, from their own worker
    tried = [x for x in of(lines, "on_tool_call") if x["call_id"] == slow.call_id]
    assert [(x["attempt"], x["pid"]) for x in tried] == [(1, first.pid), (2, second.pid)]
    assert [x["result"] for x in of(lines, "on_tool_result") if x["call_id"] == slow.call_id] == [
        "recorded slow after 4.0s"
    ]
    # exactly once: the slow tool's start, once, from the first worker's feed
    assert [x["pid"] for x in of(lines, "on_tool_start") if x["call_id"] == slow.call_id] == [first.pid]
    assert "lifecycle hooks: Recording; exactly-once ones fed" in log.read_text()


async def test_hooks_that_raise_or_hang_break_and_stall_nothing(
    client, task_queue, worker_factory, llm, tmp_path, caplog
):
    raising, hanging = Raising(str(tmp_path / "raising.jsonl")), Hanging(str(tmp_path / "hanging.jsonl"))
    model = script(llm, calls(("record", {"label": "x"})), calls(("add", {"a": 2, "b": 3})), {"content": "five"})
    try:
        async with worker_factory(run_hooks=[raising, hanging], hooks_state_dir=tmp_path / "state"):
            began = time.monotonic()
            handle = await start(client, task_queue, "go", agent="scripted", model=model)
            result = await asyncio.wait_for(handle.result(), 30)
            took = time.monotonic() - began
            # the feed went past every hook that raised or hung: both saw every event, once
            events = await delivered(client, Path(hanging.path), handle.id, timeout=60)
            await delivered(client, Path(raising.path), handle.id)
    finally:
        Hanging.release.set()  # frees the threads the sync hooks hold
    assert result.output == "five"
    # 3 model calls and 2 tool calls, each waiting out two hung hooks of 0.5 s: about 5 s in all
    # (a hook that stalled the run would hold it until released: the 30 s wait above fails first)
    assert took < 30, f"the run took {took:.1f}s"
    for hooks in (raising, hanging):
        lines = read(Path(hooks.path), handle.id)
        assert [x["seq"] for x in of(lines, "on_event")] == [e.seq for e in events]
        assert len(of(lines, "on_model_request")) == 3 and len(of(lines, "on_tool_call")) == 2
    warnings = caplog.text
    assert "Raising.on_model_request raised ValueError: on_model_request broke" in warnings
    assert "Raising.on_tool_call raised KeyboardInterrupt" in warnings
    assert "Raising.on_model_start raised SystemExit" in warnings
    assert "Hanging.on_model_request did not return within 0.5s" in warnings
    assert "Hanging.on_tool_start did not return within 0.5s" in warnings


def test_only_the_methods_a_class_overrides_are_called():
    from durable_agent_runner.agents.lifecycle import AT_LEAST_ONCE, HookCaller, RunHooks
    from durable_agent_runner.agents.lifecycle import EXACTLY_ONCE as FEED

    class OnlyTools(RunHooks):
        def on_tool_result(self, call, result, is_error):
            pass

    caller = HookCaller([OnlyTools()])
    assert [name for name in (*FEED, *AT_LEAST_ONCE) if caller.wants(name)] == ["on_tool_result"]
    assert not caller.wants_feed  # no feed follows runs for at-least-once hooks alone
    assert HookCaller([Recording()]).wants_feed
    assert set(FEED) == EXACTLY_ONCE  # the tests above check every one of them
