"""`client.py send`, `end`, `result --message` and `status` on a session, run as a user runs them."""

from __future__ import annotations

import asyncio

import pytest

from durable_agent_runner.client import AgentClient
from durable_agent_runner.client.errors import AgentRunError
from tests.test_client import Cli, cli, one_clean_line  # noqa: F401  (cli is a fixture)
from tests.test_sessions import open_session

pytestmark = pytest.mark.asyncio

# These commands' own bound on a worker taking what they send (10 s by default) is tested in
# test_cli_bounds.py. Here a worker that a loaded machine (three test processes on two cores)
# slows is still waited for: each send and end gives it WORKER s, and client.py itself (its start
# takes seconds under load) is given CLI_BOUND s before the test calls it stuck.
WORKER = ("--wait-worker", "60")
CLI_BOUND = 120.0


async def test_send_wait_result_status_end(cli: Cli, client, task_queue, worker_factory) -> None:
    async with worker_factory():
        handle = await open_session(client, task_queue, model="echo")
        done = await cli("send", handle.id, "hello", "there", "--wait", "--json", *WORKER, timeout=CLI_BOUND)
        assert done.code == 0, str(done)
        answer = done.json()
        assert answer["message"] == 1 and answer["output"] == "echo: hello there"
        assert answer["turn"] == 1 and answer["usage"]["requests"] == 1 and answer["usage"]["total_tokens"] > 0
        done = await cli("send", handle.id, "second", "--by", "bob", *WORKER, timeout=CLI_BOUND)
        assert done.code == 0 and done.out.strip().startswith("message 2 sent"), str(done)
        done = await cli("result", handle.id, "--message", "2", timeout=CLI_BOUND)  # waits for the answer
        assert done.code == 0 and done.out.strip() == "echo: second", str(done)
        done = await cli("result", handle.id, "--message", "1", "--json")
        assert done.json()["output"] == "echo: hello there"
        done = await cli("result", handle.id, "--message", "7")
        assert done.code == 2 and "no message 7" in one_clean_line(done.err), str(done)
        done = await cli("status", handle.id, "--json")
        status = done.json()
        assert status["status"] == "waiting" and status["session"]["messages"] == 2
        assert status["session"]["last"]["prompt"] == "second" and status["session"]["last"]["by"] == "bob"
        text = (await cli("status", handle.id)).out
        assert "session: waiting · 2 message(s), 2 answered" in text and "echo: second" in text
        done = await cli("end", handle.id, "--reason", "bye", *WORKER, timeout=CLI_BOUND)
        assert done.code == 0, str(done)
        result = await handle.result()
        assert result.ended_by.endswith("bye") and result.messages == 2
        done = await cli("send", handle.id, "anyone?")
        assert done.code == 2 and "has ended" in one_clean_line(done.err), str(done)
        done = await cli("send", handle.id, "anyone?", "--json")
        assert done.code == 2 and "has ended" in done.json()["error"]


async def test_send_to_a_run_that_is_not_a_session(cli: Cli, client, task_queue, worker_factory, llm) -> None:
    from tests.test_client import script

    async with worker_factory():
        # a run that waits for an approval: running, and not a session, for as long as the test needs
        model = script(llm, {"tool_calls": [{"name": "send", "arguments": {"label": "x"}}]}, {"content": "done"})
        done = await cli("run", "--agent", "guarded", "--model", model, "go", timeout=CLI_BOUND)
        run_id = done.out.strip()
        done = await cli("send", run_id, "hi", *WORKER, timeout=CLI_BOUND)
        assert done.code == 2 and "not a session" in one_clean_line(done.err), str(done)
        done = await cli("end", run_id, *WORKER, timeout=CLI_BOUND)
        assert done.code == 2 and "not a session" in one_clean_line(done.err), str(done)
        # a session's answer asked of a run that is not one: its words, not the query's error type
        done = await cli("result", run_id, "--message", "1", timeout=CLI_BOUND)
        said = one_clean_line(done.err)
        assert done.code == 2 and said.endswith(f"run {run_id} is not a session: it has no messages to answer"), said
        with pytest.raises(AgentRunError, match=r"is not a session: it has no messages to answer$"):
            await AgentClient(client, task_queue=task_queue).get_session(run_id).answer(1, wait=5)
        done = await cli("send", "no-such-run", "hi")
        assert done.code == 2 and "no run with id" in one_clean_line(done.err), str(done)


async def test_watch_follows_a_session_until_it_ends(cli: Cli, client, task_queue, worker_factory) -> None:
    async with worker_factory():
        handle = await open_session(client, task_queue, model="echo", prompt="first")
        watching = asyncio.create_task(cli("watch", handle.id, timeout=3 * CLI_BOUND))
        done = await cli("send", handle.id, "second", "--wait", *WORKER, timeout=CLI_BOUND)
        assert done.code == 0, str(done)
        await asyncio.sleep(1.0)  # a watcher that wrongly stops at the answers has stopped by now
        assert not watching.done()  # two answers, and the watcher is still there
        done = await cli("end", handle.id, *WORKER, timeout=CLI_BOUND)
        assert done.code == 0, str(done)
        watched = await watching
        assert watched.code == 0, str(watched)
        out = watched.out
        assert "» message 1 from client: first" in out and "» message 2" in out
        assert "echo: first" in out and "echo: second" in out and "■ session ended: ended by" in out
        assert "✗" not in out
