"""The web console over plain HTTP: who may use it (the token, the Host check, CSRF) and how it
answers bad input (an unknown run, a decided call, oversized or non-UTF-8 forms): a clear line
and a 4xx, never a stack trace. The browser's scenarios are in tests/test_console_ui.py."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from durable_agent_runner import Agent, AgentClient, Registry
from durable_agent_runner.client.errors import RunFailed
from durable_agent_runner.console.data import PAGE_SIZE
from durable_agent_runner.console.security import MAX_FORM_BYTES
from durable_agent_runner.workflows import types as t
from tests.budget_runs import lead_with_a_napping_child, pausing_agent
from tests.console_helpers import pending, serve_console
from tests.fixtures.agents import send
from tests.helpers import calls, script, start
from tests.test_agents import child_runs

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "console-test-token-0123456789"


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf" content="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def test_a_console_beyond_this_machine_refuses_to_start_without_a_token():
    env = {k: v for k, v in os.environ.items() if k != "CONSOLE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "client.py", "console", "--host", "0.0.0.0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without CONSOLE_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr


async def test_with_a_token_every_request_needs_it(client, task_queue):
    async with serve_console(client, task_queue, token=TOKEN) as url, httpx.AsyncClient(base_url=url) as web:
        refused = await web.get("/inbox")
        assert refused.status_code == 401 and "needs its token" in refused.text
        assert (await web.get("/inbox", headers={"X-Console-Token": "wrong" * 5})).status_code == 401
        assert (await web.get("/inbox", headers={"X-Console-Token": TOKEN})).status_code == 200
        assert (await web.get("/?token=nope")).status_code == 401
        link = await web.get(f"/inbox?token={TOKEN}")  # the printed link sets a cookie, then drops the token
        assert link.status_code == 303 and link.headers["location"] == "/inbox"
        assert "console_token" in link.headers["set-cookie"] and "HttpOnly" in link.headers["set-cookie"]
        assert (await web.get("/inbox")).status_code == 200  # the cookie now carries it


async def test_host_check_and_csrf(client, task_queue):
    async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url) as web:
        rebound = await web.get("/", headers={"Host": "evil.example:8237"})
        assert rebound.status_code == 421
        page = (await web.get("/inbox")).text
        action = "/runs/some-run/calls/call_1/decide"
        no_csrf = await web.post(action, data={"verdict": "approve"})
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
        cross = await web.post(
            action, data={"verdict": "approve", "csrf": csrf_of(page)}, headers={"Origin": "http://evil.example"}
        )
        assert cross.status_code == 403
        unknown = await web.post(action, data={"verdict": "approve", "csrf": csrf_of(page)})
        assert unknown.status_code == 404 and "no run with id &#x27;some-run&#x27;" in unknown.text
        assert (await web.get("/runs/no-such-run")).status_code == 404
        slashed = await web.get("/runs/parent%2Fwriter-1")  # run_agent's children: PARENT/AGENT-N
        assert slashed.status_code == 404 and "no run with id &#x27;parent/writer-1&#x27;" in slashed.text
        get_action = await web.get(action)  # a GET never acts: no such method, or no such page
        assert get_action.status_code in (404, 405)
        # A mistyped address is one of the console's pages, its nav and one line, not a bare "Not Found".
        typo = await web.get("/schedule/<b>x</b>")
        assert typo.status_code == 404 and 'href="/inbox"' in typo.text, typo.text
        assert "no page at /schedule/&lt;b&gt;x&lt;/b&gt;: see Runs, Inbox, Schedules or Evals" in typo.text
        posted = await web.post("/inbox", data={"csrf": csrf_of(page)}, headers={"Accept": "application/json"})
        assert posted.status_code == 405 and posted.json() == {
            "ok": False,
            "message": "POST /inbox is not an action of the console",
        }


async def test_bad_input_gets_a_clear_4xx(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    async with worker_factory(), serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url) as web:
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        csrf = csrf_of((await web.get("/inbox")).text)
        json_ = {"Accept": "application/json"}
        action = f"/runs/{handle.id}/calls/{waiting.call_id}/decide"

        big = await web.post(action, data={"verdict": "reject", "reason": "x" * MAX_FORM_BYTES, "csrf": csrf})
        assert big.status_code == 413
        raw = b"verdict=approve&reason=%FF%FE&csrf=" + csrf.encode()
        bad_utf8 = await web.post(action, content=raw, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert bad_utf8.status_code == 400 and "not UTF-8" in bad_utf8.text
        no_reason = await web.post(action, data={"verdict": "reject", "csrf": csrf}, headers=json_)
        assert no_reason.status_code == 400 and "give a reason" in no_reason.json()["message"]
        edit = f"/runs/{handle.id}/calls/{waiting.call_id}/edit"
        bad_json = await web.post(edit, data={"arguments": "{not json", "csrf": csrf}, headers=json_)
        assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["message"]

        ok = await web.post(action, data={"verdict": "approve", "csrf": csrf, "by": "carol"}, headers=json_)
        assert ok.status_code == 200 and ok.json() == {
            "ok": True,
            "message": f"{waiting.call_id} approved by carol",
            "redirect": None,
        }
        await handle.result()
        again = await web.post(action, data={"verdict": "reject", "reason": "late", "csrf": csrf}, headers=json_)
        assert again.status_code == 409 and "no call of it is pending" in again.json()["message"]
        for response in (big, bad_utf8, no_reason, bad_json, again):
            assert "Traceback" not in response.text
        page = await web.get(f"/runs/{handle.id}")
        assert page.status_code == 200 and "approved by carol" in page.text and "sent it" in page.text


async def test_the_runs_page_pages_through_the_visibility_store(client, task_queue):
    """Usable with many runs: one page of PAGE_SIZE from the server's store, then a link to the
    next; every run is on exactly one page and none is loaded beyond the page asked for."""

    agent = f"pager-{uuid.uuid4().hex[:8]}"
    total = 2 * PAGE_SIZE + 7
    attrs = TypedSearchAttributes([SearchAttributePair(t.SA_AGENT, agent)])
    ids = {f"{agent}-{i}" for i in range(total)}
    await asyncio.gather(*(  # no worker takes these: only their visibility records matter here
        client.start_workflow(t.WORKFLOW_NAME, t.RunInput(prompt="x", agent=agent), id=run_id,
                              task_queue=f"{task_queue}-none", search_attributes=attrs)
        for run_id in ids
    ))  # fmt: skip
    async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url) as web:
        for _ in range(100):  # the store is eventually consistent: wait until it lists them all
            if (await client.count_workflows(f'{t.SA_AGENT.name}="{agent}"')).count == total:
                break
            await asyncio.sleep(0.2)
        seen: list[str] = []
        link = f"/?agent={agent}"
        pages = 0
        while link:
            page = (await web.get(link)).text
            rows = re.findall(r'<a href="/runs/([^"]+)">', page)
            assert 0 < len(rows) <= PAGE_SIZE
            seen += rows
            pages += 1
            more = re.search(r'<a class="next" href="([^"]+)">', page)
            link = html.unescape(more.group(1)) if more else ""
        assert pages == 3 and sorted(seen) == sorted(ids)
        forged = await web.get(f"/?agent={agent}&page=not-a-token!")
        assert 400 <= forged.status_code < 500 and "not one this console made" in forged.text
    for run_id in ids:
        await client.get_workflow_handle(run_id).terminate()


async def test_numbers_are_ascii_digits_and_bad_links_or_filters_get_400(client, task_queue):
    """int() reads '٣' as 3 and isdigit() passes '²': every number the console reads is the digits
    0-9 only, refused in one line otherwise. A forged page link or a bad filter is a 400, at once."""
    json_ = {"Accept": "application/json"}
    async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=30) as web:
        csrf = csrf_of((await web.get("/inbox")).text)
        run = "/runs/some-run"
        for path, form in (
            (f"{run}/fork", {"at_turn": "٣"}),
            (f"{run}/fork", {"at_turn": "²"}),
            (f"{run}/edit", {"op": "drop", "index": "٣"}),
            (f"{run}/edit", {"op": "text", "index": "١", "text": "x"}),
            (f"{run}/edit", {"op": "insert", "index": "３", "text": "x"}),
            (f"{run}/calls/call_1/resolve", {"choice": "rerun", "doubt": "٢"}),
            (f"{run}/calls/call_1/edit", {"int.amount": "٣٠"}),
            (f"{run}/calls/call_1/edit", {"int.amount": "1_000"}),
            (f"{run}/calls/call_1/edit", {"num.rate": "١.٥"}),
        ):
            refused = await web.post(path, data={**form, "csrf": csrf}, headers=json_)
            assert refused.status_code == 400, (form, refused.text)
            assert "digits 0-9" in refused.json()["message"], refused.text
        # a text longer than its input's maxlength (a request the page did not make) was cut unsaid
        for path, form, said in (
            (f"{run}/pause", {"reason": "r" * 1001}, "reason: at most 1,000 characters, not 1,001"),
            (f"{run}/fork", {"at_turn": "1", "prompt": "p" * 4001}, "prompt: at most 4,000 characters, not 4,001"),
            (f"{run}/case", {"dataset": "d", "expected": "e" * 4001}, "expected: at most 4,000 characters"),
            (f"{run}/pause", {"by": "b" * 201}, "by: at most 200 characters, not 201"),
            (f"{run}/fork", {"at_turn": "0"}, "fork at turn N: N must be a whole number from 1"),
        ):
            refused = await web.post(path, data={**form, "csrf": csrf}, headers=json_)
            assert refused.status_code == 400 and said in refused.json()["message"], (form, refused.text)
        for since in ("٣", "²", "-1", "1e3"):
            bad = await web.get(f"{run}/events", params={"since": since})
            assert bad.status_code == 400 and "digits 0-9" in bad.text, (since, bad.text)

        loop = asyncio.get_running_loop()
        for token in ("AAAA", "YWJj", "A" * 100, "not-a-token!", "é", "A" * 5000):
            began = loop.time()
            forged = await web.get("/", params={"page": token})
            assert forged.status_code == 400 and "not one this console made" in forged.text, (token, forged.text)
            assert loop.time() - began < 2  # refused here: Temporal is not asked (it retried a forged one ~10 s)
        for query, says in (
            ({"phase": "bogus"}, "phase must be one of"),
            ({"agent": "a\x00b"}, "agent must be a name"),
            ({"agent": "a" * 201}, "agent must be a name"),
        ):
            bad = await web.get("/", params=query)
            assert bad.status_code == 400 and says in bad.text, (query, bad.status_code)
            assert "Traceback" not in bad.text


async def test_a_stream_answers_at_once_and_holds_no_slot_past_its_run(client, task_queue):
    """An unknown run's stream is a 404 at once (it never answered and held a slot 30 min); an
    ended run's gives its last state and `end`; a run that goes away while followed ends its stream."""
    kept: list[Any] = []
    async with (
        serve_console(client, task_queue, keep=kept) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as web,
    ):
        (console,) = kept
        unknown = await web.get("/runs/no-such-run/events")
        assert unknown.status_code == 404 and "no run with id" in unknown.text
        assert console.streams == 0

        ended = await client.start_workflow(
            t.WORKFLOW_NAME, t.RunInput(prompt="x"), id=f"ended-{uuid.uuid4().hex[:8]}", task_queue=f"{task_queue}-none"
        )
        await ended.terminate("test")
        over = await web.get(f"/runs/{ended.id}/events")  # its last state, then `end`, within seconds
        assert over.status_code == 200 and over.text.rstrip().endswith("event: end\ndata: {}")
        assert 'id=\\"status\\">terminated' in over.text and console.streams == 0  # (HTML in JSON)

        gone = await client.start_workflow(
            t.WORKFLOW_NAME, t.RunInput(prompt="x"), id=f"gone-{uuid.uuid4().hex[:8]}", task_queue=f"{task_queue}-none"
        )
        async with web.stream("GET", f"/runs/{gone.id}/events", timeout=30) as stream:
            lines = stream.aiter_lines()
            assert (await asyncio.wait_for(anext(lines), 5)).startswith(":")  # answered at once
            assert console.streams == 1
            await client.workflow_service.delete_workflow_execution(
                DeleteWorkflowExecutionRequest(
                    namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=gone.id)
                )
            )
            seen = []
            async with asyncio.timeout(20):
                async for line in lines:
                    seen.append(line)
            assert "event: end" in seen, seen
        assert console.streams == 0


