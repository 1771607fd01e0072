"""Runs started on the last 1.x release finish on this code: `python -m tests.upgrade_check [REV]`
(REV: a commit of 1.x, by default 1.4.9's last, 7cca667; it needs the repo's history).

On a dev server of its own and the fake model, a worker of REV's code (a git worktree, on this
virtualenv) starts a run that waits for approval and a session that answers its first message.
That worker stops and one of this code takes over. Then: `list --started-on-1x` lists both; the
approval finishes the run, with no 2.0 marker in its history; the session answers its next
messages and, once the server suggests continue-as-new (at 70 events), its new execution records
the 2.0 marker and leaves the list. Last, a deploy's overlap: a 2.0 run whose workflow task reaches
a 1.x worker is held there, `status` says it is stuck, and a 2.0 worker carries it on. It prints
each step and fails on the first that does not hold (docs/patches.md, "2.0: a new workflow
version")."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from durable_agent_runner.client import AgentClient
from durable_agent_runner.client.errors import NoWorkerAnswered
from durable_agent_runner.client.stuck import stuck
from durable_agent_runner.config.connection import connect
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows.patches import RELEASE_2_PATCH, SESSION_RAISE_PATCH
from tests.devserver import DYNAMIC_CONFIG, DevServer
from tests.helpers import marker_ids

ROOT = Path(__file__).resolve().parents[1]
LAST_1X = "7cca667"
QUEUE = "upgrade-check"


def worker(code: Path, target: str, llm: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(code),  # before the editable install: that code's package
        "TEMPORAL_ADDRESS": target,
        "AGENT_TASK_QUEUE": QUEUE,
        "LLM_BASE_URL": llm,
        "LLM_MODEL": "demo",
        "LLM_API_KEY": "upgrade-check",
    }
    with log.open("wb") as out:  # the worker writes to its own copy of the file
        return subprocess.Popen([sys.executable, str(code / "worker.py")], cwd=code, env=env, stdout=out, stderr=out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


async def until(check: Any, what: str, seconds: float = 60) -> Any:
    for _ in range(int(seconds / 0.3)):
        if found := await check():
            return found
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out: {what}")


async def check(old_code: Path, tmp: Path) -> None:
    with FakeLLMServer() as llm:
        (tmp / "server").mkdir()
        server = DevServer(tmp / "server", config=(*DYNAMIC_CONFIG, "limit.historyCount.suggestContinueAsNew=70"))
        server.start()
        try:
            client = await connect(server.target, "default")
            agents = AgentClient(client, task_queue=QUEUE)
            old = worker(old_code, server.target, llm.base_url, tmp / "worker-1x.log")
            run = await agents.start("demo", "Weather in Tokyo and Paris, then email the report to ops@example.com")
            session = await agents.start_session("demo")
            await session.send("Weather in Tokyo?")
            print("1.x: message 1 answered:", await session.answer(1, wait=90))
            waits = await until(lambda: _pending(run), "the 1.x run's approval wait", 90)
            print("1.x: the run waits for approval of", waits[0].call_id)
            stop(old)
            new = worker(ROOT, server.target, llm.base_url, tmp / "worker-2.log")
            try:
                listed = {r.run_id for r in await agents.list(50, started_on_1x=True)}
                assert listed == {run.id, session.id}, listed
                shown = await client_py(server.target, "list", "--started-on-1x")
                assert run.id in shown and session.id in shown, shown
                print("2.0: list --started-on-1x:", sorted(listed))
                await run.approve(waits[0].call_id, by="upgrade-check")
                output = await run.result(wait=90)
                assert "Report: sent to ops@example.com" in str(output), output
                ran = marker_ids(await client.get_workflow_handle(run.id).fetch_history())
                assert RELEASE_2_PATCH not in ran, ran
                print("2.0: the 1.x run finished, on its 1.x path:", str(output)[:70], "… markers", ran)
                for k, text in enumerate(("And in Paris?", "And in Rome?", "And in Oslo?"), start=2):
                    await session.send(text)
                    print(f"2.0: message {k} answered:", await session.answer(k, wait=90))
                live = client.get_workflow_handle(session.id)
                desc = await live.describe()
                first = desc.raw_description.workflow_execution_info.first_run_id
                assert desc.run_id != first, "the session never continued as new"
                now = marker_ids(await live.fetch_history())
                assert now == [RELEASE_2_PATCH, SESSION_RAISE_PATCH], now  # each session execution asks the raise's
                print("2.0: the session continued as new, and its new execution is 2.0: markers", now)
                await until(lambda: _none_on_1x(agents), "the list to empty", 30)
                shown = await client_py(server.target, "list", "--started-on-1x")
                assert "no run started on 1.x is running" in shown, shown
                print("2.0: list --started-on-1x:", shown.strip())
                await session.end("upgrade-check")
            finally:
                stop(new)
            await overlap(client, agents, old_code, server.target, llm.base_url, tmp)
        finally:
            server.stop()


async def overlap(client: Any, agents: AgentClient, old_code: Path, target: str, llm: str, tmp: Path) -> None:
    """A deploy's overlap: a 2.0 run's workflow task that reaches a 1.x worker is held there (the
    1.x code cannot replay the 2.0 marker), `status` says the run is stuck, and a 2.0 worker
    carries it on."""
    new = worker(ROOT, target, llm, tmp / "worker-2-again.log")
    run = await agents.start("demo", "Weather in Tokyo and Paris, then email the report to ops@example.com")
    waits = await until(lambda: _pending(run), "the 2.0 run's approval wait", 90)
    stop(new)
    old = worker(old_code, target, llm, tmp / "worker-1x-again.log")
    try:
        held = await until(lambda: _held(client, run, waits[0].call_id), "a 1.x worker to hold the 2.0 run", 90)
        assert "release-2.0" in held["error"], held
        print("overlap: a 2.0 run on a 1.x worker is held:", held["error"][:90], "…")
    finally:
        stop(old)
    new = worker(ROOT, target, llm, tmp / "worker-2-last.log")
    try:
        await run.approve(waits[0].call_id, by="upgrade-check", wait=60)
        output = await run.result(wait=90)
        assert "Report: sent to ops@example.com" in str(output), output
        print("overlap: a 2.0 worker carried it on:", str(output)[:70], "…")
    finally:
        stop(new)


async def _held(client: Any, run: Any, call_id: str) -> dict[str, Any] | None:
    """The run's stuck workflow task, once an approval (which needs a workflow task) has been tried."""
    with contextlib.suppress(NoWorkerAnswered):
        await run.approve(call_id, by="upgrade-check", wait=2)
    return await stuck(client, await client.get_workflow_handle(run.id).describe())


async def client_py(target: str, *args: str) -> str:
    """What `python client.py ARGS` prints (it must exit 0)."""
    env = {**os.environ, "TEMPORAL_ADDRESS": target, "AGENT_TASK_QUEUE": QUEUE}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "client.py"), *args, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (args, out)
    return out.decode()


async def _pending(run: Any) -> Any:
    return (await run.status()).pending_approvals


async def _none_on_1x(agents: AgentClient) -> bool:
    return not await agents.list(50, started_on_1x=True)


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else LAST_1X
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "code-1x"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), rev], check=True)
        try:
            asyncio.run(check(old, Path(tmp)))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    print("upgrade check passed")


if __name__ == "__main__":
    main()
