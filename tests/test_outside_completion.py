"""Calls completed from outside (`@tool(completes="outside")`) on the dev server: a call completed
with `client.py complete` after the worker restarted mid-wait (its start ran once), a second
completion and a result of the wrong type refused with nothing recorded, `--fail`, the timeout
told to the model or sent to a person, and the signed completion URL (accepted; a bad or expired
signature 401). Records tests/histories/outside_completion_1_4.json on request."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import BaseModel, SecretStr

from durable_agent_runner import Agent, Registry, ToolContext, tool
from durable_agent_runner.client import AgentClient, DecisionRefused
from durable_agent_runner.client.status import waiting_for
from durable_agent_runner.config.completion import CompletionSettings
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.webhooks import build_app
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import OUTSIDE_PATCH, RELEASE_2_PATCH
from tests.helpers import calls, replay, script, start, transcript
from tests.test_client import cli  # noqa: F401  (a fixture: client.py as a subprocess)

HISTORIES = Path(__file__).parent / "histories"
SECRET = "completion-secret-for-tests-0123"
BASE = "http://hooks.test"
STARTS: list[str] = []  # every start of a render job, as the tool made it
URLS: dict[str, str | None] = {}  # call id → the completion URL the tool was handed


class Rendered(BaseModel):
    pages: int
    url: str


def outsider(**options: object) -> Registry:
    @tool(name="render", completes="outside", outside_result=Rendered, **options)  # type: ignore[misc]
    def render(doc: str, ctx: ToolContext) -> str:
        """Start rendering a document; the renderer completes the call when it is done.

        Args:
            doc: The document's name.
        """
        STARTS.append(f"{ctx.run_id}/{doc}")
        URLS[ctx.call_id] = ctx.completion_url
        return f"job-{len(STARTS)}"

    return Registry(agents=[Agent(name="outsider", instructions="Render.", tools=[render])])


async def status(handle) -> t.RunStatus:
    return await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)


async def waiting(handle, timeout: float = 30.0) -> t.PendingOutside:
    deadline = time.monotonic() + timeout
    while True:
        s = await status(handle)
        if s.outside:
            return s.outside[0]
        assert time.monotonic() < deadline, f"no call waits for an outside completion; status: {s}"
        await asyncio.sleep(0.1)


def tool_results_sent(llm) -> list[str]:
    (last,) = llm.requests(last=1)
    return [m.get("content") for m in (last.get("body") or {}).get("messages", []) if m.get("role") == "tool"]


def accepted_updates(history) -> int:
    return sum(1 for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes"))


async def test_completed_with_client_py_after_a_worker_restart(client, task_queue, worker_factory, llm, cli):
    model = script(llm, calls(("render", {"doc": "report"})), {"content": "Rendered: 12 pages."})
    async with worker_factory(registry=outsider(outside_timeout_seconds=600)):
        handle = await start(client, task_queue, "Render the report", agent="outsider", model=model)
        pending = await waiting(handle)
        live = await status(handle)
        assert pending.tool == "render" and pending.started.startswith("job-") and pending.on_timeout == "tell_model"
        assert (
            live.status == "running"
            and live.last_step == "turn 1: waiting for outside completion of render(doc=report)"
        )
        (wait,) = waiting_for(handle.id, live)
        assert wait.kind == "outside" and "durable-agent-runner complete" in str(wait)
    starts = [s for s in STARTS if s.startswith(handle.id)]
    # The first worker is gone; a new one (no cache) replays the run's history and takes the completion.
    async with worker_factory(registry=outsider(outside_timeout_seconds=600)):
        shown = await cli("status", handle.id)
        assert f"outside: {pending.call_id}  render waits for an outside completion" in shown.out, shown
        bad = await cli("complete", handle.id, pending.call_id, "--result", "not json")
        assert bad.code == 2 and "argument --result: is not valid JSON" in bad.out + bad.err, bad
        good = await cli("complete", handle.id, pending.call_id, "--result", '{"pages": 12, "url": "s3://r"}', "--json")
        assert good.code == 0 and json.loads(good.out)["outcome"] == "result", good
        result = await asyncio.wait_for(handle.result(), 30)
        again = await cli("complete", handle.id, pending.call_id, "--fail", "late")
        assert again.code == 2 and "has ended (completed)" in again.err, again
        done = await status(handle)
        story = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
        exported = [line for line in await AgentClient(client).get(handle.id).export() if line["type"] == "completion"]
        messages = await transcript(handle)
        await replay(handle)
        history = await handle.fetch_history()
        if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
            (HISTORIES / "outside_completion_2_0.json").write_text(history.to_json())
    assert result.output == "Rendered: 12 pages."
    assert starts == [f"{handle.id}/report"] and [s for s in STARTS if s.startswith(handle.id)] == starts  # once
    assert tool_results_sent(llm) == ['{"pages": 12, "url": "s3://r"}']  # what the model read
    (message,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert not message.is_error
    assert done.outside == [] and [(c.by, c.fail) for c in done.completions] == [(os.environ.get("USER", "cli"), None)]
    assert [x["call_id"] for x in exported] == [pending.call_id]
    kinds = [e.kind for e in story]
    assert kinds.count(t.EventKind.OUTSIDE_WAITING) == 1 and kinds.count(t.EventKind.OUTSIDE_COMPLETED) == 1
    recorded = b"".join(e.SerializeToString() for e in history.events if e.HasField("marker_recorded_event_attributes"))
    assert RELEASE_2_PATCH.encode() in recorded and OUTSIDE_PATCH.encode() not in recorded  # 2.0's path


async def test_a_second_completion_and_a_wrong_result_are_refused_with_nothing_recorded(
    client, task_queue, worker_factory, llm
):
    model = script(llm, calls(("render", {"doc": "a"})), calls(("render", {"doc": "b"})), {"content": "Both."})
    async with worker_factory(registry=outsider()):
        handle = await start(client, task_queue, "Render a, then b", agent="outsider", model=model)
        run = AgentClient(client).get(handle.id)
        first = await waiting(handle)
        with pytest.raises(DecisionRefused, match="does not match the tool's result type: pages") as wrong:
            await run.complete_call(first.call_id, {"pages": "many", "url": "x"}, by="renderer")
        assert wrong.value.kind == "InvalidResult"
        with pytest.raises(DecisionRefused, match="no call waits for an outside completion with id call_9_9"):
            await run.complete_call("call_9_9", {"pages": 1, "url": "x"}, by="renderer")
        assert (await status(handle)).completions == []  # nothing recorded
        await run.complete_call(first.call_id, {"pages": 1, "url": "s3://a"}, by="renderer")
        second = await waiting(handle)
        assert second.call_id != first.call_id
        with pytest.raises(
            DecisionRefused, match=f"call {first.call_id} was already completed by renderer at"
        ) as twice:
            await run.complete_call(first.call_id, {"pages": 2, "url": "s3://a"}, by="other")
        assert twice.value.kind == "NotPending"
        await run.complete_call(second.call_id, fail="the renderer crashed", by="renderer")
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Both."
        history = await handle.fetch_history()
    assert tool_results_sent(llm) == [
        '{"pages": 1, "url": "s3://a"}',
        "error: tool 'render' failed: the renderer crashed (reported by renderer)",
    ]
    assert accepted_updates(history) == 2  # the refused completions never reached history


async def test_a_timeout_tells_the_model(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("render", {"doc": "slow"})), {"content": "It timed out."})
    async with worker_factory(registry=outsider(outside_timeout_seconds=2)):
        handle = await start(client, task_queue, "Render", agent="outsider", model=model)
        pending = await waiting(handle)
        assert (await asyncio.wait_for(handle.result(), 30)).output == "It timed out."
        done = await status(handle)
        with pytest.raises(DecisionRefused, match="has ended"):
            await AgentClient(client).get(handle.id).complete_call(pending.call_id, {"pages": 1, "url": "x"})
    assert tool_results_sent(llm) == ["error: tool 'render' failed: no outside completion within 2s"]
    (record,) = done.completions
    assert record.automatic and record.by == "timeout"


async def test_a_timeout_goes_to_a_person(client, task_queue, worker_factory, llm, cli):
    model = script(llm, calls(("render", {"doc": "slow"})), {"content": "A person gave it."})
    async with worker_factory(registry=outsider(outside_timeout_seconds=2, on_outside_timeout="person")):
        handle = await start(client, task_queue, "Render", agent="outsider", model=model)
        pending = await waiting(handle)
        deadline = time.monotonic() + 30
        while not (live := await status(handle)).in_doubt:
            assert time.monotonic() < deadline, live
            await asyncio.sleep(0.2)
        (doubt,) = live.in_doubt
        assert live.outside == [] and "no outside completion within 2s" in doubt.ended
        late = await cli("complete", handle.id, pending.call_id, "--result", '{"pages": 1, "url": "x"}')
        assert late.code == 2 and "timed out waiting for its completion and is in doubt" in late.out + late.err, late
        given = await cli("resolve", handle.id, pending.call_id, "--result", '{"pages": 3, "url": "s3://p"}')
        assert given.code == 0, given
        assert (await asyncio.wait_for(handle.result(), 30)).output == "A person gave it."
        await replay(handle)
    assert tool_results_sent(llm) == ['{"pages": 3, "url": "s3://p"}']


async def test_the_signed_completion_url(client, task_queue, worker_factory, llm):
    settings = LLMSettings(
        base_url=llm.base_url, model="demo", completion=CompletionSettings(secret=SecretStr(SECRET), base_url=BASE)
    )
    model = script(llm, calls(("render", {"doc": "signed"})), {"content": "Signed."})
    now = [time.time()]
    app = build_app(AgentClient(client), {}, completion_key=SECRET.encode(), clock=lambda: now[0])
    async with (
        worker_factory(registry=outsider(), settings=settings),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
    ):
        handle = await start(client, task_queue, "Render", agent="outsider", model=model)
        pending = await waiting(handle)
        url = URLS[pending.call_id]
        assert url is not None and url.startswith(f"{BASE}/complete/{handle.id}/{pending.call_id}?exp=")
        assert SECRET not in (await handle.fetch_history()).to_json()  # the secret never enters history
        path = urlsplit(url)
        target = f"{path.path}?{path.query}"
        body = {"result": {"pages": 4, "url": "s3://s"}, "by": "renderer"}
        forged = await http.post(target[:-4] + "0000", json=body)
        assert forged.status_code == 401 and "signature does not match" in forged.json()["error"], forged.text
        other = await http.post(target.replace(pending.call_id, "call_9_9", 1), json=body)
        assert other.status_code == 401, other.text  # a URL is good for its own call only
        now[0] = time.time() + 30 * 24 * 3600
        expired = await http.post(target, json=body)
        assert expired.status_code == 401 and "expired" in expired.json()["error"], expired.text
        now[0] = time.time()
        wrong = await http.post(target, json={"result": {"pages": "four"}})
        assert wrong.status_code == 422 and "result type" in wrong.json()["error"], wrong.text
        ok = await http.post(target, json=body)
        assert ok.status_code == 200 and ok.json()["outcome"] == "result" and ok.json()["by"] == "renderer", ok.text
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Signed."
        twice = await http.post(target, json={"fail": "again"})
        assert twice.status_code == 409, twice.text
    assert tool_results_sent(llm) == ['{"pages": 4, "url": "s3://s"}']


async def test_a_live_tools_fork_reruns_an_outside_call_of_an_agent_that_handed_off_since(
    client, task_queue, worker_factory, llm
):
    """The fork runs the render again as the agent that made it, though `billing` is in charge
    now and has no such tool: its wait is that agent's tool's. (Until 1.4.7 the run's books looked
    the tool up on the agent in charge, and the fork's workflow task failed on it: stuck.)"""

    @tool(name="render", completes="outside", outside_result=Rendered)
    def render(doc: str) -> str:
        """Start rendering a document; the renderer completes the call when it is done.

        Args:
            doc: The document's name.
        """
        return f"job-{doc}"

    billing = Agent(name="billing", instructions="Bill.")
    team = Registry(agents=[Agent(name="renderer", instructions="Render.", tools=[render], handoffs=[billing])])
    model = script(
        llm,
        calls(("render", {"doc": "q3"})),
        calls(("transfer_to_billing", {})),
        {"content": "Billed."},  # model call 3: the run's, and its fork's (the script goes by turn)
    )
    async with worker_factory(registry=team):
        handle = await start(client, task_queue, "Render q3, then bill it", agent="renderer", model=model)
        run = AgentClient(client).get(handle.id)
        first = await waiting(handle)
        await run.complete_call(first.call_id, {"pages": 1, "url": "s3://q3"}, by="renderer")
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Billed."
        forked = await run.fork(3, live_tools=True, task_queue=task_queue)
        fork = client.get_workflow_handle(forked.run_id, result_type=t.RunResult)
        again = await waiting(fork)
        assert again.tool == "render" and (await status(fork)).agent == "billing"
        await AgentClient(client).get(forked.run_id).complete_call(again.call_id, {"pages": 2, "url": "s3://q3b"})
        assert (await asyncio.wait_for(fork.result(), 30)).output == "Billed."
    sent = tool_results_sent(llm)  # the fork's model call: the fresh result in the recorded one's place
    assert sent[0] == '{"pages": 2, "url": "s3://q3b"}' and len(sent) == 2
    await replay(fork)
