"""client.py gives a clear answer within a bound where it once gave none: no worker to take a
decision, a fork past the last model call, JSON nested without end, a reader that went away,
encrypted payloads without keys, and `--help` on every command."""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import client as client_py
from durable_agent_runner.cli.args import integer, json_object, number
from durable_agent_runner.client import errors
from tests.helpers import calls, closed_address, script, start
from tests.test_approvals import pending, status
from tests.test_client import ROOT, Cli, cli, one_clean_line  # noqa: F401  (cli is a fixture)

WAIT = 2.0
STARTUP = 8.0  # the interpreter and its imports, on a busy 2-core machine: a bound, not a speed goal


async def test_approve_with_no_worker_is_bounded_then_applied_once(
    cli: Cli, client, task_queue, worker_factory, llm, counter_file
) -> None:
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent it"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(handle)
    # No worker polls the run's queue now: before, approve blocked for minutes.
    for _ in range(2):  # and the same decision again, as a user would retry it
        done = await cli("approve", handle.id, waiting.call_id, "--wait", str(WAIT))
        assert done.code == 3, str(done)
        line = one_clean_line(done.err)
        assert f"no worker answered within {WAIT:g}s: is a worker running for task queue {task_queue}?" in line
        assert done.seconds < WAIT + STARTUP, str(done)
    assert not counter_file.exists()
    async with worker_factory():  # as documented: applied once by the next worker, or never; not twice
        result = await handle.result()
        decisions = (await status(handle)).decisions
    assert result.output == "sent it"
    assert counter_file.read_text().count("send:x ") == 1
    assert len(decisions) == 1 and decisions[0].approved


async def test_pause_and_end_with_no_worker_are_bounded(cli: Cli, client, task_queue, worker_factory, llm) -> None:
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent it"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        await pending(handle)
    for command in (["pause", handle.id], ["resume", handle.id], ["end", handle.id], ["send", handle.id, "hi"]):
        flag = "--wait-worker" if command[0] == "send" else "--wait"
        done = await cli(*command, flag, str(WAIT), "--json")
        assert done.code == 3 and done.seconds < WAIT + STARTUP, f"{command}: {done}"
        assert "no worker answered" in done.json()["error"], f"{command}: {done}"
    await handle.terminate()


async def test_fork_past_the_last_model_call_is_refused(cli: Cli, client, task_queue, worker_factory, llm) -> None:
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent it"})
    async with worker_factory():
        handle = await start(client, task_queue, "send it", agent="guarded", model=model)
        await pending(handle)  # one model call made; its tool call waits for a person
        past = await cli("fork", handle.id, "--at-turn", "2")
        assert past.code == 2, str(past)
        assert "the calls of model call 1 have no results yet" in one_clean_line(past.err)
        too_far = await cli("fork", handle.id, "--at-turn", "3")
        assert too_far.code == 2 and "has made 1 model call(s)" in one_clean_line(too_far.err), str(too_far)
        ok = await cli("fork", handle.id, "--at-turn", "1", "--json")
        assert ok.code == 0, str(ok)
        await client.get_workflow_handle(ok.json()["run_id"]).terminate()
        await handle.terminate()


async def test_deeply_nested_json_arguments_are_one_line(cli: Cli) -> None:
    deep = '{"extra_body": ' + "[" * 5000 + "]" * 5000 + "}"
    with closed_address() as nobody:  # a port merely found free may be taken by another test process
        done = await cli("run", "--model-settings", deep, "hello", env={"TEMPORAL_ADDRESS": nobody})
    assert done.code == 2, str(done)
    assert "--model-settings is nested deeper than 32 levels" in one_clean_line(done.err)
    with pytest.raises(ValueError, match="--args is longer than 1,048,576 characters"):  # past what a shell passes, too
        json_object('{"a": "' + "x" * (1024 * 1024) + '"}', "--args")


