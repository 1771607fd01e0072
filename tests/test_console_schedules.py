"""The console's Schedules page, over HTTP and in a real browser (Debian's Chromium through
Playwright, as tests/test_console_ui.py): each schedule with its last and next runs, Pause /
Unpause and Trigger posted with the CSRF token (refused without it or from another site), an
unknown schedule 404, and the nav's link to it."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx

from durable_agent_runner.client.agent_client import AgentClient
from tests.console_helpers import serve_console
from tests.test_console_http import csrf_of
from tests.test_console_ui import IMG, SECOND, browser, open_page  # noqa: F401  (the fixture: one Chromium)
from tests.test_schedules import until


async def made(agents: AgentClient, *, paused: bool = False) -> str:
    name = f"console-{uuid.uuid4().hex[:8]}"
    await agents.schedules.create(name, agent="demo", input="Weather in Oslo?", every="1h", paused=paused)
    await until(lambda: _listed(agents, name))  # the server's list is eventually consistent
    return name


async def _listed(agents: AgentClient, name: str) -> bool:
    return any(r.name == name for r in await agents.schedules.list())


async def _started(agents: AgentClient, name: str) -> bool:
    return bool(await agents.list(schedule=name))


async def cleanup(client: Any, agents: AgentClient, name: str) -> None:
    view = await agents.schedules.describe(name)
    for run in {r.run_id for r in view.recent} | set(view.running):
        await client.get_workflow_handle(run).terminate("test over")
    await agents.schedules.delete(name)


async def test_the_schedules_page_and_its_actions_over_http(client, task_queue):
    agents = AgentClient(client, task_queue=task_queue)
    name = await made(agents)
    try:
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=20) as web:
            page = (await web.get("/schedules")).text
            assert '<a href="/schedules">Schedules</a>' in (await web.get("/")).text
            row = re.search(rf'<tr data-schedule="{name}">.*?</tr>', page, re.S)
            assert row and "agent demo" in row[0] and "every 1h" in row[0] and "active" in row[0], page[-3000:]
            assert "/schedules/" in row[0] and f'action="/schedules/{name}/pause"' in row[0]
            action = f"/schedules/{name}/trigger"
            assert (await web.post(action, data={})).status_code == 403  # no CSRF token: nothing started
            csrf = csrf_of(page)
            evil = await web.post(action, data={"csrf": csrf}, headers={"Origin": "http://evil.example"})
            assert evil.status_code == 403
            assert (await agents.schedules.describe(name)).runs_started == 0
            json_ = {"Accept": "application/json"}
            done = await web.post(action, data={"csrf": csrf}, headers=json_)
            assert done.status_code == 200 and done.json()["message"].startswith(f"{name}: started sched-{name}-")
            paused = await web.post(f"/schedules/{name}/pause", data={"csrf": csrf, "by": "carol"}, headers=json_)
            assert paused.json() == {"ok": True, "message": f"{name} paused by carol", "redirect": "/schedules"}
            view = await agents.schedules.describe(name)
            assert view.paused and view.note == "paused by carol in the console" and view.runs_started == 1
            row = re.search(rf'<tr data-schedule="{name}">.*?</tr>', (await web.get("/schedules")).text, re.S)
            assert row and "paused" in row[0] and f"sched-{name}-" in row[0] and "Unpause" in row[0]
            # Its "runs" link: the runs page filtered to what it started (Python's list(schedule=) too).
            assert f'href="/?schedule={name}"' in row[0]
            await until(lambda: _started(agents, name))
            (started,) = await agents.list(schedule=name)
            runs_page = (await web.get("/", params={"schedule": name})).text
            assert f'data-run="{started.run_id}"' in runs_page and f'name="schedule" value="{name}"' in runs_page
            assert runs_page.count("<tr data-run=") == 1  # the filter holds: no other schedule's run, no other run
            bad_filter = await web.get("/", params={"schedule": "a b"})
            assert bad_filter.status_code == 400 and "is not a schedule name" in bad_filter.text
            await web.post(f"/schedules/{name}/unpause", data={"csrf": csrf}, headers=json_)
            assert not (await agents.schedules.describe(name)).paused
            unknown = await web.post("/schedules/never-made/trigger", data={"csrf": csrf}, headers=json_)
            assert unknown.status_code == 404 and unknown.json()["message"] == "no schedule named 'never-made'"
            bad = await web.post("/schedules/a%20b/pause", data={"csrf": csrf}, headers=json_)
            assert bad.status_code == 400 and "is not a schedule name" in bad.json()["message"]
            verb = await web.post(f"/schedules/{name}/explode", data={"csrf": csrf}, headers=json_)
            assert verb.status_code == 404
    finally:
        await cleanup(client, agents, name)


async def test_pause_and_trigger_from_the_page_in_a_browser(browser, client, task_queue):
    agents = AgentClient(client, task_queue=task_queue)
    name = await made(agents)
    try:
        async with serve_console(client, task_queue) as url:
            page = await open_page(browser, f"{url}/")
            await page.get_by_role("link", name="Schedules").click()
            row = page.locator(f'[data-schedule="{name}"]')
            await row.get_by_text("active").wait_for(timeout=10 * SECOND)
            await page.screenshot(path=str(IMG / "console-schedules.png"))
            await row.get_by_role("button", name="Pause").click()
            await row.get_by_text("paused by console-test in the console").wait_for(timeout=10 * SECOND)  # reloaded
            assert (await agents.schedules.describe(name)).paused
            await row.get_by_role("button", name="Trigger").click()
            await row.locator(".msg.good", has_text=f"started sched-{name}-").wait_for(timeout=10 * SECOND)
            await page.reload()
            link = row.locator(f'a[href^="/runs/sched-{name}-"]')
            await link.wait_for(timeout=10 * SECOND)
            await row.get_by_role("button", name="Unpause").click()
            await row.get_by_text("active").wait_for(timeout=10 * SECOND)
            assert not (await agents.schedules.describe(name)).paused
    finally:
        await cleanup(client, agents, name)
