"""client.py as a user runs it: a subprocess against the session's Temporal dev server, while
the project's worker runs in-process on the test's task queue."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import WorkflowAlreadyStartedError

import durable_agent_runner as dar
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.evals import Case, Dataset
from durable_agent_runner.workflows import types as t
from tests.helpers import closed_address

ROOT = Path(__file__).resolve().parent.parent
STATUSES = {"running", "completed", "failed", "cancelled"}


@dataclass
class Done:
    code: int
    out: str
    err: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:  # shown by failed asserts
        return f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


Cli = Callable[..., Awaitable[Done]]


@pytest.fixture
def cli(temporal_server, task_queue) -> Cli:
    """`await cli("status", run_id, env={...})` runs `python client.py ...` and collects its output."""
    base = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_server.target,
        "TEMPORAL_NAMESPACE": "default",
        "AGENT_TASK_QUEUE": task_queue,
    }

    async def run(
        *args: str | bytes, env: dict[str, str] | None = None, timeout: float = 30, stdin: bytes | None = None
    ) -> Done:
        began = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "client.py",
            *args,
            cwd=ROOT,
            env={**base, **(env or {})},
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"client.py {' '.join(args)} still running after {timeout}s") from None
        assert proc.returncode is not None
        return Done(proc.returncode, out.decode(), err.decode(), time.monotonic() - began)

    return run


def script(llm, *steps: dict) -> str:
    sid = uuid.uuid4().hex[:8]
    llm.add_script(sid, list(steps))
    return f"script:{sid}"


def slow(seconds: float) -> dict:
    return {"tool_calls": [{"name": "slow_record", "arguments": {"label": "a", "seconds": seconds}}]}


RETRY_NOTE = re.compile(r"\((chat|watch): .+; retrying\)")


def one_clean_line(stderr: str) -> str:
    """A user error is one readable line on stderr, never a traceback. A note that a command
    retried a server call (`(chat: no answer in time (...); retrying)`, on a loaded machine) may come before it."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if not RETRY_NOTE.fullmatch(line)]
    assert len(lines) == 1, stderr
    return lines[0]


async def started(cli: Cli, *args: str) -> str:
    """`run` without --wait: just the run id on stdout, how to follow it on stderr."""
    done = await cli("run", *args)
    assert done.code == 0, str(done)
    run_id = done.out.strip()
    assert done.out == f"{run_id}\n" and run_id and " " not in run_id, str(done)
    assert f"status {run_id}" in done.err and "Traceback" not in done.err, str(done)
    return run_id


