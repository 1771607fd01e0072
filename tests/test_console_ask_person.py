"""`ask_person` in the console: the question shows in the inbox and on the run's page with a
button per choice (or a text box); a choice outside the list is refused inline with nothing
recorded; a choice's button answers it, the row leaves the inbox and the model reads the choice."""

from __future__ import annotations

import asyncio

import httpx

from durable_agent_runner import Agent, Registry, ask_person
from durable_agent_runner.workflows import types as t
from tests.console_helpers import serve_console
from tests.helpers import calls, script, start
from tests.test_ask_person import DAYS, question, status, tool_results_sent
from tests.test_console_http import csrf_of
from tests.test_durability import wait_for

JSON = {"Accept": "application/json"}


async def test_a_question_is_answered_from_the_inbox(client, task_queue, worker_factory, llm):
    model = script(
        llm, calls(("ask_person", DAYS)), calls(("ask_person", {"question": "Any note?"})), {"content": "Done."}
    )
    registry = Registry(agents=[Agent(name="asker", tools=[ask_person])])
    async with worker_factory(registry=registry):
        handle = await start(client, task_queue, "Book it", agent="asker", model=model)
        asked = await question(handle)
        key = f"{handle.id}/{asked.call_id}/question"
        async with serve_console(client, task_queue) as url, httpx.AsyncClient(base_url=url, timeout=30) as web:

            async def listed() -> bool:
                return f'data-call="{key}"' in (await web.get("/inbox")).text

            await wait_for(listed)
            inbox = (await web.get("/inbox")).text
            row = inbox[inbox.index(f'data-call="{key}"') :]
            row = row[: row.index("</section>")]
            assert "Which day suits the team?" in row and "<code>ask_person</code>" in row
            for n, choice in enumerate(DAYS["choices"], 1):
                assert f'name="choice" value="{n}" class="approve">{n}. {choice}</button>' in row
            page = (await web.get(f"/runs/{handle.id}")).text
            assert f'data-call="{key}"' in page
            assert f"ask_person ({asked.call_id}): a question" in (await web.get("/?waiting=1")).text

            action = f"/runs/{handle.id}/calls/{asked.call_id}/answer"
            form = {"csrf": csrf_of(inbox), "by": "dana"}
            bad = await web.post(action, data={**form, "choice": "7"}, headers=JSON)
            assert bad.status_code in (400, 409) and "choice 7 is not one of 1..3" in bad.json()["message"], bad.text
            assert (await status(handle)).answers == []  # nothing recorded
            done = await web.post(action, data={**form, "choice": "3"}, headers=JSON)
            assert done.status_code == 200, done.text
            assert done.json()["message"] == f"{asked.call_id} answered (choice 3) by dana: Friday"

            async def next_question() -> bool:
                return any(q.call_id != asked.call_id for q in (await status(handle)).questions)

            await wait_for(next_question)
            free = (await status(handle)).questions[0]
            inbox = (await web.get("/inbox")).text
            assert f'data-call="{key}"' not in inbox  # answered: gone
            row = inbox[inbox.index(f'data-call="{handle.id}/{free.call_id}/question"') :]
            assert '<textarea name="text"' in row[: row.index("</section>")]
            action = f"/runs/{handle.id}/calls/{free.call_id}/answer"
            empty = await web.post(action, data={**form, "text": "  "}, headers=JSON)
            assert empty.status_code in (400, 409) and "may not be empty" in empty.json()["message"], empty.text
            typed = await web.post(action, data={**form, "text": "bring snacks"}, headers=JSON)
            assert typed.status_code == 200, typed.text
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Done."
        answers = (await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)).answers
    assert tool_results_sent(llm) == ["Friday (choice 3)", "bring snacks"]
    assert [(a.answer, a.by) for a in answers] == [("Friday", "dana"), ("bring snacks", "dana")]