async def test_a_run_page_shows_its_budget_and_its_approval_wait_once(client, task_queue, worker_factory, llm):
    """The run's budget as status has it (limit, spent, left), and a waterfall where the time the
    call waited for a person is waiting, not tool time too."""
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    careful = Agent(
        name="careful_sender", model=model, tools=[send], approvals={"send": "always"},
        token_budget=50_000, cost_budget_usd=2.5,
    )  # fmt: skip
    registry = Registry(agents=[careful])
    async with (
        worker_factory(registry=registry),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        handle = await start(client, task_queue, "send it", agent="careful_sender")
        (waiting,) = await pending(handle)
        status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        spent = status.usage.total_tokens
        assert status.budget is not None and spent > 0
        shown = (await web.get(f"/runs/{handle.id}")).text
        assert f"{spent:,} spent · 0 reserved · <b>{50_000 - spent:,} left</b> of 50,000 tokens" in shown, shown
        assert "left</b> of $2.5000" in shown
        await asyncio.sleep(2.0)  # a person takes two seconds to decide
        csrf = csrf_of((await web.get("/inbox")).text)
        action = f"/runs/{handle.id}/calls/{waiting.call_id}/decide"
        assert (await web.post(action, data={"verdict": "approve", "csrf": csrf})).status_code == 200
        await handle.result()
        page = (await web.get(f"/runs/{handle.id}")).text
    found = re.search(r"turn 1: model ([0-9.]+) s · tools ([0-9.]+) s · waiting ([0-9.]+) s", page)
    assert found, page[page.find("<h2>Turns") :][:800]
    _, tools, waited = (float(x) for x in found.groups())
    assert waited >= 2.0 and tools < 1.0, found.group(0)  # was tools ≥ 2 s too: the wait counted twice


async def test_the_edit_form_refuses_an_empty_required_field_and_shows_long_text_in_a_textarea(
    client, task_queue, worker_factory, llm
):
    to = "acct-1\nbranch 7, second floor"  # a multi-line value: a textarea, not one line
    model = script(llm, calls(("transfer", {"amount": 500, "to": to})), {"content": "paid"})
    json_ = {"Accept": "application/json"}
    async with (
        worker_factory(),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        handle = await start(client, task_queue, "pay", agent="guarded", model=model)
        (waiting,) = await pending(handle)
        page = (await web.get(f"/runs/{handle.id}")).text
        form = page[page.index('<form class="act edit-args"') :]
        form = form[: form.index("</form>")]
        assert '<input name="int.amount" value="500" inputmode="numeric" required>' in form
        assert f'<textarea name="str.to" rows="3" required>{html.escape(to)}</textarea>' in form
        edit = f"/runs/{handle.id}/calls/{waiting.call_id}/edit"
        csrf = csrf_of(page)
        for fields, says in (
            ({"int.amount": "", "str.to": "acct-2"}, "amount is required: give a value"),
            ({"int.amount": "90", "str.to": "  "}, "to is required: give a value"),
            ({"int.amount": "", "str.to": ""}, "amount, to are required: give a value"),
            ({"str.to": "acct-2"}, "amount is required: give a value"),  # a field left out of the form
        ):
            refused = await web.post(edit, data={**fields, "csrf": csrf}, headers=json_)
            assert refused.status_code == 400 and refused.json()["message"] == says, (fields, refused.text)
        assert (await pending(handle))[0].arguments == {"amount": 500, "to": to}  # nothing recorded
        done = await web.post(
            edit, data={"int.amount": "90", "str.to": "acct-2\nbranch 9", "csrf": csrf}, headers=json_
        )
        assert done.status_code == 200, done.text
        assert (await handle.result()).output == "paid"
    assert "transferred 90 to acct-2\\nbranch 9" in json.dumps(llm.requests()[-1]["body"]["messages"])


async def test_a_stream_whose_page_is_gone_frees_its_slot(client, task_queue):
    """A quiet stream (a run no worker serves, that writes nothing) frees its slot as soon as its
    page closes it, not after LIFETIME."""
    kept: list[Any] = []
    waiting = await client.start_workflow(
        t.WORKFLOW_NAME, t.RunInput(prompt="x"), id=f"quiet-{uuid.uuid4().hex[:8]}", task_queue=f"{task_queue}-none"
    )
    async with serve_console(client, task_queue, keep=kept) as url, httpx.AsyncClient(base_url=url) as web:
        (console,) = kept
        async with web.stream("GET", f"/runs/{waiting.id}/events", timeout=10) as stream:
            assert (await asyncio.wait_for(anext(stream.aiter_lines()), 5)).startswith(":")
            assert console.streams == 1
        for _ in range(100):  # the page closed its stream
            if console.streams == 0:
                break
            await asyncio.sleep(0.1)
        assert console.streams == 0
    await waiting.terminate("test over")


async def test_an_approval_no_worker_takes_says_stalled_in_its_answer(client, task_queue, worker_factory, llm):
    """Approve a call whose agent's version no running worker serves: the console's answer says so
    within seconds (`stalled: …`, as `client.py approve`), not "approved" alone while the run sits
    in "running approved tools", and so does the run's page; the run goes on once such a worker
    starts."""
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent"})
    async with worker_factory():
        handle = await start(client, task_queue, "go", agent="guarded", model=model)
        (waiting,) = await pending(handle)
    async with (
        worker_factory(registry=Registry.from_modules(["examples.demo_agent"])),  # not `guarded`
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        csrf = csrf_of((await web.get("/inbox")).text)
        began = time.monotonic()
        answer = await web.post(
            f"/runs/{handle.id}/calls/{waiting.call_id}/decide",
            data={"verdict": "approve", "csrf": csrf, "by": "carol"},
            headers={"Accept": "application/json"},
        )
        took = time.monotonic() - began
        page = (await web.get(f"/runs/{handle.id}")).text  # the run's page says it too, among its facts
    assert "<dt>stalled</dt><dd>no worker serves agent &#x27;guarded&#x27; at version" in page, page[:3000]
    assert answer.status_code == 200, answer.text
    body = answer.json()
    said = f"{waiting.call_id} approved by carol\nstalled: no worker serves agent 'guarded' at version"
    assert body["ok"] and body["message"].startswith(said), body
    assert "for a tool call" in body["message"] and took < 15, (took, body)
    (wait,) = body["unserved"]
    assert wait["waiting"] == "a tool call" and wait["queue"].startswith(f"{task_queue}@guarded@")
    async with worker_factory():  # a worker that holds the agent's version: the call runs
        assert (await asyncio.wait_for(handle.result(), 30)).output == "sent"


async def test_a_run_paused_on_its_budget_is_raised_from_the_console(client, task_queue, worker_factory, llm):
    """Resume on a run paused on its budget: the form has the raise's fields; no raise is refused
    with what to do, bad numbers are 400 (ASCII digits; USD a decimal), a raise goes on."""
    async with (
        worker_factory(registry=pausing_agent(llm)),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        handle = await start(client, task_queue, "Explain tides", agent="careful")
        async with asyncio.timeout(30):
            while (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).paused is None:
                await asyncio.sleep(0.1)
        page = (await web.get(f"/runs/{handle.id}")).text
        assert "Paused on its budget: raise it to go on" in page and 'name="add_tokens"' in page, page
        assert 'name="add_usd"' not in page  # it has no USD budget
        csrf, json_ = csrf_of(page), {"Accept": "application/json"}
        action = f"/runs/{handle.id}/resume"

        async def resume(**fields: str) -> httpx.Response:
            return await web.post(action, data={"csrf": csrf, "by": "carol", **fields}, headers=json_)

        assert (await web.post(action, data={"add_tokens": "1000"}, headers=json_)).status_code == 403  # no CSRF
        plain = await resume()
        assert plain.status_code == 409
        assert plain.json()["message"].startswith("the run is paused on its budget: add tokens or USD to resume it")
        for bad, why in (
            ({"add_tokens": "١٠٠٠"}, "add tokens must be a whole number, written with the digits 0-9"),
            ({"add_tokens": "-5"}, "add tokens must be a whole number"),
            ({"add_tokens": "0"}, "add_tokens"),  # the client's bound: at least 1
            ({"add_tokens": "2000000000"}, "add_tokens"),  # and at most 10**9
            ({"add_usd": "1e3"}, "add USD must be a decimal number of dollars"),
            ({"add_usd": "٢.5"}, "add USD must be a decimal number of dollars"),
        ):
            refused = await resume(**bad)
            assert refused.status_code == 400 and why in refused.json()["message"], (bad, refused.text)
        no_usd = await resume(add_usd="2.50")
        assert no_usd.status_code == 409 and no_usd.json()["message"].startswith("the raise is refused: "), no_usd.text
        assert (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).paused is not None  # nothing recorded
        raised = await resume(add_tokens="1000")
        assert raised.status_code == 200, raised.text
        assert raised.json()["message"] == "resumed by carol, its budget raised by 1,000 tokens"
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.output == "Tides follow the moon."


async def test_a_session_whose_budget_is_spent_is_raised_from_its_page(client, task_queue, worker_factory, llm):
    """A session whose cap is spent (its last message failed) says so on its page, with a raise
    form of its own (2.0.4: a session waiting for its next message takes a raise alone); an empty
    raise is 400, a raise says the session waits on, and the next message sent there is answered."""
    agents = AgentClient(client, task_queue=task_queue)
    async with (
        worker_factory(),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        model = script(llm, {"content": "one"}, {"content": "two"})
        chat = await agents.start_session("chatter", model=model, budget_tokens=1)
        assert await chat.ask("first", wait=30) == "one"  # its first call spends the cap
        with pytest.raises(RunFailed, match="TokenBudgetExceeded"):
            await chat.ask("second", wait=30)
        page = (await web.get(f"/runs/{chat.id}")).text
        said = (
            '<dt>last message</dt><dd><span class="refusal">message 2 failed: TokenBudgetExceeded: token budget spent'
        )
        assert said in page, page[:4000]
        assert "Its budget is spent: raise it for the next message" in page and 'name="between"' in page
        assert 'action="/runs/' + chat.id + '/resume"' in page and "<button>Pause</button>" in page
        csrf, json_ = csrf_of(page), {"Accept": "application/json"}

        async def raise_it(**fields: str) -> httpx.Response:
            form = {"csrf": csrf, "by": "carol", "between": "1", **fields}
            return await web.post(f"/runs/{chat.id}/resume", data=form, headers=json_)

        empty = await raise_it(add_tokens="")
        assert empty.status_code == 400 and empty.json()["message"] == "add tokens or USD to raise its budget"
        no_usd = await raise_it(add_usd="1")
        assert no_usd.status_code == 409 and no_usd.json()["message"].startswith("the raise is refused: "), no_usd.text
        raised = await raise_it(add_tokens="100000")
        assert raised.status_code == 200, raised.text
        said = "budget raised by 100,000 tokens by carol; the session waits for its next message"
        assert raised.json()["message"] == said
        page = (await web.get(f"/runs/{chat.id}")).text
        assert "message 2 failed" in page and "Raise its budget: " in page  # not spent now; the failure stays said
        message = {"csrf": csrf, "by": "carol", "text": "third"}
        sent = await web.post(f"/runs/{chat.id}/send", data=message, headers=json_)
        assert sent.status_code == 200 and sent.json()["message"] == "message 3 sent", sent.text
        async with asyncio.timeout(30):
            while (status := await chat.status()).session is None or status.session.answered < 3:
                await asyncio.sleep(0.1)
        assert status.session.last is not None and status.session.last.output == "two"
        page = (await web.get(f"/runs/{chat.id}")).text
        assert "last message" not in page and "failed:" not in page  # the last message was answered
        await chat.end()


async def test_a_childs_raise_beyond_its_parents_grant_is_refused_plainly(client, task_queue, worker_factory, llm):
    """A child run paused by a person and resumed from the console with a raise beyond what its
    parent granted it: refused with the run's own words, nothing recorded; a raise within it goes on."""

    released = asyncio.Event()
    lead = lead_with_a_napping_child(llm, released)
    async with (
        worker_factory(registry=Registry(agents=[lead])),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
    ):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        async with asyncio.timeout(30):
            while not (children := await child_runs(handle)):
                await asyncio.sleep(0.1)
            child = client.get_workflow_handle(children[0])
            while (await child.query(t.STATUS_QUERY, result_type=t.RunStatus)).phase != "running_tools":
                await asyncio.sleep(0.1)
            csrf, json_ = csrf_of((await web.get("/inbox")).text), {"Accept": "application/json"}
            base = f"/runs/{children[0]}"
            paused = await web.post(f"{base}/pause", data={"csrf": csrf, "by": "carol"}, headers=json_)
            assert paused.status_code == 200, paused.text
            released.set()  # the tool ends; the child pauses before its next model call
            while (await child.query(t.STATUS_QUERY, result_type=t.RunStatus)).paused is None:
                await asyncio.sleep(0.1)
        page = (await web.get(base)).text
        assert "Raise its budget: " in page and 'name="add_tokens"' in page
        huge = await web.post(f"{base}/resume", data={"csrf": csrf, "add_tokens": "1000000000"}, headers=json_)
        assert huge.status_code == 409, huge.text
        said = huge.json()["message"]
        assert said.startswith("the raise is refused: a child run's budget comes out of its parent's"), said
        assert "its parent granted it 19900 tokens and it has 500: it may be raised by at most 19400 tokens" in said
        assert (await child.query(t.STATUS_QUERY, result_type=t.RunStatus)).paused is not None  # still paused
        within = await web.post(f"{base}/resume", data={"csrf": csrf, "add_tokens": "1000"}, headers=json_)
        assert within.status_code == 200 and "raised by 1,000 tokens" in within.json()["message"], within.text
        assert (await asyncio.wait_for(handle.result(), 30)).output == "done"
