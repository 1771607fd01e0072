"""Every verb of the CLI on the Python client, as a user's program calls it, against the real dev
server: list and its pages, what a run waits for a person on (and `result` saying so), pause,
inspect, edit, resume, fork and diff, export with the decisions and child runs' answers, and a
session's exchange read without waiting."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import durable_agent_runner as dar
from durable_agent_runner import Agent, Registry
from durable_agent_runner.cli.status import render_status
from durable_agent_runner.client import RunEvent, RunRow, StillRunning, WaitingFor
from durable_agent_runner.client.follow import Closed
from durable_agent_runner.client.sessions import NotAnswered
from tests.fixtures import agents as fixtures
from tests.helpers import calls, script
from tests.test_client import cli  # noqa: F401  (the fixture: client.py as a subprocess)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def agents() -> Registry:
    return Registry(agents=[fixtures.scripted, fixtures.guarded, fixtures.chatter])


@pytest.fixture
async def api(temporal_server, task_queue, monkeypatch) -> dar.AgentClient:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_server.target)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "default")
    monkeypatch.setenv("AGENT_TASK_QUEUE", task_queue)
    return await dar.connect()


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    """check()'s first truthy value within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.2)


async def waits_on(run: dar.RunHandle, kind: str) -> list[WaitingFor]:
    async def found() -> list[WaitingFor]:
        waits = await run.waiting_for()
        return waits if any(w.kind == kind for w in waits) else []

    return await until(found)


async def test_list_and_its_pages_show_the_runs_from_the_visibility_store(api, worker_factory, llm, agents):
    async with worker_factory(registry=agents):
        runs = [await api.start("scripted", f"list me {n}", model=script(llm, {"content": "ok"})) for n in range(3)]
        for run in runs:
            assert await run.result() == "ok"

        async def listed() -> list[RunRow]:
            rows = [r for r in await api.list(50, agent="scripted") if r.run_id in {x.id for x in runs}]
            return rows if len(rows) == 3 and all(r.status == "completed" for r in rows) else []

        rows = await until(listed)
        assert all(r.agent == "scripted" and r.turn >= 1 and r.ui_url.endswith(r.run_id) for r in rows)
        first = await api.runs_page(agent="scripted", page_size=2)
        assert len(first.rows) == 2 and first.next_page
        second = await api.runs_page(first.next_page, agent="scripted", page_size=2)
        assert {r.run_id for r in first.rows}.isdisjoint({r.run_id for r in second.rows})
        assert await api.list(5, phase="awaiting_approval", agent="scripted") == []


async def test_a_run_says_what_it_waits_for_and_result_does_not_wait_silently(
    api, worker_factory, llm, agents, cli, temporal_server
):
    model = script(llm, calls(("send", {"label": "draft"})), {"content": "sent it"})
    async with worker_factory(registry=agents):
        run = await api.start("guarded", "send the draft", model=model)
        (wait,) = await waits_on(run, "approval")
        assert wait.tool == "send" and wait.call_id and f"approve {run.id} {wait.call_id}" in wait.command
        with pytest.raises(StillRunning) as caught:
            await run.result(wait=0)
        assert caught.value.waiting_for == [wait]
        assert f"run {run.id} waits for a person: approval of send (call {wait.call_id})" in str(caught.value)
        with pytest.raises(StillRunning, match="waits for a person"):
            await run.result(wait=0.5)

        no_wait = await cli("result", run.id, "--no-wait")
        assert no_wait.code == 1 and f"approval of send (call {wait.call_id})" in no_wait.err, no_wait
        bounded = await cli("result", run.id, "--wait", "1")
        assert bounded.code == 1 and f"approval of send (call {wait.call_id})" in bounded.err, bounded
        assert "waits on until it ends" not in bounded.err  # it waits a second: its note says so
        assert all(line.endswith(("(result waits at most 1 s)", "--reason WHY")) for line in bounded.err.splitlines())
        as_json = (await cli("result", run.id, "--no-wait", "--json")).json()
        assert as_json["status"] == "waiting_for_person" and as_json["waiting_for"][0]["tool"] == "send"
        # The wrong verb for the call that waits: the run's refusal names the one that acts on it.
        hint = f"call {wait.call_id} waits for approval: approve or reject it"
        for verb in (["answer", run.id, wait.call_id, "yes"], ["resolve", run.id, wait.call_id, "--rerun"]):
            wrong = await cli(*verb)
            assert wrong.code == 2 and wrong.err.rstrip().endswith(hint), wrong

        env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target}
        env |= {"TEMPORAL_NAMESPACE": "default", "AGENT_TASK_QUEUE": api.task_queue}
        waiting = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", "result", run.id, cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert waiting.stderr is not None
        said = (await asyncio.wait_for(waiting.stderr.readline(), 30)).decode()
        assert f"waits for a person: approval of send (call {wait.call_id})" in said, said
        told: list[list[WaitingFor]] = []
        outcome = asyncio.create_task(run.outcome(on_waiting=told.append))
        await until(lambda: asyncio.sleep(0, told))
        await run.approve(wait.call_id, by="ann")
        out, _ = await asyncio.wait_for(waiting.communicate(), 30)
        done = await asyncio.wait_for(outcome, 30)
    assert waiting.returncode == 0 and out.decode().strip() == "sent it"
    assert done.output == "sent it" and told[0] == [wait]
    finished = await cli("result", run.id, "--no-wait")
    assert finished.code == 0 and finished.out.strip() == "sent it", finished


