"""The console's eval pages, over HTTP and in a real browser (Debian's Chromium through Playwright,
as tests/test_console_ui.py): `/evals` lists evals; `/evals/{id}` shows the case table with each
case's link to its run's story and the diff against the baseline, live while the eval runs."""

from __future__ import annotations

import asyncio
import re

import httpx

from durable_agent_runner.client.agent_client import AgentClient
from tests.console_helpers import serve_console
from tests.helpers import script
from tests.test_console_ui import IMG, SECOND, browser, open_page  # noqa: F401  (the fixture: one Chromium)
from tests.test_evals_run import dataset


async def test_the_eval_pages_over_http(client, task_queue, llm, worker_factory):
    agents = AgentClient(client, task_queue=task_queue)
    good, bad = script(llm, {"content": "alpha beta"}), script(llm, {"content": "alpha"})
    async with worker_factory():
        base = await agents.evals.start(dataset(4, custom=False), agent="scripted", model=good)
        await base.wait(60)
        worse = await agents.evals.start(dataset(4, custom=False), agent="scripted", model=bad, baseline=base.eval_id)
        await worse.wait(60)
        run = (await worse.status()).results[0].run_id
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=20) as web:
            assert '<a href="/evals">Evals</a>' in (await web.get("/")).text
            listed = ""
            for _ in range(50):  # the server's list is eventually consistent
                listed = (await web.get("/evals")).text
                if all(f'<tr data-eval="{ev.eval_id}">' in listed for ev in (base, worse)):
                    break
                await asyncio.sleep(0.2)
            assert f'<a href="/evals/{worse.eval_id}">{worse.eval_id}</a>' in listed
            page = (await web.get(f"/evals/{worse.eval_id}")).text
            assert 'id="eval"' in page and "data-stream" not in page  # ended: nothing live to follow
            row = re.search(r'<tr data-case="case 3">.*?</tr>', page, re.S)
            assert row and "failed" in row[0] and "Contains: output does not contain &#x27;beta&#x27;" in row[0]
            assert f'href="/runs/{run.replace("/", "%2F")}"' in page
            assert f'Against <a href="/evals/{base.eval_id}">{base.eval_id}</a>' in page
            diff = re.search(r'<tr data-diff="case 4">.*?</tr>', page, re.S)
            assert diff and "regressed" in diff[0] and "100% → 0%" in diff[0]
            assert (await web.get("/evals/no-such-eval")).status_code == 404
            other = await web.get(f"/evals/{run}")  # a case's run is a run, not an eval
            assert other.status_code == 404 and "is an agent run, not an eval" in other.text
            back = await web.get(f"/runs/{worse.eval_id}")  # and an eval is not a run
            assert back.status_code == 404 and "is an eval, not an agent run" in back.text


async def test_an_eval_page_says_when_no_worker_serves_its_agent(client, task_queue, worker_factory):
    """An eval of an agent no worker serves: its page says so within seconds (`stalled: …`, as
    `client.py eval status` says it), not a silent 0/N; once the eval has ended, it says nothing."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():  # serves the eval's queue, not the agent
        ev = await agents.evals.start(dataset(2, custom=False), agent="ghost")
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=20) as web:
            page = ""
            for _ in range(60):  # GRACE (3 s) before a wait counts as not taken
                page = (await web.get(f"/evals/{ev.eval_id}")).text
                if "stalled:" in page:
                    break
                await asyncio.sleep(0.5)
            assert "stalled: no worker serves agent &#x27;ghost&#x27; for the eval&#x27;s start" in page, page
            assert f"nothing polls task queue {task_queue}@ghost" in page
            await ev.cancel()
            ended = '<span class="phase cancelled">cancelled</span>'  # the page's phase, not its style sheet's
            for _ in range(60):
                page = (await web.get(f"/evals/{ev.eval_id}")).text
                if ended in page:
                    break
                await asyncio.sleep(0.5)
            assert ended in page and "stalled:" not in page


async def test_an_eval_page_follows_it_live_in_a_browser(browser, client, task_queue, llm, worker_factory):
    agents = AgentClient(client, task_queue=task_queue)
    model = script(llm, {"content": "alpha beta"})
    llm.set_latency(700)
    try:
        async with worker_factory(), serve_console(client, task_queue) as url:
            ev = await agents.evals.start(dataset(6, custom=False), agent="scripted", model=model, concurrency=2)
            page = await open_page(browser, f"{url}/evals/{ev.eval_id}")
            assert await page.locator("body").get_attribute("data-stream")  # running: the page is live
            await page.locator("#eval .phase.completed", has_text="completed").first.wait_for(timeout=60 * SECOND)
            await page.locator('#eval tr[data-case="case 6"]').wait_for(timeout=10 * SECOND)
            assert await page.locator("#eval tr[data-case]").count() == 6
            assert "6/6 done · 6 passed" in await page.locator("#progress").inner_text()
            await page.screenshot(path=str(IMG / "console-eval.png"))
            await page.goto(f"{url}/")
            await page.get_by_role("link", name="Evals").click()
            await page.get_by_role("link", name=ev.eval_id).click()
            await page.locator('#eval tr[data-case="case 1"] a[href^="/runs/"]').click()
            await page.get_by_text("alpha beta").first.wait_for(timeout=10 * SECOND)  # the case's run story
    finally:
        llm.set_latency(0)
