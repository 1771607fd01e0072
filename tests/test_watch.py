"""Watching runs live: streamed text, retried calls withdrawn, resuming without gaps."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from durable_agent_runner.activities.model_call import TAIL_CHARS
from durable_agent_runner.cli.watch import Printer, watch
from durable_agent_runner.client import AgentClient
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine.texts import EVENT_TEXT, event_text
from durable_agent_runner.workflows import types as t
from tests.helpers import event, script, start

ROOT = Path(__file__).resolve().parent.parent
STORY = (
    "Tokyo is sunny and mild today at twenty two degrees, while Paris sits under low cloud at fifteen; "
    "if you are choosing where to walk this afternoon, Tokyo is the warmer and brighter choice by far."
)


def streaming(llm) -> LLMSettings:
    return LLMSettings(base_url=llm.base_url, model="demo", stream=True)


async def follow(client, run_id: str, since: int = 0) -> tuple[int, list[dict]]:
    out = io.StringIO()
    code = await asyncio.wait_for(watch(AgentClient(client), run_id, since, as_json=True, out=out), 60)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


async def test_text_is_shown_as_it_streams(client, task_queue, worker_factory, llm):
    # Each SSE frame 200 ms apart: the reply takes ~5 s, so a watcher on a busy machine (three test
    # processes on two cores, reads of a second and more) still reads it in several pieces.
    llm.set_latency(0, stream_event_ms=200)
    text = STORY + " " + STORY
    model = script(llm, {"content": text})
    async with worker_factory(settings=streaming(llm)):
        handle = await start(client, task_queue, "tell me", agent="scripted", model=model)
        code, lines = await follow(client, handle.id)
    assert code == 0
    deltas = [line for line in lines if line["type"] == "delta"]
    finished = next(i for i, line in enumerate(lines) if line.get("kind") == "model_finished")
    assert len(deltas) >= 3, "the text should arrive in several pieces while the call runs"
    assert all(lines.index(d) < finished for d in deltas)  # shown before the call completed
    shown = "".join(d["text"] for d in deltas)
    assert text.startswith(shown) and lines[finished]["text"] == text
    assert lines[-2]["kind"] == "final" and lines[-1] == {
        "type": "end",
        "outcome": "final",
        "next": lines[-2]["seq"] + 1,
    }


LONG = "".join(f"{i:06d} the reply goes on and on, well past what one heartbeat holds. " for i in range(2500))


def tail(text: str, end: int, turn: int = 1, attempt: int = 1) -> t.ModelProgress:
    """A heartbeat when `end` characters have streamed: their last TAIL_CHARS, and where those start."""
    start = max(end - TAIL_CHARS, 0)
    return t.ModelProgress(turn=turn, attempt=attempt, text=text[start:end], offset=start)


def finished(text: str, turn: int = 1) -> t.AnyRunEvent:
    at = datetime.now(UTC)
    return event("model_finished", seq=1, at=at, turn=turn, text=event_text(text))


def test_live_text_keeps_flowing_past_the_heartbeats_tail():
    out = io.StringIO()
    printer = Printer("r", as_json=True, out=out)
    for end in [*range(1000, len(LONG), 9000), len(LONG)]:
        printer.delta(tail(LONG, end))
        printer.delta(tail(LONG, end - 5000))  # an older heartbeat, overtaken: shows nothing
    deltas = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(LONG) > 2 * TAIL_CHARS and "".join(d["text"] for d in deltas) == LONG
    assert all(LONG[d["offset"] :].startswith(d["text"]) and "skipped" not in d for d in deltas)


def test_text_that_streamed_by_between_polls_is_said_to_be_missing_and_the_rest_still_shown():
    out = io.StringIO()
    printer = Printer("r", as_json=False, out=out)
    printer.delta(tail(LONG, 10_000))
    printer.delta(tail(LONG, 100_000))  # 100,000 - 65,536 - 10,000 characters never seen
    printer.delta(tail(LONG, 120_000))
    skipped = 100_000 - TAIL_CHARS - 10_000
    assert out.getvalue() == (
        LONG[:10_000] + f"\n  … [{skipped} characters streamed by unseen] …\n" + LONG[100_000 - TAIL_CHARS : 120_000]
    )
    printer.event(finished(LONG))
    # The event keeps the reply's first EVENT_TEXT characters: what it has was shown, and it says so.
    end = out.getvalue()[len(LONG[:10_000]) :]
    assert "retried" not in end and f"first {EVENT_TEXT} characters" in end and "durable-agent-runner result r" in end


def test_the_events_text_completes_what_the_live_view_showed_or_replaces_a_different_reply():
    out = io.StringIO()
    printer = Printer("r", as_json=False, out=out)
    short = LONG[:20_000]
    printer.delta(tail(short, 15_000))
    printer.event(finished(short))
    assert out.getvalue() == short + "\n"
    out.truncate(0), out.seek(0)
    printer.delta(tail(short, 15_000, turn=2))
    printer.event(finished("something else entirely", turn=2))
    assert out.getvalue() == short[:15_000] + "\n  ↻ the reply was retried; its final text:\nsomething else entirely\n"


async def test_a_long_streamed_reply_keeps_flowing_to_the_watcher(client, task_queue, worker_factory, llm):
    # 1,500 characters every 80 ms: ~13 s for the reply, ~10 s of it past the tail's 64 KiB, so a
    # watcher on a busy machine (three test processes on two cores, reads of a second and more)
    # still reads it there several times.
    llm.set_latency(0, stream_event_ms=80)
    text = (LONG * 2)[:250_000]
    model = script(llm, {"content": text, "delta_chars": 1500})
    async with worker_factory(settings=streaming(llm)):
        handle = await start(client, task_queue, "tell me", agent="scripted", model=model)
        code, lines = await follow(client, handle.id)
    assert code == 0
    finished_at = next(i for i, line in enumerate(lines) if line.get("kind") == "model_finished")
    deltas = [line for line in lines[:finished_at] if line["type"] == "delta"]
    assert all(text[d["offset"] :].startswith(d["text"]) for d in deltas)  # each where it belongs
    past = [d for d in deltas if d["offset"] > TAIL_CHARS]
    assert len(past) >= 3, "text kept coming after the heartbeat's tail was full"
    shown = sum(len(d["text"]) + d.get("skipped", 0) for d in deltas)
    assert shown == deltas[-1]["offset"] + len(deltas[-1]["text"]) > 100_000


async def test_a_call_that_fails_mid_stream_has_its_partial_text_withdrawn(client, task_queue, worker_factory, llm):
    # Each frame 200 ms apart. The first attempt sends the role chunk and 11 pieces of text (2.4 s),
    # holds the line 4 s more, then drops it; the retry streams the whole text (~5 s). A watcher on
    # a busy machine (three test processes on two cores, reads of a second and more) sees both.
    llm.set_latency(0, stream_event_ms=200)
    llm.add_faults([{"kind": "stall", "after_events": 12, "ms": 4000}])
    text = STORY + " " + STORY
    model = script(llm, {"content": text})
    async with worker_factory(settings=streaming(llm)):
        handle = await start(client, task_queue, "tell me", agent="scripted", model=model)
        code, lines = await follow(client, handle.id)
    assert code == 0
    kinds = [(line["type"], line.get("attempt")) for line in lines if line["type"] in ("delta", "discard")]
    assert ("delta", 1) in kinds and ("discard", 1) in kinds and ("delta", 2) in kinds
    discard = kinds.index(("discard", 1))
    assert all(attempt == 1 for _, attempt in kinds[:discard])
    # after the withdrawal, only the retried attempt's text is shown, and the reply completes it
    after = lines[lines.index({"type": "discard", "turn": 1, "attempt": 1}) :]
    shown = "".join(line["text"] for line in after if line["type"] == "delta")
    assert all(line["attempt"] == 2 for line in after if line["type"] == "delta")
    assert text.startswith(shown) and next(e for e in after if e.get("kind") == "model_finished")["text"] == text


async def test_a_watcher_resumes_without_gaps_or_repeats_across_continue_as_new(
    client, task_queue, worker_factory, llm
):
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="relay", model="loop:6:10")
        await handle.result()
        code, whole = await follow(client, handle.id)
        events = [line for line in whole if line["type"] == "event"]
        cut = len(events) // 2
        _, rest = await follow(client, handle.id, since=events[cut]["seq"])
    assert code == 0
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(len(seqs)))  # numbered without gaps across three executions
    assert [e["seq"] for e in rest if e["type"] == "event"] == seqs[cut:]
    assert events[-1]["kind"] == "final" and events[-1]["text"] == "done after 6 turns"


async def test_watching_a_finished_run_tells_its_story_and_exits(client, task_queue, worker_factory, llm):
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Tokyo and Paris?")
        await handle.result()
        out = io.StringIO()
        code = await watch(AgentClient(client), handle.id, out=out)
        failed = await start(client, task_queue, "go", agent="looper", model="loop:9:10", max_turns=1)
        failed_out = io.StringIO()
        failed_code = await asyncio.wait_for(watch(AgentClient(client), failed.id, out=failed_out), 30)
        past, past_out = 10_000, io.StringIO()  # a watch resumed past its end: the answer came before
        past_code = await asyncio.wait_for(watch(AgentClient(client), handle.id, past, out=past_out), 30)
        failed_past = await asyncio.wait_for(watch(AgentClient(client), failed.id, past, out=io.StringIO()), 30)
    text = out.getvalue()
    assert code == 0
    # not "✗", not 1; and no blank line first, with what it means that nothing came
    assert (past_code, past_out.getvalue(), failed_past) == (0, "✓ run completed (no event from 10000 on)\n", 1)
    assert "⚙ get_weather(city=Tokyo)" in text and "⚙ convert_temperature(celsius=22.0" in text
    assert "Tokyo is warmer at 71.6°F.\n✓ final answer (turn 3)" in text
    assert failed_code == 1 and "✗ run failed: max_turns (1) exceeded" in failed_out.getvalue()


async def test_run_follow_from_the_command_line(client, temporal_server, task_queue, worker_factory, llm):
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    async with worker_factory(settings=streaming(llm)):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", "run", "--follow", "Weather in Tokyo?",
            cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    text = stdout.decode()
    assert proc.returncode == 0, stderr.decode()
    assert "── turn 1" in text and "⚙ get_weather(city=Tokyo)" in text and "71.6°F" in text


async def test_events_since_never_skips_an_earlier_execution_with_more_than_a_page_left() -> None:
    """An execution of 1,200 events, then a new one from seq 1,200: a watcher from 0 reads all."""

    from durable_agent_runner.cli.watch import events_since

    def ev(seq: int) -> t.AnyRunEvent:
        return event("tool_finished", seq=seq)

    executions = {"old": (0, 1200, None), "new": (1200, 1250, "old")}

    class Handle:
        def __init__(self, execution: str | None) -> None:
            self.execution = execution or "new"

        async def query(
            self, name: str, query: t.EventsQuery, result_type: object, rpc_timeout: timedelta
        ) -> t.EventsPage:
            first, end, previous = executions[self.execution]
            start = max(query.since, first)
            events = [ev(n) for n in range(start, min(end, start + query.limit))]
            return t.EventsPage(
                events=events, next=events[-1].seq + 1 if events else start, first=first, previous_run_id=previous
            )

    class FakeClient:
        def get_workflow_handle(self, workflow_id: str, run_id: str | None = None) -> Handle:
            return Handle(run_id)

    seen: list[int] = []
    since = 0
    while since < 1250:
        page = await events_since(FakeClient(), "r", since)  # type: ignore[arg-type]
        assert page.events, since
        seen += [e.seq for e in page.events]
        since = page.events[-1].seq + 1
    assert seen == list(range(1250))


async def test_a_run_that_closes_between_its_events_and_its_status_still_shows_its_last_events() -> None:
    """The events are read (none new), then the run ends, then its status says closed: the
    watcher reads the events once more and shows the answer, not a bare "run completed"."""
    from types import SimpleNamespace

    from temporalio.client import WorkflowExecutionStatus

    from durable_agent_runner.cli.watch import Closed
    from durable_agent_runner.cli.watch import follow as follow_story

    final = event("final", seq=1, text="done")
    state = {"closed": False, "reads": 0}

    class Handle:
        async def query(
            self, name: str, query: t.EventsQuery, result_type: object, rpc_timeout: timedelta
        ) -> t.EventsPage:
            state["reads"] += 1
            events = [final] if state["closed"] and query.since <= 1 else []
            return t.EventsPage(events=events, next=query.since + len(events), first=0)

        async def describe(self, rpc_timeout: timedelta) -> SimpleNamespace:
            state["closed"] = True  # it ended just after the events were read
            return SimpleNamespace(status=WorkflowExecutionStatus.COMPLETED)

    class FakeClient:
        def get_workflow_handle(self, workflow_id: str, run_id: str | None = None) -> Handle:
            return Handle()

    story = []
    async for item in follow_story(FakeClient(), "r", since=1):  # type: ignore[arg-type]
        story.append(item)
        if isinstance(item, Closed) or len(story) > 5:
            break
    assert story[0] == final, story
    assert isinstance(story[-1], Closed) and story[-1].status == "completed"


async def test_a_read_that_times_out_is_said_in_a_persons_words_and_retried() -> None:
    """A worker that does not answer the events' query in time (restarting, starved): the
    follower's gap says so, not the transport's "Timeout expired", and it reads again."""
    from types import SimpleNamespace

    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    from durable_agent_runner.client.follow import Gap
    from durable_agent_runner.client.follow import follow as follow_story

    final = event("final", seq=0, text="done")
    reads = {"n": 0}

    class Handle:
        async def query(self, name: str, query: t.EventsQuery, **_: object) -> t.EventsPage:
            reads["n"] += 1
            if reads["n"] == 1:
                raise RPCError("Timeout expired", RPCStatusCode.CANCELLED, b"")
            if reads["n"] == 2:
                raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
            return t.EventsPage(events=[final], next=1, first=0)

        async def describe(self, **_: object) -> SimpleNamespace:
            return SimpleNamespace(status=WorkflowExecutionStatus.COMPLETED)

    class FakeClient:
        def get_workflow_handle(self, workflow_id: str, run_id: str | None = None) -> Handle:
            return Handle()

    story = []
    async for item in follow_story(FakeClient(), "r"):  # type: ignore[arg-type]
        story.append(item)
        if item == final or len(story) > 5:
            break
    assert story == [
        Gap("no answer in time (the run's worker busy or restarting, or the server)", 1),
        Gap("Temporal did not answer (connection refused)", 2),
        final,
    ]


# A tool's result or a model's reply that would drive the terminal: clear the screen, rewrite the
# line, set the window title, write the clipboard (OSC 52).
HOSTILE = "ok\x1b[2J\r\x1b]0;pwned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x9b31m done"


def test_watch_and_chat_show_a_hostile_text_without_its_terminal_controls():
    from durable_agent_runner.cli.chat_view import ChatPrinter
    from durable_agent_runner.client.events import TextDelta

    for printer_of in (
        lambda out: Printer("run-1", as_json=False, out=out),
        lambda out: ChatPrinter("run-1", as_json=False, out=out, stream=True, info=out),
    ):
        out = io.StringIO()
        printer = printer_of(out)
        printer.show(TextDelta(turn=1, attempt=1, offset=0, text=HOSTILE))
        printer.event(event("model_finished", text=HOSTILE))  # the reply streamed whole: nothing repeated
        printer.event(event("tool_finished", seq=2, tool="fetch\x1b[8m", text=HOSTILE))
        shown = out.getvalue()
        assert not any(ch in shown for ch in "\x1b\r\x07\x9b"), repr(shown)
        assert "ok\ufffd[2J\ufffd\ufffd]0;pwned" in shown and "↻ the reply was retried" not in shown
        assert "fetch\ufffd[8m" in shown


def test_watch_json_keeps_a_hostile_text_whole_and_escaped():
    out = io.StringIO()
    Printer("run-1", as_json=True, out=out).event(event("tool_finished", text=HOSTILE))
    line = out.getvalue()
    assert "\x1b" not in line and json.loads(line)["text"] == HOSTILE


def test_status_inspect_diff_and_result_show_a_hostile_text_safely_on_a_terminal_and_whole_in_a_pipe(monkeypatch):
    """The text the other commands print (`emit`, inspect's and diff's views) holds a run's words
    too: on a terminal its controls show as U+FFFD; through a pipe or into a file it stays whole."""
    from durable_agent_runner.cli import common

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, whole in ((Terminal(), False), (io.StringIO(), True)):
        monkeypatch.setattr(sys, "stdout", stream)
        common.emit(False, {}, HOSTILE)
        printed = stream.getvalue()
        assert (printed == HOSTILE + "\n") is whole and ("\x1b" in printed) is whole
        assert common.for_terminal(HOSTILE, stream) == (HOSTILE if whole else common.on_screen(HOSTILE))