async def test_run_wait_says_when_the_run_waits_for_a_person_instead_of_blocking_silently(
    api, worker_factory, llm, agents, temporal_server
):
    """Before, `run --wait` on a run that paused at its breakpoint printed nothing until it ended."""
    model = script(llm, calls(("record", {"label": "a"})), {"content": "recorded"})
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target}
    env |= {"TEMPORAL_NAMESPACE": "default", "AGENT_TASK_QUEUE": api.task_queue}
    async with worker_factory(registry=agents):
        waiting = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", "run", "--agent", "scripted", "--model", model, "--break-tool", "record",
            "--id", f"wait-{os.getpid()}-{time.monotonic_ns()}", "--wait", "record a", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert waiting.stderr is not None
        try:
            said = (await asyncio.wait_for(waiting.stderr.readline(), 30)).decode()
            assert " waits for a person: a resume (it is paused): python client.py resume " in said, said
            assert said.rstrip().endswith("(run --wait waits on until it ends)"), said
            await api.get(said.split()[1]).resume(by="ann")
            out, _ = await asyncio.wait_for(waiting.communicate(), 30)
        finally:
            if waiting.returncode is None:
                waiting.kill()
                await waiting.wait()
    assert waiting.returncode == 0 and out.decode().strip() == "recorded"


async def test_pause_inspect_edit_resume_fork_diff_and_export(api, worker_factory, llm, agents, tmp_path):
    model = script(llm, calls(("send", {"label": "draft"})), {"content": "all done"})
    async with worker_factory(registry=agents):
        run = await api.start("guarded", "send the draft", model=model)
        (wait,) = await waits_on(run, "approval")
        pausing = await run.pause("look first", by="ann")
        assert pausing.phase == "awaiting_approval"
        # a second pause while one is requested is refused, naming the first; nothing is recorded
        with pytest.raises(dar.DecisionRefused, match=r"a pause is already requested by ann \(look first\)") as twice:
            await run.pause("me too", by="bob")
        assert twice.value.kind == "PauseAlreadyRequested" and "resume withdraws the request" in str(twice.value)
        await run.approve(wait.call_id, {"label": "final"}, by="ann")
        await waits_on(run, "resume")
        view = await run.inspect()
        assert view.paused is not None and "paused by ann: look first" in view.paused.why
        assert view.items[0].message.content == "send the draft"
        edited = await run.edit(text=(0, "send the final draft"), by="ann")
        assert edited.items == len(view.items)  # a text edit replaces, it adds nothing
        with pytest.raises(dar.DecisionRefused):
            await run.edit(drop=999, by="ann")
        await run.resume(by="ann")
        assert await run.result() == "all done"
        with pytest.raises(dar.DecisionRefused, match="has ended"):
            await run.resume(by="ann")

        transcript = await run.transcript()
        assert transcript.messages[0].content == "send the final draft"
        forked = await run.fork(2, "and say thanks")
        assert forked.forked_from.run_id == run.id and forked.forked_from.turn == 2
        assert await api.get(forked.run_id).result() == "all done"
        diff = await api.diff(run.id, forked.run_id)
        assert diff.first_difference == 2 and diff.same_turns == 1
        assert diff.b.forked_from == f"fork of {run.id} before model call 2"

        lines = await run.export(captures=tmp_path)
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "run" and kinds[-1] == "result"
    (approval,) = [line for line in lines if line["type"] == "approval"]
    assert approval["call_id"] == wait.call_id and approval["tool"] == "send" and approval["by"] == "ann"
    assert approval["approved"] and approval["arguments"] == {"label": "final"}
    (result,) = [line for line in lines if line["type"] == "tool_result"]
    assert result["call_id"] == wait.call_id and result["output"] == "sent final"