async def poll(check: Callable[[], Awaitable[Any]], timeout: float = 20, every: float = 0.3) -> Any:
    """Call `check` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(every)


# ------------------------------------------------------------------------------------------ run


async def test_run_wait_prints_the_answer(cli, worker_factory, llm):
    async with worker_factory():
        done = await cli("run", "--wait", "What's the weather in Tokyo and Paris?")
    assert done.code == 0, str(done)
    assert "Tokyo" in done.out and "Paris" in done.out
    assert "Traceback" not in done.err


async def test_run_without_wait_prints_only_the_id(cli, client, worker_factory, llm):
    async with worker_factory():
        run_id = await started(cli, "Weather in Tokyo?")
        result = await client.get_workflow_handle(run_id, result_type=t.RunResult).result()
    assert run_id.startswith("demo-") and "Tokyo" in result.output


async def test_run_json_wait_with_a_scripted_agent(cli, worker_factory, llm):
    model = script(llm, {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"content": "it is 5"})
    async with worker_factory():
        done = await cli("run", "--json", "--wait", "--agent", "scripted", "--model", model, "add 2 and 3")
    assert done.code == 0, str(done)
    body = done.json()
    assert body["run_id"].startswith("scripted-")
    assert body["status"] == "completed" and body["output"] == "it is 5" and body["turns"] == 2
    assert body["usage"]["requests"] == 2 and body["usage"]["input_tokens"] > 0


async def test_max_turns_exceeded_fails_with_a_clear_message(cli, worker_factory, llm):
    looping = ["--agent", "looper", "--model", "loop:50:10", "--max-turns", "2", "go"]
    async with worker_factory():
        human, as_json = await asyncio.gather(cli("run", "--wait", *looping), cli("run", "--wait", "--json", *looping))
        assert as_json.code == 1, str(as_json)
        run_id = as_json.json()["run_id"]
        result, result_json, status = await asyncio.gather(
            cli("result", run_id), cli("result", run_id, "--json"), cli("status", run_id, "--json")
        )
    assert human.code == 1, str(human)
    assert "max_turns (2) exceeded" in human.out + human.err and "Traceback" not in human.err
    body = as_json.json()
    assert body["status"] == "failed" and body["output"] is None and body["error"]["type"] == "MaxTurnsExceeded"
    assert "max_turns (2) exceeded" in body["error"]["message"]
    # the failed run, looked at afterwards
    assert result.code == 1 and "max_turns (2) exceeded" in result.out + result.err, str(result)
    assert result_json.code == 1 and "max_turns (2) exceeded" in result_json.json()["error"]["message"]
    assert status.code == 0, str(status)
    body = status.json()
    assert body["status"] == "failed" and body["turn"] == 2 and body["error"]["type"] == "MaxTurnsExceeded"
    assert "max_turns (2) exceeded" in body["error"]["message"]


# ------------------------------------------------------------------------------ status / result


async def test_status_and_result_of_a_run_mid_tool(cli, worker_factory, llm):
    # The tool's 20 s hold the checks below, each a client.py process (seconds apiece under load).
    model = script(llm, slow(20), {"content": "slow work done"})
    async with worker_factory():
        run_id = await started(cli, "--agent", "scripted", "--model", model, "do the slow thing")

        async def in_tools() -> dict | None:
            done = await cli("status", run_id, "--json")
            assert done.code == 0, str(done)
            body = done.json()
            return body if body["phase"] == "running_tools" else None

        status = await poll(in_tools)
        assert status, "the run never reached running_tools"
        assert status["run_id"] == run_id and status["status"] == "running" and status["turn"] == 1
        assert status["usage"]["total_tokens"] > 0
        assert status["usage"]["input_tokens"] > 0 and status["usage"]["output_tokens"] > 0
        assert "slow_record" in status["last_step"]

        human, not_yet = await asyncio.gather(cli("status", run_id), cli("result", run_id, "--no-wait"))
        assert human.code == 0, str(human)
        assert run_id in human.out and "running_tools" in human.out and "slow_record" in human.out
        assert not_yet.code == 1 and "still running" in not_yet.err, str(not_yet)

        waited, as_json = await asyncio.gather(cli("result", run_id), cli("result", run_id, "--json"))
        final = await cli("status", run_id, "--json")
    assert waited.code == 0 and waited.out.strip() == "slow work done", str(waited)
    assert as_json.code == 0, str(as_json)
    body = as_json.json()
    assert body["run_id"] == run_id and body["status"] == "completed" and body["output"] == "slow work done"
    assert final.code == 0, str(final)
    status = final.json()
    assert status["status"] == "completed" and status["turn"] == 2 and status["last_step"]
    assert status["usage"]["total_tokens"] == status["usage"]["input_tokens"] + status["usage"]["output_tokens"]


async def test_status_without_a_worker_shows_what_temporal_knows(cli):
    # no worker polls this task queue: the CLI can only read the search attributes
    run_id = await started(cli, "hello")
    done = await cli("status", run_id, "--json")
    assert done.code == 0, str(done)
    body = done.json()
    assert body["run_id"] == run_id and body["status"] == "running" and body["turn"] == 0
    assert body["usage"] == {"total_tokens": 0} and "last_step" in body
    assert "worker" in body.get("note", ""), body
    assert done.seconds < 15, str(done)
    cancelled = await cli("cancel", run_id)
    assert cancelled.code == 0, str(cancelled)


# ------------------------------------------------------------------------------------------ list


async def test_list_includes_new_runs(cli, worker_factory, llm):
    model = script(llm, {"content": "hi"})
    async with worker_factory():
        first = await cli("run", "--wait", "--json", "--agent", "scripted", "--model", model, "one")
        second = await cli("run", "--wait", "--json", "--agent", "scripted", "--model", model, "two")
    ids = {first.json()["run_id"], second.json()["run_id"]}

    async def listed() -> list[dict] | None:
        done = await cli("list", "--json", "--limit", "100")
        assert done.code == 0, str(done)
        rows = [r for r in done.json() if r["run_id"] in ids]
        return rows if len(rows) == 2 and all(r["status"] == "completed" for r in rows) else None

    rows = await poll(listed)
    assert rows, "the new runs never showed up in `list --json`"
    assert all(r["agent"] == "scripted" and r["status"] in STATUSES for r in rows)
    human = await cli("list", "--limit", "100")
    assert human.code == 0, str(human)
    assert all(run_id in human.out for run_id in ids)
    assert len({line.index(" turn ") for line in human.out.splitlines()}) == 1, human.out  # columns line up
    # The Python client's filters, as flags: the agent's and the phase's rows, none of another's.
    mine = await cli("list", "--json", "--limit", "1000", "--agent", "scripted", "--phase", "completed")
    assert mine.code == 0 and ids <= {r["run_id"] for r in mine.json()}, str(mine)
    assert all(r["agent"] == "scripted" and r["phase"] == "completed" for r in mine.json())
    waiting = await cli("list", "--json", "--limit", "1000", "--waiting")
    assert waiting.code == 0 and not ids & {r["run_id"] for r in waiting.json()}, str(waiting)
    nobody = await cli("list", "--agent", "nobody-serves-this", "--phase", "paused")
    assert nobody.code == 0 and nobody.out.strip() == "no run of agent 'nobody-serves-this' in phase paused"
    bad = await cli("list", "--phase", "sleeping")
    assert bad.code == 2 and "invalid choice: 'sleeping'" in one_clean_line(bad.err)


# ---------------------------------------------------------------------------------------- cancel


async def test_cancel_a_running_run(cli, worker_factory, llm):
    model = script(llm, slow(30), {"content": "never"})
    async with worker_factory():
        run_id = await started(cli, "--agent", "scripted", "--model", model, "wait for me")

        async def in_tools() -> bool:
            return (await cli("status", run_id, "--json")).json()["phase"] == "running_tools"

        assert await poll(in_tools)
        done = await cli("cancel", run_id)
        assert done.code == 0, str(done)
        assert run_id in done.out

        async def cancelled() -> dict | None:
            body = (await cli("status", run_id, "--json")).json()
            return body if body["status"] == "cancelled" else None

        status = await poll(cancelled)
        assert status, "status never showed the run as cancelled"
        result = await cli("result", run_id)
    assert result.code == 1, str(result)
    assert "cancel" in result.out + result.err


# ---------------------------------------------------------------------------------------- errors


async def test_unknown_run_id_is_a_usage_error(cli):
    missing = f"no-such-run-{uuid.uuid4().hex[:8]}"
    commands = ["status", "result", "cancel"]
    for command, done in zip(commands, await asyncio.gather(*(cli(c, missing) for c in commands)), strict=True):
        assert done.code == 2, f"{command}: {done}"
        assert missing in one_clean_line(done.err), command


BAD_ARGUMENTS = [
    [],  # no command
    ["launch"],
    ["run"],  # no prompt
    ["run", "--max-turns", "abc", "hello"],
    ["run", "--max-turns", "0", "hello"],
    ["status"],  # no run id
]


async def test_bad_arguments_exit_2(cli):
    for args, done in zip(BAD_ARGUMENTS, await asyncio.gather(*(cli(*a) for a in BAD_ARGUMENTS)), strict=True):
        assert done.code == 2, f"{args}: {done}"
        assert "Traceback" not in done.err and "error" in done.err, f"{args}: {done}"
        assert done.out == "", f"{args}: {done}"


async def test_help_of_every_command(cli):
    commands = [[], ["run"], ["status"], ["result"], ["list"], ["cancel"]]
    for command, done in zip(commands, await asyncio.gather(*(cli(*c, "--help") for c in commands)), strict=True):
        assert done.code == 0, f"{command}: {done}"
        assert done.out.startswith("usage: client.py") and done.err == "", f"{command}: {done}"


async def test_temporal_unreachable_is_one_clear_line(cli):
    commands = [["list"], ["status", "some-run"], ["run", "hello"]]
    with closed_address() as target:  # nobody listens here
        runs = await asyncio.gather(*(cli(*c, env={"TEMPORAL_ADDRESS": target}) for c in commands))
    for command, done in zip(commands, runs, strict=True):
        assert done.code == 1, f"{command}: {done}"
        line = one_clean_line(done.err)
        assert target in line and "cannot reach Temporal" in line, command
        assert done.seconds < 10, f"{command}: {done}"


async def test_bad_max_turns_is_a_usage_error_even_when_temporal_is_down(cli):
    with closed_address() as nobody:  # a port merely found free may be taken by another test process
        done = await cli("run", "--max-turns", "0", "hello", env={"TEMPORAL_ADDRESS": nobody})
    assert done.code == 2, str(done)


async def test_reusing_the_id_of_a_running_run_is_a_usage_error(cli):
    run_id = await started(cli, "hello")  # no worker polls this queue: it stays running
    done = await cli("run", "--id", run_id, "hello again")
    assert done.code == 2, str(done)
    assert run_id in one_clean_line(done.err)


async def test_the_id_of_an_ended_run_is_never_taken_again(cli, client, task_queue, worker_factory, llm):
    """Before: `run --id` or `fork --id` with an ended run's id started a new run under it, which
    then shadowed the first in status, export, diff and the Web UI's link (a fork given its
    origin's id showed as a fork of itself)."""
    model = script(llm, {"content": "hi"})
    async with worker_factory():
        first = await cli("run", "--wait", "--json", "--agent", "scripted", "--model", model, "one")
        assert first.code == 0, str(first)
        run_id = first.json()["run_id"]
        again = await cli("run", "--id", run_id, "two")
        assert again.code == 2 and one_clean_line(again.err) == (
            f"client.py: error: a run with id '{run_id}' exists already (completed): give another --id, or leave it out"
        )
        forked = await cli("fork", run_id, "--at-turn", "1", "--id", run_id)
        assert forked.code == 2 and "exists already (completed)" in one_clean_line(forked.err), str(forked)
        api = AgentClient(client, task_queue=task_queue)
        with pytest.raises(
            dar.IdTaken, match=f"^a run with id '{re.escape(run_id)}' exists already \\(completed\\)$"
        ) as taken:
            await api.start("scripted", "three", id=run_id)
        assert isinstance(taken.value, WorkflowAlreadyStartedError) and taken.value.how == "completed"  # as before
        dataset = Dataset(name="d", cases=[Case(name="c", inputs="hi")])
        with pytest.raises(
            dar.IdTaken, match=f"^a run with id '{re.escape(run_id)}' exists already"
        ):  # an eval's start too
            await api.evals.start(dataset, agent="scripted", eval_id=run_id)
    executions = [wf async for wf in client.list_workflows(f'WorkflowId="{run_id}"')]
    assert len(executions) == 1  # the first run alone holds its id


