"""Every console page has a byte bound (views.MAX_PAGE_BYTES, 1 MiB), whatever the run holds: a
3 MB tool result and a 900 KB argument waiting for approval (arguments stop at 1 MiB) are folded
and cut on the run's page and in the inbox, each with a link to the whole value, which its own
route serves whole (as text that is never run as a page). The routes stay behind the guard."""

from __future__ import annotations

import json
import re

import httpx

from durable_agent_runner import Agent, Registry
from durable_agent_runner.console.views import CUT, MAX_PAGE_BYTES
from durable_agent_runner.workflows import types as t
from tests.console_helpers import pending, serve_console
from tests.fixtures.agents import send
from tests.fixtures.large_payload_tools import blob, blob_text
from tests.helpers import calls, script, start
from tests.test_console_http import TOKEN, csrf_of

MB = 1024 * 1024
JSON = {"Accept": "application/json"}


def links(page: str) -> list[str]:
    return re.findall(r'<a class="whole" href="([^"]+)">the whole value</a>', page)


async def test_a_3mb_tool_result_and_a_900kb_argument_keep_every_page_under_its_bound(
    client, task_queue, worker_factory, llm, counter_file
):
    result, label = blob_text("big", 3 * MB), blob_text("<script>alert(1)</script> label", 900_000)
    model = script(
        llm,
        calls(("blob", {"label": "big", "size": 3 * MB})),
        calls(("send", {"label": label})),
        {"content": "sent the big one"},
    )
    agent = Agent(name="bulky_sender", model=model, tools=[blob, send], approvals={"send": "always"}, max_turns=5)
    async with (
        worker_factory(registry=Registry(agents=[agent])),
        serve_console(client, task_queue) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as web,
    ):
        handle = await start(client, task_queue, "fetch and send", agent="bulky_sender")
        (waiting,) = await pending(handle, timeout=60)
        run_page = await web.get(f"/runs/{handle.id}")
        inbox = await web.get("/inbox")
        for page in (run_page, inbox):
            assert page.status_code == 200
            print(f"\n{page.url.path}: {len(page.content):,} bytes")
            assert len(page.content) < MAX_PAGE_BYTES  # was 6.3 MB: each value whole, the argument twice
        shown = run_page.text
        assert f"… {3 * MB - CUT:,} more characters not shown here" in shown
        assert "<script>alert(1)</script>" not in shown  # escaped, as ever
        message, arguments = (f"/runs/{handle.id}/messages/2", f"/runs/{handle.id}/calls/{waiting.call_id}/arguments")
        assert message in links(shown) and arguments in links(shown) and arguments in links(inbox.text)

        whole = await web.get(message)  # the tool's result, whole
        assert whole.status_code == 200 and whole.text == result
        assert whole.headers["content-type"] == "text/plain; charset=utf-8"
        assert (
            whole.headers["x-content-type-options"] == "nosniff"
            and whole.headers["content-security-policy"] == "sandbox"
        )
        args = await web.get(arguments)
        assert args.status_code == 200 and json.loads(args.text) == {"label": label}
        assert args.headers["content-type"] == "application/json; charset=utf-8"
        past = await web.get(f"/runs/{handle.id}/messages/99", headers=JSON)
        assert past.status_code == 404 and past.json()["message"] == f"run {handle.id} has no message 99"
        assert (await web.get(f"/runs/{handle.id}/messages/٣")).status_code == 400
        assert (await web.get(f"/runs/{handle.id}/calls/call_9_9/arguments")).status_code == 404
        assert (await web.get("/runs/no-such-run/messages/0")).status_code == 404
        assert (await web.post(message, data={"csrf": csrf_of(shown)})).status_code == 405  # a read, never an action

        # The edit form keeps the argument too long to hold as it is: approving it sends it whole.
        form = shown[shown.index('<form class="act edit-args"') :]
        form = form[: form.index("</form>")]
        assert 'name="keep.label"' in form and "too long to edit here (900,000 characters)" in form
        edit = f"/runs/{handle.id}/calls/{waiting.call_id}/edit"
        done = await web.post(edit, data={"keep.label": "1", "csrf": csrf_of(shown)}, headers=JSON)
        assert done.status_code == 200 and "approved with its arguments unchanged" in done.text, done.text
        assert (await handle.result()).output == "sent the big one"
        final = await web.get(f"/runs/{handle.id}")
        assert final.status_code == 200 and len(final.content) < MAX_PAGE_BYTES, len(final.content)
        told: t.Transcript = await handle.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
    sent = [m for m in told.messages if isinstance(m, t.ToolMessage) and m.name == "send"]
    assert sent[0].content == f"sent {label}"  # the whole argument, not the page's cut of it


async def test_the_whole_value_routes_are_behind_the_guard(client, task_queue):
    async with serve_console(client, task_queue, token=TOKEN) as url, httpx.AsyncClient(base_url=url) as web:
        for path in ("/runs/r/messages/0", "/runs/r/calls/c/arguments"):
            refused = await web.get(path)
            assert refused.status_code == 401 and "needs its token" in refused.text
            rebound = await web.get(path, headers={"Host": "evil.example", "X-Console-Token": TOKEN})
            assert rebound.status_code == 421
            allowed = await web.get(path, headers={"X-Console-Token": TOKEN})
            assert allowed.status_code == 404 and "no run with id" in allowed.text