async def test_export_holds_a_child_runs_answer(api, worker_factory, llm):
    helper = Agent(name="helper", model=script(llm, {"content": "the tide turns at six"}))
    lead = Agent(
        name="lead",
        model=script(llm, calls(("ask", {"input": "when does the tide turn?"})), {"content": "at six"}),
        tools=[helper.as_tool(name="ask")],
    )
    async with worker_factory(registry=Registry(agents=[lead])):
        run = await api.start(lead, "tides?")
        assert await run.result() == "at six"
        children = await until(run.children)
        lines = await run.export()
        info, child = await run.status(), await api.get(children[0]["run_id"]).status()
    (answer,) = [line for line in lines if line["type"] == "tool_result"]
    assert answer["tool"] == "ask" and answer["output"] == "the tide turns at six" and not answer["is_error"]
    assert answer["child_run_id"] == children[0]["run_id"] and answer["agent"] == "helper"
    # status names the runs a run started and, on a child, its parent: each points to the other
    (named,) = info.children
    tokens = child.usage.total_tokens
    assert named == {"run_id": child.run_id, "agent": "helper", "status": "completed", "total_tokens": tokens}, named
    assert child.parent == run.id and child.children == []
    said = render_status(info.as_dict()), render_status(child.as_dict())
    assert f"child:   {child.run_id}  helper · completed · {tokens} tokens" in said[0].splitlines()
    assert f"parent:  {run.id} (it started this run: an agent used as a tool)" in said[1].splitlines()


async def test_a_sessions_exchange_can_be_read_without_waiting(api, worker_factory, llm, agents):
    model = script(llm, {"content": "hello back"})
    async with worker_factory(registry=agents):
        chat = await api.start_session("chatter", model=model)
        assert await chat.ask("hello") == "hello back"
        now = await chat.exchange_now(1)
        assert now is not None and now.output == "hello back" and now.prompt == "hello"
        with pytest.raises(dar.AgentRunError, match="there is no message 5"):
            await chat.exchange_now(5)
        (waits,) = await waits_on(chat, "message")
        assert waits.command.endswith(f"end {chat.id}")
        await chat.end(by="ann")


async def test_an_unknown_run_is_run_not_found_for_every_verb(api):
    run = api.get("no-such-run-anywhere")
    for attempt in (run.waiting_for(), run.export(), run.inspect(wait=2), run.fork(1), run.status()):
        with pytest.raises(dar.RunNotFound, match="no run with id 'no-such-run-anywhere'"):
            await attempt


async def test_the_reads_under_the_faces(api, worker_factory, llm, agents):
    """What the console and chat read through the client: events, status, the frozen agent."""
    model = script(llm, calls(("add", {"a": 2, "b": 3})), {"content": "five"})
    async with worker_factory(registry=agents):
        run = await api.start("scripted", "add two and three", model=model)
        assert await run.result() == "five"
        events = await run.read_events()
        page = await run.events_page(0)
        live = await run.live()
        spec = await run.agent()
        desc = await run.describe()
        story = [item async for item in run.follow(0)]  # a closed run's story ends with Closed
        last = await run.read_events(since=events[-1].seq)  # its reads need a worker
    kinds = [e.kind for e in events]
    assert kinds[0] == "model_started" and kinds[-1] == "final" and "tool_finished" in kinds
    assert [e.seq for e in page.events] == [e.seq for e in events][: len(page.events)]
    assert live is not None and live.status == "completed" and live.turn == 2
    assert spec is not None and spec.name == "scripted" and any(tool.name == "add" for tool in spec.tools)
    assert desc.id == run.id and isinstance(story[-1], Closed) and story[-1].status == "completed"
    assert [item.seq for item in story if isinstance(item, RunEvent)] == [e.seq for e in events]
    assert last == events[-1:]


