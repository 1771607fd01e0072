"""`client.py eval run | status | report` as a CI job runs them: a subprocess against the dev
server, the worker in-process, the scripted fake model. The gate exits 1 naming the regressed
cases, and 0 without the planted regression; bad arguments exit 2 in one line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.evals import Case, Dataset
from durable_agent_runner.workflows.types import evals as te
from tests.helpers import client_py_says, client_py_until, replay, script

ROOT = Path(__file__).resolve().parent.parent

DATASET = """\
name: cli-smoke
evaluators:
  - Contains: alpha
cases:
  - name: case 1
    inputs: question 1
  - name: case 2
    inputs: question 2
  - name: case 3
    inputs: question 3
    evaluators:
      - Contains: beta
  - name: case 4
    inputs: question 4
    evaluators:
      - Contains: beta
"""


async def client_py(temporal_server, task_queue: str, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "client.py", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_eval_run_gates_on_a_baseline(temporal_server, client, task_queue, llm, worker_factory, tmp_path):
    data = tmp_path / "cases.yaml"
    data.write_text(DATASET)
    good, bad = script(llm, {"content": "alpha beta"}), script(llm, {"content": "alpha"})
    base = f"eval-base-{uuid.uuid4().hex[:6]}"
    async with worker_factory():
        code, out, err = await client_py(
            temporal_server, task_queue, "eval", "run", str(data), "--agent", "scripted", "--model", good,
            "--id", base, "--concurrency", "2", "--json",
        )  # fmt: skip
        assert code == 0, err
        body = json.loads(out)
        assert body["report"]["pass_rate"] == 1.0 and body["gate"]["passed"] is True
        assert [r["case"] for r in body["report"]["rows"]] == ["case 1", "case 2", "case 3", "case 4"]
        assert all(r["link"].endswith(r["run_id"].replace("/", "%2F")) for r in body["report"]["rows"])

        code, out, err = await client_py(
            temporal_server, task_queue, "eval", "run", str(data), "--agent", "scripted", "--model", bad,
            "--baseline", base, "--fail-on-regression",
        )  # fmt: skip
        assert code == 1, err
        assert "gate failed: 2 case(s) regressed against " + base + ": case 3, case 4" in err
        assert "| case 3 | regressed | 100% → 0% |" in out

        inline = f"eval-inline-{uuid.uuid4().hex[:6]}"  # scored in its workflow task, gated the same
        code, out, err = await client_py(
            temporal_server, task_queue, "eval", "run", str(data), "--agent", "scripted", "--model", good,
            "--baseline", base, "--fail-on-regression", "--min-pass-rate", "0.9", "--id", inline, "--inline-scoring",
        )  # fmt: skip
        assert code == 0, err
        history = await client.get_workflow_handle(inline).fetch_history()
        assert not [
            e for e in history.events if e.activity_task_scheduled_event_attributes.activity_type.name == "eval.score"
        ]

        code, out, err = await client_py(temporal_server, task_queue, "eval", "status", base, "--json")
        assert code == 0 and json.loads(out)["done"] == 4 and json.loads(out)["phase"] == "completed"
        code, out, err = await client_py(temporal_server, task_queue, "eval", "report", base, "--markdown")
        assert code == 0 and f"## Eval {base}: cli-smoke on scripted" in out
        code, out, err = await client_py(temporal_server, task_queue, "eval", "list", "--json")
        assert code == 0 and base in out


async def test_bad_eval_arguments_are_one_line_and_exit_2(temporal_server, client, task_queue, tmp_path):
    data = tmp_path / "cases.yaml"
    data.write_text(DATASET)
    empty = tmp_path / "empty.yaml"
    empty.write_text("name: empty\ncases: []\n")
    for args, words in [
        (["eval", "run", str(empty), "--agent", "scripted"], f"{empty}: dataset 'empty' has no cases to run"),
        (["eval", "run", str(data), "--agent", "scripted", "--concurrency", "0"], "must be from 1 to 50, not 0"),
        # was `0 is outside 1e-09..1e+09`
        (["eval", "run", str(data), "--agent", "sc", "--budget-usd", "0"], "more than 0 and at most 1,000,000,000"),
        (["eval", "add-case", str(data), "some-run", "--at-turn", "0"], "must be from 1 to 1,000,000, not 0"),
        (["eval", "run", str(tmp_path / "none.yaml"), "--agent", "scripted"], "cannot read"),
        (["eval", "run", str(data), "--agent", "scripted", "--fail-on-regression"], "needs --baseline"),
        (["eval", "status", "no-such-eval"], "no eval with id 'no-such-eval'"),
        # refused before the eval starts: no case is paid for a comparison that cannot be made
        (
            ["eval", "run", str(data), "--agent", "scripted", "--baseline", "no-such-eval"],
            "error: --baseline: no eval with id 'no-such-eval'",
        ),
        # the two the wrong way round said "no run with id 'cases.yaml'"
        (["eval", "add-case", "some-run", str(data)], f"add-case takes DATASET, then RUN_ID: '{data}' looks like"),
    ]:
        code, out, err = await client_py(temporal_server, task_queue, *args, timeout=30)
        assert code == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and words in err, err
    evals = [wf async for wf in client.list_workflows(f'WorkflowType="EvalRun" AND TaskQueue="{task_queue}"')]
    assert evals == []  # none of them started an eval


async def test_eval_resume_with_no_worker_says_so_within_its_wait(client, temporal_server):
    """`eval resume` on an eval no worker serves gives up after `--wait`, in one line, exit code 3
    (as a run's `resume` does), instead of waiting without a bound."""
    idle = f"tq-nobody-{uuid.uuid4().hex[:8]}"
    ev = await AgentClient(client, task_queue=idle).evals.start(
        Dataset(name="unserved", cases=[Case(name="c", inputs="q")]), agent="scripted", budget_tokens=100
    )
    began = time.monotonic()
    code, out, err = await client_py(
        temporal_server, idle, "eval", "resume", ev.eval_id, "--add-tokens", "5", "--wait", "1"
    )
    took = time.monotonic() - began
    try:
        assert code == 3, (out, err)
        assert len(err.strip().splitlines()) == 1 and "worker" in err and "Traceback" not in err, err
        assert took < 20, took  # the bound, plus a Python start
    finally:
        await ev.cancel()


async def test_eval_cancel_cancels_an_eval_and_refuses_what_it_cannot_cancel_in_one_line(
    client, temporal_server, task_queue, worker_factory
):
    """`eval cancel` (before, `eval cancel` was "invalid choice": only `client.py cancel EVAL_ID`
    did it): the eval ends cancelled; a second cancel and an unknown id are one line each."""
    queue = task_queue
    ev_client = AgentClient(client, task_queue=queue)
    ev = await ev_client.evals.start(Dataset(name="stalled", cases=[Case(name="c", inputs="q")]), agent="nobody")
    async with worker_factory():  # serves the eval, not its agent: its case waits
        code, out, err = await client_py(temporal_server, queue, "eval", "cancel", ev.eval_id)
        assert code == 0 and out.strip().startswith(f"cancellation requested for eval {ev.eval_id}"), (out, err)
        async with asyncio.timeout(30):
            while (status := await ev.status()).phase != "cancelled":
                await asyncio.sleep(0.2)
        assert status.done == 0
    # a list names it as `eval status` does ("cancelled", not Temporal's "canceled"), with its agent,
    # which it never resolved
    async with asyncio.timeout(30):
        while not (rows := [r for r in await ev_client.evals.list(limit=100) if r.eval_id == ev.eval_id]) or (
            rows[0].status != "cancelled"
        ):
            await asyncio.sleep(0.2)
    assert rows[0].agent == "nobody"
    for args, words in [
        ([ev.eval_id], f"eval {ev.eval_id} has already ended (cancelled)"),
        (["no-such-eval"], "no eval with id 'no-such-eval'"),
    ]:
        code, out, err = await client_py(temporal_server, queue, "eval", "cancel", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, (args, out, err)


async def test_eval_run_no_wait_prints_the_evals_id_alone_for_a_script(
    client, temporal_server, task_queue, worker_factory, tmp_path
):
    """`E=$(client.py eval run FILE --agent A --no-wait)` then `client.py eval cancel $E`: before,
    it printed `started eval E`, so `eval cancel $E` was a usage error (as `run` prints a run's id)."""
    data = tmp_path / "cases.yaml"
    data.write_text("cases:\n  - name: c\n    inputs: q\n")
    code, out, err = await client_py(temporal_server, task_queue, "eval", "run", str(data), "--agent", "nobody",
                                     "--no-wait")  # fmt: skip
    eval_id = out.strip()
    assert code == 0 and out == f"{eval_id}\n" and eval_id.startswith("eval-cases-"), (out, err)
    assert f"follow it: python client.py eval watch {eval_id}" in err, err
    async with worker_factory():
        code, out, err = await client_py(temporal_server, task_queue, "eval", "cancel", eval_id)
    assert code == 0 and out.startswith(f"cancellation requested for eval {eval_id}"), (out, err)


async def test_eval_run_says_within_seconds_that_no_worker_serves_its_agent(
    client, temporal_server, task_queue, worker_factory, tmp_path
):
    """An eval of an agent no worker serves (a typo, a worker not started): `eval run` says so on
    its own line within seconds of the eval's start, and `eval status` names it too. Cancelled
    then, the eval ends cancelled (not failed); left alone, once its wait for the agent runs out,
    it fails saying the same, not "ScheduleToStart timeout"."""
    data = tmp_path / "cases.yaml"
    data.write_text(DATASET)
    eid = f"eval-ghost-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    async with worker_factory():  # serves the eval's queue, not the agent
        args = ["eval", "run", str(data), "--agent", "ghost", "--id", eid]
        line = await client_py_says(args, env, b"no worker serves agent")
        started = (await client.get_workflow_handle(eid).describe()).start_time
        said = datetime.now(UTC)
        text = line.decode()
        assert text.startswith("no worker serves agent 'ghost' for the eval's start"), text
        assert f"nothing polls task queue {task_queue}@ghost" in text and "the eval goes on once one does" in text
        assert (said - started).total_seconds() < 15  # GRACE (3 s) and a poll, on a loaded machine
        code, out, err = await client_py(temporal_server, task_queue, "eval", "status", eid)
        assert code == 0 and "stalled: no worker serves agent 'ghost'" in out, (out, err)
        code, out, err = await client_py(temporal_server, task_queue, "eval", "status", eid, "--json")
        (wait,) = json.loads(out)["unserved"]
        assert wait["waiting"] == "the eval's start" and wait["queue"] == f"{task_queue}@ghost"
        await client.get_workflow_handle(eid).cancel()  # while its resolve waits: it ends cancelled, not failed
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(client.get_workflow_handle(eid).result(), 30)
        assert (await client.get_workflow_handle(eid).describe()).status == WorkflowExecutionStatus.CANCELED
        code, out, err = await client_py(temporal_server, task_queue, "eval", "status", eid)
        assert code == 0 and "cancelled · 0/4 done" in out, (out, err)
        await replay(client.get_workflow_handle(eid))

        short = te.EvalInput(dataset=Dataset(name="d", cases=[Case(name="c", inputs="q")]), agent="ghost",
                             agent_wait_seconds=1)  # fmt: skip
        handle = await client.start_workflow(te.EVAL_WORKFLOW, short, id=f"{eid}-short", task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
    message = str(failed.value.cause)
    assert f"no worker serves agent 'ghost': nothing polled task queue {task_queue}@ghost for 1s" in message
    await replay(handle)


async def test_eval_run_says_which_case_run_waits_for_a_person(
    client, temporal_server, task_queue, llm, worker_factory, tmp_path
):
    """A case whose run waits for an approval: `eval run` names that run once, with how to see what
    it asks, under its bar; approved, the eval goes on and `eval run` ends with its report."""
    data = tmp_path / "cases.yaml"
    data.write_text("name: one\ncases:\n  - name: only\n    inputs: go\n")
    model = script(llm, {"tool_calls": [{"name": "send", "arguments": {"label": "x"}}]}, {"content": "sent"})
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    args = ("eval", "run", str(data), "--agent", "guarded", "--model", model)
    async with worker_factory():
        proc, line = await client_py_until(list(args), env, b"waits for a person")
        try:
            run_id = line.decode().split("case run ", 1)[1].split(" ", 1)[0]
            assert line.decode().strip().endswith(f"client.py status {run_id}")
            run = AgentClient(client, task_queue=task_queue).get(run_id)
            (call,) = (await run.status()).pending_approvals
            await run.approve(call.call_id, by="tester")
            out, rest = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, rest
    assert rest.decode().count("waits for a person") == 0  # said once, before the approval
    assert "completed · 1/1 done" in out.decode()


async def test_ctrl_c_stops_following_an_eval_not_the_eval(client, temporal_server, task_queue, llm, worker_factory):
    """Ctrl-C on `eval run` ends the command (exit 130) and says the eval goes on, with the
    command that follows it again; the eval is still running."""
    model = script(llm, {"tool_calls": [{"name": "send", "arguments": {"label": "x"}}]}, {"content": "sent"})
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    eid = f"eval-interrupted-{uuid.uuid4().hex[:6]}"
    args = ["eval", "run", str(ROOT / "examples" / "weather_eval.yaml"), "--agent", "guarded", "--model", model]
    async with worker_factory():
        proc, _ = await client_py_until([*args, "--id", eid], env, b"waits for a person")
        proc.send_signal(signal.SIGINT)
        _, rest = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 130, rest
        assert f"stopped following; eval {eid} goes on: python client.py eval watch {eid}" in rest.decode()
        assert "Traceback" not in rest.decode()
        handle = client.get_workflow_handle(eid)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        await handle.cancel()