async def test_a_server_on_a_port_in_use_says_so_in_one_line_and_prints_no_link(cli: Cli) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        secret = {"COMPLETION_SECRET": "s" * 16, "CONSOLE_TOKEN": "t" * 16}
        for command in (["console", "--port", port], ["serve-hooks", "--port", port]):
            done = await cli(*command, env=secret, timeout=20)
            assert done.code == 2 and done.out == "", str(done)  # no link to a server that is not there
            assert one_clean_line(done.err).endswith(
                f"cannot listen on 127.0.0.1:{port}: Address already in use (choose another --port or --host)"
            ), done.err
    done = await cli("console", "--host", "192.0.2.1", "--port", port, env=secret, timeout=20)  # TEST-NET-1: not ours
    assert done.code == 2 and done.out == "", str(done)
    assert "cannot listen on 192.0.2.1:" in one_clean_line(done.err), done.err


def test_list_into_a_closed_pipe_ends_quietly(temporal_server) -> None:
    read, write = os.pipe()
    os.close(read)  # `| head` that has already read its fill
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target}
    try:
        done = subprocess.run(
            [sys.executable, "client.py", "list"], cwd=ROOT, env=env, stdout=write, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write)
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()


async def test_encrypted_payloads_without_keys_say_which_variable_to_set(cli: Cli, task_queue) -> None:
    keys = {"PAYLOAD_CODEC_KEYS": "k1:" + base64.b64encode(b"0" * 32).decode()}
    started = await cli("run", "a secret", env=keys)
    assert started.code == 0, str(started)
    run_id = started.out.strip()
    done = await cli("export", run_id)
    assert done.code == 2, str(done)
    assert "PAYLOAD_CODEC_KEYS" in one_clean_line(done.err)


def test_version_says_the_package_s_release_and_needs_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    from durable_agent_runner import __version__

    with pytest.raises(SystemExit) as ended:
        client_py.main(["--version"])
    assert ended.value.code == 0 and capsys.readouterr().out == f"durable-agent-runner {__version__}\n"
    assert __version__.startswith("2.")  # pyproject.toml's, as installed