async def test_a_sessions_answer_waits_within_its_bound_and_says_what_the_run_waits_for(
    api, worker_factory, llm, agents, cli
):
    """`answer` and `exchange` wait at most `wait` seconds (checked like every wait), then raise
    NotAnswered (a StillRunning) naming what the run waits for: here a call's approval. The CLI's
    `result --message K --wait S` passes its bound and says the same, exit 1."""
    model = script(llm, calls(("send", {"label": "memo"})), {"content": "sent the memo"})
    async with worker_factory(registry=agents):
        chat = await api.start_session("guarded", model=model)
        receipt = await chat.send("send the memo")
        (wait,) = await waits_on(chat, "approval")
        began = time.monotonic()
        with pytest.raises(StillRunning, match=f"message 1 of session {chat.id} has no answer after 1s") as late:
            await chat.answer(receipt.message, wait=1)
        assert time.monotonic() - began < 10
        assert f"waits for a person: approval of send (call {wait.call_id})" in str(late.value)
        assert isinstance(late.value, NotAnswered) and late.value.message == 1
        for bad in (-1, 0, float("nan"), float("inf"), 3601):
            with pytest.raises(ValueError, match="wait: must be a number of seconds in"):
                await chat.exchange(1, wait=bad)
        with pytest.raises(TypeError, match="wait must be a number of seconds"):
            await chat.answer(1, wait="3")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="answer_wait: must be a number of seconds in"):
            await chat.ask("again?", answer_wait=-1)
        shown = await cli("result", chat.id, "--message", "1", "--wait", "1")
        assert shown.code == 1 and "message 1 of session" in shown.out + shown.err, shown
        assert f"approval of send (call {wait.call_id})" in shown.out + shown.err
        await chat.approve(wait.call_id, by="ann")
        assert await chat.answer(1, wait=30) == "sent the memo"
        await chat.end(by="ann")


async def test_a_wait_that_ran_out_on_an_agent_no_worker_serves_says_so(api, worker_factory, agents):
    """Before: `chat.ask(…, answer_wait=S)` and `result(wait=S)` on an agent no worker serves
    said only `(the run is starting)`, though `status` knew: no worker serves agent 'ghost'."""
    async with worker_factory(registry=agents):  # serves the queue, not the agent 'ghost'
        chat = await api.start_session("ghost")
        with pytest.raises(
            NotAnswered, match=r"has no answer after 5s \(the run is starting\); no worker serves"
        ) as late:
            await chat.ask("hello", answer_wait=5)
        assert "agent 'ghost' for the run's start (waiting" in str(late.value)
        assert len(late.value.unserved) == 1 and late.value.unserved[0] in str(late.value)
        run = await api.start("ghost", "hi")
        with pytest.raises(StillRunning, match=r"is still running \(starting\); no worker serves agent 'ghost'") as ran:
            await run.result(wait=5)
        assert f"nothing polls task queue {api.task_queue}@ghost" in str(ran.value)
        await chat.cancel()
        await run.cancel()


async def test_watch_follows_at_most_its_timeout_and_says_where_to_pick_it_up(api, worker_factory, agents, cli):
    """Before: `watch` of a run that waits (here: on an agent no worker serves) followed it
    forever, the one wait of the CLI with no bound; `eval watch` had --timeout."""
    async with worker_factory(registry=agents):
        run = await api.start("ghost", "hi")
        began = time.monotonic()
        done = await cli("watch", run.id, "--timeout", "2", "--json")
        assert done.code == 1 and time.monotonic() - began < 30, done
        assert done.out.strip().splitlines()[-1] == '{"type": "timeout", "next": 0}', done
        assert f"watch: stopped after 2 s; the run goes on: python client.py watch {run.id} --since 0" in done.err
        await run.cancel()
