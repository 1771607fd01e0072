"""An eval paused on its budget in the console: the inbox lists it with what it spent against its
limit and a link to its page, whose raise form (through the client's `EvalHandle.resume`) lets it
go on, in a real browser (Debian's Chromium through Playwright, as tests/test_console_ui.py); over
HTTP, the raise's POST refuses a form without the CSRF token, bad numbers (400), a kind of budget
the eval has not and an eval not paused (409), each in one line, nothing recorded. The row of one
no worker answers for, from its search attributes alone, without a server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.evals import EvalHandle, EvalRow
from durable_agent_runner.console import views
from durable_agent_runner.console.eval_pauses import EvalPause, spent_line
from durable_agent_runner.workflows import types as t
from tests.console_helpers import serve_console
from tests.helpers import script
from tests.test_console_http import csrf_of
from tests.test_console_ui import IMG, SECOND, browser, open_page  # noqa: F401  (the fixture: one Chromium)
from tests.test_evals_run import dataset

JSON = {"Accept": "application/json"}


@contextlib.asynccontextmanager
async def paused_eval(client: Any, task_queue: str, llm: Any) -> AsyncIterator[EvalHandle]:
    """An eval of 4 cases, 1,000 tokens each, with a budget of 2,500 tokens: it pauses after 3
    (as tests/test_evals_run.py's). Cancelled at the end if a test left it unfinished, so no other
    test's inbox lists it."""
    model = script(llm, {"content": "alpha beta", "usage": {"prompt_tokens": 500, "completion_tokens": 500}})
    agents = AgentClient(client, task_queue=task_queue)
    ev = await agents.evals.start(
        dataset(4, custom=False), agent="scripted", model=model, concurrency=1, budget_tokens=2500, on_budget="pause"
    )
    try:
        yield ev
    finally:
        with contextlib.suppress(Exception):
            if (await ev.status()).phase not in ("completed", "failed", "cancelled"):
                await ev.cancel()


async def until_paused(ev: EvalHandle) -> None:
    async with asyncio.timeout(30):
        while (await ev.status()).phase != "paused":
            await asyncio.sleep(0.1)


async def test_an_eval_paused_on_its_budget_is_in_the_inbox_and_raised_on_its_page(
    browser, client, task_queue, llm, worker_factory
):
    async with worker_factory(), serve_console(client, task_queue) as url, paused_eval(client, task_queue, llm) as ev:
        inbox = await open_page(browser, f"{url}/inbox")  # open before it pauses: the row joins live
        row = inbox.locator(f'[data-call^="eval/{ev.eval_id}/budget"]')
        await row.wait_for(timeout=30 * SECOND)
        text = await row.inner_text()
        assert "paused on its budget" in text and "of 2,500 tokens spent" in text and "3/4 cases done" in text, text
        await inbox.screenshot(path=str(IMG / "console-inbox-eval.png"), full_page=True)
        await row.get_by_role("link", name="Raise its budget on its page").click()
        await inbox.wait_for_url(f"{url}/evals/{ev.eval_id}")
        form = inbox.locator("form.raise")
        await form.get_by_text("Paused on its budget: raise it to go on").wait_for()
        assert await form.locator('input[name="add_usd"]').count() == 0  # it has no USD budget
        await form.locator('input[name="add_tokens"]').fill("5,000")  # not digits only: refused, nothing raised
        await form.get_by_role("button", name="Raise and resume").click()
        # In the form, or in the flash line if the page's live update replaced the form meanwhile.
        refused = inbox.locator(".msg.bad", has_text="add tokens must be a whole number")
        await refused.first.wait_for(timeout=10 * SECOND)
        assert (await ev.status()).phase == "paused"
        await form.locator('input[name="add_tokens"]').fill("5000")
        await form.get_by_role("button", name="Raise and resume").click()
        await inbox.locator("#eval .phase.completed", has_text="completed").first.wait_for(timeout=60 * SECOND)
        assert "4/4 done · 4 passed" in await inbox.locator("#progress").inner_text()
        assert await inbox.locator("form.raise").count() == 0  # no longer paused: no raise form
        await inbox.goto(f"{url}/inbox")
        assert await inbox.locator(f'[data-call^="eval/{ev.eval_id}/"]').count() == 0
        final = await ev.wait(30)
    assert final.phase == "completed" and final.done == 4 and all(r.end == "completed" for r in final.results)
    assert final.budget is not None and final.budget.tokens is not None and final.budget.tokens.limit == 7500


async def test_the_raise_refuses_no_csrf_bad_numbers_and_an_eval_not_paused(client, task_queue, llm, worker_factory):
    async with (
        worker_factory(),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as web,
        paused_eval(client, task_queue, llm) as ev,
    ):
        await until_paused(ev)
        listed = ""
        for _ in range(100):  # the visibility store is a moment behind the eval
            listed = (await web.get("/inbox")).text
            if f'data-call="eval/{ev.eval_id}/budget-2500"' in listed:
                break
            await asyncio.sleep(0.2)
        assert f'<a href="/evals/{ev.eval_id}">Raise its budget on its page</a>' in listed, listed[-3000:]
        assert "3,000 of 2,500 tokens spent" in listed
        page = (await web.get(f"/evals/{ev.eval_id}")).text
        action = f"/evals/{ev.eval_id}/resume"
        assert f'action="{action}"' in page and 'name="add_tokens"' in page and 'name="add_usd"' not in page
        csrf = csrf_of(page)

        async def raise_(**fields: str) -> httpx.Response:
            return await web.post(action, data={"csrf": csrf, **fields}, headers=JSON)

        no_csrf = await web.post(action, data={"add_tokens": "5000"}, headers=JSON)
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
        for bad, status, why in (
            ({}, 400, "add tokens or USD to raise the eval's budget"),
            ({"add_tokens": "١٠٠٠"}, 400, "add tokens must be a whole number, written with the digits 0-9"),
            ({"add_tokens": "-5"}, 400, "add tokens must be a whole number"),
            ({"add_tokens": "0"}, 400, "add_tokens"),  # the client's bound: at least 1
            ({"add_tokens": "2000000000"}, 400, "add_tokens"),  # and at most 10**9
            ({"add_usd": "1e3"}, 400, "add USD must be a decimal number of dollars"),
            ({"add_usd": "2.50"}, 409, "has no cost budget to raise: add tokens"),
        ):
            refused = await raise_(**bad)
            assert refused.status_code == status and why in refused.json()["message"], (bad, refused.text)
        assert (await ev.status()).phase == "paused"  # nothing raised
        raised = await raise_(add_tokens="5000")
        assert raised.status_code == 200, raised.text
        said = raised.json()["message"]
        assert said == f"eval {ev.eval_id} resumed, its budget raised by 5,000 tokens: 3,000 of 7,500 tokens spent"
        await ev.wait(60)
        again = await raise_(add_tokens="5000")
        assert again.status_code == 409
        assert again.json()["message"] == f"eval {ev.eval_id} is completed, not paused on its budget: nothing to raise"
        assert (await web.post("/evals/no-such-eval/resume", data={"csrf": csrf, "add_tokens": "1"})).status_code == 404


@pytest.mark.pure
def test_a_paused_eval_no_worker_answers_for_is_listed_with_what_it_spent():
    """The inbox's row from the visibility store alone (no worker answered in time), and the spent
    line of a budget of both kinds."""
    row = EvalRow(eval_id="eval-a/b", status="running", agent="support", started_at="2026-01-02T03:04:05+00:00")
    shown = views.call_row(EvalPause(row.model_copy(update={"tokens": 3000, "usd": 0.25}), None), with_run=True)
    assert 'data-call="eval/eval-a/b/budget-"' in shown and '<a href="/evals/eval-a%2Fb">' in shown
    assert "3,000 tokens · $0.2500 spent (its limit: no worker answered in time)" in shown
    line = t.BudgetLine
    budget = t.BudgetStatus(
        tokens=line(limit=2500, spent=3000, reserved=0, left=0), usd=line(limit=1, spent=0.5, reserved=0, left=0.5)
    )
    assert spent_line(budget) == "3,000 of 2,500 tokens spent · $0.5000 of $1.0000 spent"
    assert spent_line(None) == "no budget"