# ------------------------------------------------------------------------------ hostile input


async def test_prompts_from_stdin_and_from_a_file(cli, worker_factory, tmp_path):
    prompt = "What's the weather in Tokyo?\n" + "context line\n" * 2000
    (tmp_path / "prompt.txt").write_text(prompt, encoding="utf-8")
    async with worker_factory():
        piped = await cli("run", "--wait", "--json", "--agent", "demo", "-", stdin=prompt.encode())
        assert piped.code == 0, str(piped)
        from_file = await cli("run", "--wait", "--json", "--prompt-file", str(tmp_path / "prompt.txt"))
        assert from_file.code == 0, str(from_file)
    for done in (piped, from_file):
        assert "Tokyo" in done.json()["output"]
    both = await cli("run", "hi", "--prompt-file", str(tmp_path / "prompt.txt"))
    assert both.code == 2 and "not several" in one_clean_line(both.err)
    missing = await cli("run", "--prompt-file", str(tmp_path / "nope.txt"))
    assert missing.code == 2 and "cannot read --prompt-file" in one_clean_line(missing.err)
    binary = await cli("run", "-", stdin=b"\xff\xfe bad")
    assert binary.code == 2 and "not UTF-8" in one_clean_line(binary.err)
    empty = await cli("run", "-", stdin=b"  \n")
    assert empty.code == 2 and "the prompt is empty" in one_clean_line(empty.err)
    blank = await cli("send", "some-session", " ")  # a message, said as one
    assert blank.code == 2 and "the message is empty" in one_clean_line(blank.err), str(blank)


