"""Calls in doubt in the console: a `once` tool's worker is SIGKILLed mid-call, the call shows in
the inbox and on the run's page with Rerun, Result and Fail; a result that is not JSON is refused
inline (nothing recorded), a valid one resolves it and the model is told it. Also the runs page's
order and a run's child-run tree."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections import Counter
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from durable_agent_runner import Agent, Registry, tool
from durable_agent_runner.client import AgentClient, DecisionRefused
from durable_agent_runner.workflows import types as t
from tests.console_helpers import pending, serve_console
from tests.helpers import beating, calls, script, start, status_of, transcript
from tests.test_console_http import csrf_of
from tests.test_durability import wait_for
from tests.test_in_doubt import block, starts, workers  # noqa: F401  (block, workers: fixtures)

JSON = {"Accept": "application/json"}


async def next_calls(lines: Any) -> dict[str, Any]:
    """The next `calls` frame of an inbox stream."""
    event = ""
    async for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event == "calls":
            update: dict[str, Any] = json.loads(line.removeprefix("data: "))
            return update
    raise AssertionError("the stream ended")


async def test_a_call_in_doubt_is_resolved_from_the_inbox(
    client, temporal_server, llm, task_queue, counter_file, block, workers
):
    model = script(llm, calls(("pay", {"label": "erin"})), {"content": "erin is paid"})
    first = workers()
    handle = await start(client, task_queue, "pay erin", agent="payer", model=model)

    async def started() -> bool:  # the tool runs, and its first heartbeat (when it began) reached the server
        return bool(starts(counter_file)) and await beating(handle, t.TOOL_CALL_ACTIVITY) == 1

    await wait_for(started)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    workers()

    async def in_doubt() -> bool:
        return bool((await status_of(handle)).in_doubt)  # status_of asks again while the new worker takes over

    await wait_for(in_doubt, timeout=60)
    (doubt,) = (await status_of(handle)).in_doubt
    call = doubt.call_id
    async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=30) as web:
        inbox = (await web.get("/inbox")).text
        row = inbox[inbox.index(f'data-call="{handle.id}/{call}/doubt-1"') :]
        row = row[: row.index("</section>")]
        assert "in doubt" in row and "<code>pay</code>" in row and "&quot;label&quot;: &quot;erin&quot;" in row
        assert "ended without a result" in row and doubt.ended in row and "attempt started" in row
        for control in (
            'value="rerun">Rerun',
            'value="result" class="approve">Result',
            'value="fail" class="reject">Fail',
        ):
            assert control in row
        page = (await web.get(f"/runs/{handle.id}")).text
        assert f'data-call="{handle.id}/{call}/doubt-1"' in page and "in_doubt" in page
        listed = (await web.get("/?waiting=1")).text
        assert f"pay ({call}) in doubt" in listed

        csrf = csrf_of(inbox)
        action = f"/runs/{handle.id}/calls/{call}/resolve"
        form = {"csrf": csrf, "doubt": "1", "by": "dana"}
        bad = await web.post(action, data={**form, "choice": "result", "result": "{receipt: 9"}, headers=JSON)
        assert bad.status_code == 400 and "result is not valid JSON" in bad.json()["message"], bad.text
        no_reason = await web.post(action, data={**form, "choice": "fail", "reason": " "}, headers=JSON)
        assert no_reason.status_code == 400 and "give a reason" in no_reason.json()["message"]
        status = await status_of(handle)
        assert status.phase == "in_doubt" and not status.resolutions  # nothing recorded

        async with web.stream("GET", "/inbox/events") as events:
            lines = events.aiter_lines()
            assert f"{handle.id}/{call}/doubt-1" in (await next_calls(lines))["keys"]
            done = await web.post(action, data={**form, "choice": "result", "result": '{"receipt": 9}'}, headers=JSON)
            assert done.status_code == 200, done.text
            assert done.json()["message"] == f"{call} has the given result: resolved by dana"
            gone = await asyncio.wait_for(next_calls(lines), 3)  # within a second or so, on every open inbox
            assert f"{handle.id}/{call}/doubt-1" not in gone["keys"]

        assert (await asyncio.wait_for(handle.result(), 60)).output == "erin is paid"
        again = await web.post(action, data={**form, "choice": "rerun"}, headers=JSON)
        said = again.json()["message"]
        assert again.status_code == 409 and "has ended (completed): no call of it is in doubt" in said, said
    told = {m.call_id: m for m in await transcript(handle) if isinstance(m, t.ToolMessage)}
    assert told[call].content == '{"receipt": 9}' and told[call].resolution is not None
    assert told[call].resolution.by == "dana"
    assert '{\\"receipt\\": 9}' in json.dumps(llm.requests()[-1]["body"]["messages"])  # what the model read
    assert starts(counter_file) == Counter({"pay:erin": 1})  # never run again


async def test_the_runs_page_is_newest_first(client, llm, task_queue, worker_factory):
    """The dev server's store lists running runs first; the page sorts by start time, newest first."""
    async with worker_factory(registry=Registry.from_modules(["tests.fixtures.once_agents"])):
        older = await start(
            client, task_queue, "pay", agent="careful_payer", model=script(llm, calls(("pay", {"label": "x"})))
        )
        newer = await start(client, task_queue, "hi", agent="careful_payer", model=script(llm, {"content": "hi"}))
        await newer.result()  # ended, while the older one waits for a person
        await pending(older)
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url) as web:

            async def listed() -> bool:
                page = (await web.get("/", params={"agent": "careful_payer"})).text
                return f'data-run="{older.id}"' in page and f'data-run="{newer.id}"' in page

            await wait_for(listed)
            page = (await web.get("/", params={"agent": "careful_payer"})).text
        assert page.index(f'data-run="{newer.id}"') < page.index(f'data-run="{older.id}"')
        await older.terminate("test over")