@pytest.mark.parametrize(
    ("started", "hint", "worker"),
    [
        ("client.py", "python client.py approve r c", "python worker.py"),
        ("durable-agent-runner", "durable-agent-runner approve r c", "durable-agent-runner-worker"),
        (
            "python -m durable_agent_runner",
            "python -m durable_agent_runner approve r c",
            "python -m durable_agent_runner.worker",
        ),
    ],
)
def test_hints_name_the_command_as_it_was_started(
    started: str, hint: str, worker: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every hint said `python client.py ...` (and `python worker.py`), which the installed
    command's users do not have: its usage and errors named the command as started, its hints did not."""
    monkeypatch.setattr(errors, "_prog", [errors.prog()])  # restored after
    errors.started_as(started)
    assert errors.cli("approve r c") == hint
    assert errors.worker("--task-queue q") == f"{worker} --task-queue q"
    with pytest.raises(SystemExit):
        client_py.main(["status", "--help"])
    assert capsys.readouterr().out.startswith(f"usage: {started} status")


def test_every_command_and_its_ids_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = client_py.parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(commands.choices) >= 18
    for name, sub in commands.choices.items():
        with pytest.raises(SystemExit) as ended:
            client_py.main([name, "--help"])
        assert ended.value.code == 0, name
        out = capsys.readouterr().out
        assert out.startswith(f"usage: durable-agent-runner {name}"), name  # in-process: as installed
        verbs = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]  # `schedule VERB`: each verb's
        parsers = list(verbs[0].choices.values()) if verbs else [sub]
        has_json = all(any("--json" in a.option_strings for a in p._actions) for p in parsers)
        assert has_json or name in ("export", "codec-server", "console", "serve-hooks"), f"{name} has no --json"
        for p in parsers:  # and each id and flag it takes says what it is (`approve RUN CALL`, `--concurrency N`)
            for a in p._actions:
                assert a.help, f"{p.prog}: {a.option_strings or a.dest} has no help"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "--budget-usd", "0", "hi"], "--budget-usd: must be more than 0 (a cap of 0 stops every run at once)"),
        (["run", "--budget-tokens", "-3", "hi"], "--budget-tokens: must be at least 1"),
        (["run", "--budget-usd", "nan", "hi"], "--budget-usd: Input should be a finite number"),
        (["run", "--budget-tokens", "1.5", "hi"], "argument --budget-tokens: invalid int value: '1.5'"),
        (["chat", "--budget-usd", "0"], "--budget-usd: must be more than 0"),
        (["fork", "r", "--at-turn", "1", "--budget-tokens", "0"], "--budget-tokens: must be at least 1"),
        (["chat", "chat-1", "--budget-tokens", "5"], "--agent, --model, --id and --budget-* start a new chat"),
        (["schedule", "create", "s", "--agent", "a", "--input", "hi", "--every", "1h", "--budget-usd", "-1"],
         "--budget-usd: must be more than 0"),
        # and a piped chat's wait for a decision is bounded (NaN and inf passed, and inf never ended)
        (["chat", "--approval-wait", "nan"], "--approval-wait must be a number of seconds in (0, 86,400]"),
        (["chat", "--approval-wait", "inf"], "--approval-wait must be a number of seconds in (0, 86,400]"),
        # and who decides or talks is named: `--by ""` was recorded as "approved by " (no one)
        (["approve", "r", "c", "--by", ""], "argument --by: is empty: name who it is, or leave it out"),
        (["send", "r", "hi", "--by", " "], "argument --by: is empty: name who it is, or leave it out"),
        (["resolve", "r", "c", "--rerun", "--by", ""], "argument --by: is empty"),
        # and numbers are written in ASCII digits: int() and float() took '٣' (Arabic-Indic 3) and '1_0'
        (["run", "--max-turns", "٣", "hi"], "argument --max-turns: not a whole number: '٣'"),
        # the client's bound, named by its flag before connecting: was `max_turns: must be between …`
        (["run", "--max-turns", "99999", "hi"], "error: --max-turns: must be between 1 and 10,000"),
        # an empty --agent (an unset "$AGENT") listed every run as if no filter had been given
        (["list", "--agent", ""], "argument --agent: must be 1-200 printable characters"),
        # a new id, by the client's rule, at every verb that starts something: chat said `id: …` and
        # eval run `eval_id: …`, after connecting
        (["chat", "--id", " x"], "argument --id: must not begin or end with a space"),
        (["eval", "run", "examples/weather_eval.yaml", "--agent", "demo", "--id", " x"], "argument --id: must not"),
        (["fork", "r", "--at-turn", "1", "--id", ""], "argument --id: must be 1-255 printable characters"),
        (["fork", "r", "--at-turn", "١"], "argument --at-turn: not a whole number: '١'"),
        # ids and numbers the client refuses, refused before connecting: with no server, each was
        # `cannot reach Temporal`, the real problem unsaid
        (["status", ""], "argument run_id: must be 1-1000 printable characters"),
        (["approve", "r", ""], "argument call_id: must be 1-200 printable characters"),
        (["diff", "a", ""], "argument run_b: must be 1-1000 printable characters"),
        (["eval", "status", ""], "argument eval_id: must be 1-1000 printable characters"),
        (["chat", "\t"], "argument run_id: must be 1-1000 printable characters"),
        (["fork", "r", "--at-turn", "0"], "argument --at-turn: must be from 1 to 1,000,000, not 0"),
        (["watch", "r", "--since", "-1"], "argument --since: must be from 0 to 1,000,000,000,000, not -1"),
        (["resume", "r", "--add-tokens", "0"], "argument --add-tokens: must be from 1 to 1,000,000,000, not 0"),
        (["resume", "r", "--add-usd", "nan"], "argument --add-usd: must be more than 0 and at most 1,000,000, not nan"),
        (["answer", "r", "c", "--choice", "0"], "argument --choice: must be from 1 to 20, not 0"),
        (["list", "--limit", "5000"], "argument --limit: must be from 1 to 1,000, not 5000"),
        # an empty --agent (an unset "$AGENT") anywhere a run's agent is named
        (["run", "--agent", "", "hi"], "argument --agent: must be 1-200 printable characters"),
        (["chat", "--agent", ""], "argument --agent: must be 1-200 printable characters"),
        (["eval", "run", "examples/weather_eval.yaml", "--agent", ""], "argument --agent: must be 1-200 printable"),
        # an edit is made before connecting: which one, its index, its role, its JSON
        (["edit", "r", "--drop", "-1"], "error: --drop INDEX: must be between 0 and 1,000,000,000"),
        (["edit", "r", "--insert", "0", "system", "hi"], "error: --insert ROLE must be user or assistant"),
        (["edit", "r", "--args", "c", "[1]"], "error: --args must be a JSON object of the call's arguments"),
        (["edit", "r", "--agent", ""], "argument --agent: must be 1-200 printable characters"),
        (["edit", "r", "--drop-call", ""], "error: --drop-call: must be 1-200 printable characters"),
        # JSON given on the command line, read before connecting too
        (["approve", "r", "c", "--args", "[1]"], "argument --args: must be a JSON object of the tool's arguments"),
        (["approve", "r", "c", "--args", '{"a": 1, "a": 2}'], "argument --args: gives 'a' twice: give each key once"),
        (["resolve", "r", "c", "--result", "{bad"], "argument --result: is not valid JSON: Expecting property name"),
        (["complete", "r", "c", "--result", "NaN"], "argument --result: is not valid JSON: NaN is not JSON"),
        (["run", "--agent", "demo", " "], "error: the prompt is empty"),
        (["send", "r", ""], "error: the message is empty"),
        (["reject", "r", "c", "--reason", " "], "argument --reason: is empty: the model is told it, so say why"),
        (["resolve", "r", "c", "--fail", ""], "argument --fail: is empty: the model is told it, so say why"),
        (["pause", "r", "--reason", "x" * 1001], "argument --reason: is longer than 1,000 characters (1,001)"),
        (["end", "r", "--reason", "x" * 1001], "argument --reason: is longer than 1,000 characters (1,001)"),
        (["reject", "r", "c", "--reason", "x" * 4001], "argument --reason: is longer than 4,000 characters (4,001)"),
        (["run", "--temperature", "٠.5", "hi"], "argument --temperature: invalid float value: '٠.5'"),
        (["run", "--budget-tokens", "1_000", "hi"], "argument --budget-tokens: invalid int value: '1_000'"),
        (["approve", "r", "c", "--wait", "٣"], "must be a number of seconds in (0, 3600], not '٣'"),
        (["eval", "list", "--limit", "٣"], "argument --limit: not a whole number: '٣'"),
    ],
)  # fmt: skip
def test_a_cap_is_checked_before_connecting(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` and `chat` take a cap for one run or session, as `schedule create` and `eval run` do
    for theirs; each is named as its flag (a schedule's said `budget_usd:`)."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:9")  # nothing listens: a check that passed would say so
    with pytest.raises(SystemExit) as ended:
        client_py.main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and said in err and err.count("\n") == 1, err


@given(st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=6), st.sampled_from(["", "-", "."]))
def test_a_number_flag_takes_ascii_digits_only(digits: str, sign: str) -> None:
    """Whatever a flag's number, it reads as Python reads ASCII digits, and nothing else."""
    text = sign + digits if sign != "." else digits + "." + digits
    ascii_only = digits.isascii()
    for parse, python in ((integer, int), (number, float)):
        if parse is integer and sign == ".":
            continue
        if ascii_only:
            assert parse(text) == python(text)
        else:
            with pytest.raises(argparse.ArgumentTypeError, match=r"^invalid (int|float) value: "):
                parse(text)