async def test_non_utf8_arguments_are_usage_errors(cli):
    done = await cli("status", b"run-\xff\xfe")
    assert done.code == 2 and "not valid UTF-8" in one_clean_line(done.err)
    done = await cli("run", b"caf\xe9", "--json")
    assert done.code == 2 and "not valid UTF-8" in done.json()["error"]


async def test_run_ids_with_quotes_and_slashes(cli, worker_factory, tmp_path):
    odd = f'odd "id" / with \\ slash {uuid.uuid4().hex[:6]}'
    async with worker_factory():
        done = await cli("run", "--wait", "--id", odd, "weather in Paris")
        assert done.code == 0, str(done)
        status = await cli("status", odd, "--json")
        assert status.code == 0 and status.json()["run_id"] == odd, str(status)
        assert "/workflows/odd%20%22id%22%20%2F%20with" in status.json()["ui_url"]
        exported = await cli("export", odd, "--out", str(tmp_path / "odd.jsonl"))
        assert exported.code == 0, str(exported)
        # A bad --out is one usage line (before: `error: IsADirectoryError: [Errno 21] …`, exit 1).
        into_folder = await cli("export", odd, "--out", str(tmp_path))
        assert into_folder.code == 2 and f"--out {tmp_path} is a folder: give a file's path" in one_clean_line(
            into_folder.err
        )
        nowhere = await cli("export", odd, "--out", str(tmp_path / "gone" / "odd.jsonl"))
        assert nowhere.code == 2 and f"its folder {tmp_path / 'gone'} does not exist" in one_clean_line(nowhere.err)
        unwritable = await cli("export", odd, "--out", "/proc/odd.jsonl")
        assert unwritable.code == 2 and "cannot write /proc/odd.jsonl" in one_clean_line(unwritable.err)
        no_captures = await cli("export", odd, "--captures", str(tmp_path / "gone"))
        assert no_captures.code == 2 and f"--captures {tmp_path / 'gone'} is not a folder" in one_clean_line(
            no_captures.err
        )
    bad = await cli("run", "--id", "tab\there", "hi")
    assert bad.code == 2 and "printable" in one_clean_line(bad.err)
    spaced = await cli("run", "--id", "nightly ", "hi")
    assert spaced.code == 2 and "--id: must not begin or end with a space" in one_clean_line(spaced.err)


async def test_list_limit_out_of_range(cli):
    for limit in ("0", "-3", "5000", "many"):
        done = await cli("list", "--limit", limit)
        assert done.code == 2, str(done)
        one_clean_line(done.err)


async def test_json_errors_are_json_on_stdout(cli):
    unknown = await cli("status", "no-such-run-here", "--json")
    assert unknown.code == 2 and unknown.json()["error"] == "no run with id 'no-such-run-here'"
    usage = await cli("list", "--limit", "0", "--json")
    assert usage.code == 2 and "error" in usage.json()
    with closed_address() as nobody:
        down = await cli("status", "x", "--json", env={"TEMPORAL_ADDRESS": nobody}, timeout=60)
    assert down.code == 1 and "cannot reach Temporal" in down.json()["error"], str(down)
    assert "Traceback" not in unknown.err + usage.err + down.err