async def test_a_runs_page_links_its_child_runs_and_the_child_its_parent(client, task_queue, worker_factory, llm):
    scholar = Agent(name="scholar", model=script(llm, {"content": "Tides follow the moon."}))
    lead_model = script(llm, calls(("ask", {"input": "tides"})), {"content": "The moon, says the scholar."})
    lead = Agent(name="lead", model=lead_model, tools=[scholar.as_tool(name="ask")])
    async with worker_factory(registry=Registry(agents=[lead])):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        await handle.result()
        query = f'ParentWorkflowId="{handle.id}"'
        (child,) = [wf.id async for wf in client.list_workflows(query)]
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url) as web:
            page = (await web.get(f"/runs/{handle.id}")).text
            tree = page[page.index("<h2>Child runs</h2>") :]
            assert f'<a href="/runs/{quote(child, safe="")}">{child}</a> · scholar · completed' in tree
            child_page = (await web.get(f"/runs/{quote(child, safe='')}")).text
            assert f'<dt>parent</dt><dd><a href="/runs/{quote(handle.id, safe="")}">' in child_page


_slow: dict[str, int] = {}


@tool(once=True, timeout_seconds=1)
async def slow_pay(label: str) -> str:
    """Pay someone; the first two attempts for a label outlive their one-second bound (in doubt twice).

    Args:
        label: Whom to pay.
    """
    _slow[label] = _slow.get(label, 0) + 1
    if _slow[label] <= 2:
        await asyncio.sleep(3)
    return f"paid {label}"


async def test_a_stale_page_cannot_decide_a_doubt_that_is_no_longer_open(client, task_queue, worker_factory, llm):
    """Rerun on a page left open while the call went into doubt a second time answered "runs
    again" with the first decision's receipt, and nothing was applied. The decision names the doubt
    the person saw (the form's `doubt`); one for a doubt no longer open is refused, here and from
    the Python client, and the open doubt is still there to decide."""
    label = uuid.uuid4().hex[:8]
    model = script(llm, calls(("slow_pay", {"label": label})), {"content": "paid, by the record"})
    payer = Agent(name="slow_payer", model=model, tools=[slow_pay])
    async with (
        worker_factory(registry=Registry(agents=[payer])),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        handle = await start(client, task_queue, "pay", agent="slow_payer")

        async def in_doubt(times: int) -> bool:
            return [d.doubt for d in (await status_of(handle)).in_doubt] == [times]

        await wait_for(lambda: in_doubt(1), timeout=30)
        (doubt,) = (await status_of(handle)).in_doubt
        stale = (await web.get(f"/runs/{handle.id}")).text  # the page a person leaves open
        assert f'data-call="{handle.id}/{doubt.call_id}/doubt-1"' in stale
        assert '<input type="hidden" name="doubt" value="1">' in stale
        action = f"/runs/{handle.id}/calls/{doubt.call_id}/resolve"
        form = {"csrf": csrf_of(stale), "doubt": "1", "by": "dana", "choice": "rerun"}
        first = await web.post(action, data=form, headers=JSON)
        assert first.status_code == 200 and first.json()["message"] == f"{doubt.call_id} runs again: resolved by dana"

        await wait_for(lambda: in_doubt(2), timeout=30)  # the rerun ended without a result too
        again = await web.post(action, data={**form, "by": "erin"}, headers=JSON)  # Rerun on the stale page
        assert again.status_code == 409, again.text
        message = again.json()["message"]
        assert f"call {doubt.call_id} is in doubt for time 2, not 1" in message and "dana" in message, message
        run = AgentClient(client).get(handle.id)
        with pytest.raises(DecisionRefused, match="in doubt for time 2, not 1"):
            await run.resolve(doubt.call_id, "rerun", by="erin", doubt=1)
        status = await status_of(handle)
        assert [(r.doubt, r.by) for r in status.resolutions] == [(1, "dana")]  # nothing more applied
        assert [d.doubt for d in status.in_doubt] == [2]  # still open, to decide

        fresh = (await web.get(f"/runs/{handle.id}")).text
        assert '<input type="hidden" name="doubt" value="2">' in fresh
        given = {**form, "doubt": "2", "choice": "result", "result": '"paid, says the bank"'}
        done = await web.post(action, data=given, headers=JSON)
        assert done.status_code == 200, done.text
        twice = await web.post(action, data=given, headers=JSON)  # a second click: refused, not a receipt
        # Refused as decided already, or, when the run has already answered, as ended: either way no receipt.
        said = twice.json()["message"]
        assert twice.status_code == 409, twice.text
        assert "dana resolved it (result)" in said or "no call of it is in doubt" in said, said
        assert (await asyncio.wait_for(handle.result(), 60)).output == "paid, by the record"
    assert _slow[label] == 2  # the first rerun ran; nothing else did
