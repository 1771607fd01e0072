"""`client.py chat` as people use it: at a terminal (a pseudo-terminal), and through a pipe.

The chat runs as a subprocess against the session's Temporal dev server while the project's
worker runs in-process on the test's task queue; fake_llm scripts the agent's replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus

from durable_agent_runner.cli.chat_view import (
    Awaited,
    ChatPrinter,
    Command,
    Style,
    parse_arguments,
    parse_choice,
    parse_line,
    render_exchange,
    render_status,
    wants_colour,
)
from durable_agent_runner.cli.messages import print_exchange
from durable_agent_runner.client.errors import cli
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests import helpers
from tests.helpers import calls, script
from tests.test_client import Done, one_clean_line

ROOT = Path(__file__).resolve().parent.parent
CLIENT = "client.py"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
STORY = (
    "Tokyo is sunny and mild today at twenty two degrees, while Paris sits under low cloud at fifteen; "
    "if you are choosing where to walk this afternoon, Tokyo is the warmer and brighter choice by far."
)
MORE = " ".join(f"Then part {i} of a long second answer, written slowly so that you can watch it." for i in range(6))
# Starts `python client.py …` with the pseudo-terminal as its controlling terminal, so that ^C
# typed there is a SIGINT from the terminal, as for a person.
WITH_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def env_for(temporal_server, task_queue, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return env | {"TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue} | extra


def streaming(llm) -> LLMSettings:
    return LLMSettings(base_url=llm.base_url, model="demo", stream=True)


# -------------------------------------------------------------------------------- at a terminal


class Terminal:
    """`client.py chat` on a pseudo-terminal: what a person types, and the screen they read."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self.proc, self.master = proc, master
        self.raw = bytearray()
        self.seen = 0  # expect() looks past what earlier expects matched
        self.changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def open(cls, env: dict[str, str], *args: str) -> Terminal:
        master, slave = os.openpty()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WITH_TERMINAL, CLIENT, "chat", *args,
            cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        os.set_blocking(master, False)
        return cls(proc, master)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the chat has exited and the terminal hung up
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.raw += data
        self.changed.set()

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r\n", "\n")

    async def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Waits until `pattern` (a regex) shows up past what was matched before."""
        deadline = time.monotonic() + timeout
        while not (match := re.compile(pattern).search(self.screen, self.seen)):
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{pattern!r} not on screen after {timeout}s:\n{self.screen}") from None
        self.seen = match.end()
        return match

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    async def exit_code(self, timeout: float = 30) -> int:
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            raise AssertionError(f"chat still running after {timeout}s:\n{self.screen}") from None

    def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)


async def test_a_conversation_at_a_terminal(
    client, temporal_server, task_queue, worker_factory, llm, counter_file
) -> None:
    """Streamed answers, an approval asked and edited inline, /status, Ctrl-C leaves the session
    running, and rejoining follows the answer in progress, then /end ends it."""
    llm.set_latency(0, stream_event_ms=60)
    model = script(
        llm,
        calls(("send", {"label": "report"})),
        {"content": STORY, "delta_chars": 6},  # ~35 frames 60 ms apart: ~2 s of visible writing
        {"content": MORE, "delta_chars": 4},  # ~120 frames: ~7 s, time to leave and come back
        calls(("send", {"label": "another"})),
        {"content": "As you wish: I did not send it."},
    )
    env = env_for(temporal_server, task_queue)
    async with worker_factory(settings=streaming(llm)):
        term = await Terminal.open(env, "--agent", "guarded", "--model", model, "--by", "tess")
        try:
            run_id = (await term.expect(r"session (\S+) with guarded")).group(1)
            await term.expect(r"you> ")
            term.type("please send the report\r")
            await term.expect(r'send\(\{"label": "report"\}\) needs your approval')
            await term.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
            term.type("e\r")
            await term.expect(r"new arguments as a JSON object")
            term.type("{label: oops\r")  # not JSON: said at once, asked again
            await term.expect(r"not valid JSON.*\n.*new arguments as a JSON object")
            term.type('{"label": 7}\r')  # JSON, but the tool's schema refuses it: the run says why
            await term.expect(r"refused: edited arguments for send are invalid")
            await term.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
            term.type("e\r")
            await term.expect(r"new arguments")
            term.type('{"label": "edited"}\r')
            await term.expect(r"send call_1_0: approved by tess \(arguments edited\)")
            await term.expect(r"← send: .*\nsent edited")
            # The answer shows while it is being written: its start before its end exists.
            await term.expect(r"guarded> " + re.escape(STORY[:24]))
            assert STORY[-40:] not in term.screen, "the answer should be visible while it is still being written"
            await term.expect(re.escape(STORY[-40:]) + r"\n+you> ")
            assert term.screen.count(STORY[-40:]) == 1  # shown once: the finished reply completes the stream
            assert "\x1b[" in term.raw.decode(errors="replace")  # a terminal gets colour

            term.type("/status\r")
            await term.expect(r"state: +waiting")
            await term.expect(r"messages: 1 received, 1 answered")
            await term.expect(r"tokens: +\d+ in")
            term.type("/frobnicate\r")
            await term.expect(r"unknown command /frobnicate: /help")

            term.type("tell me more\r")
            await term.expect(re.escape(MORE[:30]))
            term.type("\x03")  # Ctrl-C: leave, the session goes on
            await term.expect(
                rf"detached; the session goes on\. rejoin it: python client\.py chat {run_id} · "
                rf"end it: python client\.py end {run_id}"
            )
            assert await term.exit_code() == 0
            assert MORE[-30:] not in term.screen
        finally:
            term.close()
        handle = client.get_workflow_handle(run_id, result_type=t.RunResult)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert live.session is not None and live.session.state == "answering" and live.session.messages == 2

        back = await Terminal.open(env, run_id, "--by", "tess")
        try:
            await back.expect(rf"rejoined session {run_id} with guarded: 2 message\(s\), 1 answered, answering")
            await back.expect(r"tess> tell me more\n +\(being answered: following it\)")
            await back.expect(re.escape(MORE[-30:]) + r"\n+you> ")  # the answer in progress, followed to its end
            back.type("send another one\r")
            await back.expect(r"approve\? \[y\]es / \[n\]o / \[e\]dit: ")
            back.type("n\r")
            await back.expect(r"reason, for the model")
            back.type("not today\r")
            await back.expect(r"send call_4_0: rejected: not today by tess")
            await back.expect(r"guarded> As you wish: I did not send it\.\n+you> ")
            back.type("\x04")  # Ctrl-D: leave too
            await back.expect(rf"detached; the session goes on\. rejoin it: python client\.py chat {run_id}")
            assert await back.exit_code() == 0
        finally:
            back.close()
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

        last = await Terminal.open(env, run_id, "--by", "tess")
        try:  # waiting for a message: the last exchange, briefly, then the prompt
            await last.expect(r"3 message\(s\), 3 answered, waiting")
            await last.expect(r"tess> send another one\nguarded> As you wish: I did not send it\.\nyou> ")
            last.type("/help\r")
            await last.expect(r"/end +end the session")
            await last.expect(r"/quit +leave; the session goes on")  # before, only Ctrl-C or Ctrl-D was said
            last.type("/end\r")
            await last.expect(rf"session {run_id} has ended")
            assert await last.exit_code() == 0
        finally:
            last.close()
        result = await handle.result()
        assert result.messages == 3 and result.output.startswith("As you wish") and "tess" in result.ended_by
    assert counter_file.read_text().startswith("send:edited ")  # the edited call ran, once
    assert counter_file.read_text().count("send:") == 1


# ------------------------------------------------------------------------------ through a pipe


async def chat_through_a_pipe(env: dict[str, str], *args: str, lines: str, timeout: float = 60) -> Done:
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, CLIENT, "chat", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(lines.encode()), timeout)
    except TimeoutError:
        proc.kill()
        raise AssertionError(f"chat {' '.join(args)} still running after {timeout}s") from None
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode(), time.monotonic() - began)


async def test_through_a_pipe_each_line_is_a_message_and_each_answer_a_line(
    client, temporal_server, task_queue, worker_factory, llm
) -> None:
    model = script(llm, {"content": "first answer"}, {"content": "second answer"}, {"content": "third\nanswer"})
    env = env_for(temporal_server, task_queue)
    async with worker_factory(settings=streaming(llm)):
        done = await chat_through_a_pipe(env, "--agent", "chatter", "--model", model, lines="hello\n\nhow are you?\n")
        assert done.code == 0, str(done)
        assert done.out == "first answer\nsecond answer\n", str(done)  # answers only; the blank line sent nothing
        assert "\x1b" not in done.out + done.err and "you>" not in done.out + done.err
        run_id = re.search(r"rejoin it: python client\.py chat (\S+)", done.err)
        assert run_id is not None, str(done)
        handle = client.get_workflow_handle(run_id.group(1), result_type=t.RunResult)
        live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        assert live.session is not None and (live.session.state, live.session.answered) == ("waiting", 2)
        assert live.session.last is not None and live.session.last.prompt == "how are you?"

        # With --json, a script reads one object per answer (a multi-line answer stays one line).
        as_json = await chat_through_a_pipe(env, handle.id, "--json", lines="and a third?\n")
        assert as_json.code == 0 and as_json.out.count("\n") == 2, str(as_json)
        answer, detached = (json.loads(line) for line in as_json.out.splitlines())
        assert answer == {"type": "answer", "run_id": handle.id, "message": 3, "answer": "third\nanswer", "yours": True}
        assert detached == {"type": "detached", "run_id": handle.id, "pending_approval": None}

        ended = await chat_through_a_pipe(env, handle.id, lines="/end\n")
        assert ended.code == 0 and ended.out == "", str(ended)
        assert f"session {handle.id} has ended" in ended.err and "Traceback" not in ended.err
        result = await handle.result()
        assert result.messages == 3 and result.output == "third\nanswer"


async def test_a_reader_that_stops_reading_ends_the_chat_quietly(client, temporal_server, task_queue, worker_factory):
    """`echo "" | client.py chat --json | head -1` (the tour's way to start a session and take its
    id): `head` closes the pipe, and chat's next line met a broken pipe. It said `chat:
    BrokenPipeError: [Errno 32] Broken pipe; the session goes on`; now it ends quietly, and the
    session goes on."""
    env = env_for(temporal_server, task_queue)
    line = (
        f"echo '' | {sys.executable} {CLIENT} chat --agent chatter --json | head -1; echo \"rc=${{PIPESTATUS[1]}}\" >&2"
    )
    async with worker_factory():
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", line, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert err.decode() == "rc=0\n", err.decode()
        first = json.loads(out.decode())
        live: t.RunStatus = await client.get_workflow_handle(first["run_id"]).query(
            t.STATUS_QUERY, result_type=t.RunStatus
        )
        assert live.session is not None and live.session.state == "waiting"


async def test_raise_in_a_chat_lets_a_session_whose_budget_is_spent_go_on(
    client, temporal_server, task_queue, worker_factory, llm
) -> None:
    """`/raise N` in chat: a session whose budget a message spent goes on, without leaving the
    chat for `client.py resume`; a raise written wrongly or of a kind the session has not says
    so, and the chat goes on."""
    model = script(llm, {"content": "one"}, {"content": "two"})
    env = env_for(temporal_server, task_queue)
    async with worker_factory():
        lines = "first\nsecond\n/raise lots\n/raise $1\n/raise 100000\nthird\n"
        done = await chat_through_a_pipe(
            env, "--agent", "chatter", "--model", model, "--budget-tokens", "1", lines=lines
        )
    assert done.out == "one\ntwo\n", str(done)  # message 2 failed on the budget; 3 answered after the raise
    assert "raise its budget for the next message: /raise N (N tokens)" in done.err, str(done)
    assert "/raise N adds N tokens to the session's budget, /raise $X adds X US dollars" in done.err
    assert "budget raised +100000 tokens by" in done.err and "Traceback" not in done.err
    # said once: the raise's event, when the chat follows the run again, is not a second line
    assert done.err.count("budget raised") == 1, done.err
    # a kind of budget the session has not: refused in words the chat's `/raise` fits, not resume's flags
    assert "this run has no cost budget to raise: add tokens instead" in done.err and "--add" not in done.err


async def test_through_a_pipe_a_call_that_needs_approval_is_announced_and_waited_for(
    client, temporal_server, task_queue, worker_factory, llm, counter_file
) -> None:
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent it"})
    env = env_for(temporal_server, task_queue)
    async with worker_factory():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, CLIENT, "chat", "--agent", "guarded", "--model", model, cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b"send x\n")
        proc.stdin.close()
        told = ""
        async with asyncio.timeout(30):
            while "waiting up to 600 s for a decision" not in told:
                told += (await proc.stderr.readline()).decode()
        hint = re.search(r"python client\.py approve (\S+) (call_\S+)", told)
        assert hint is not None and "python client.py reject" in told, told
        assert not counter_file.exists()  # nothing is sent before someone decides
        approve = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", "approve", hint.group(1), hint.group(2), "--by", "olga", cwd=ROOT, env=env
        )
        assert await approve.wait() == 0
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "sent it\n"
    assert "approved by olga" in err.decode()
    assert counter_file.read_text().count("send:x ") == 1


async def test_through_a_pipe_nobody_deciding_is_bounded(client, temporal_server, task_queue, worker_factory, llm):
    model = script(llm, calls(("send", {"label": "x"})), {"content": "sent it"})
    env = env_for(temporal_server, task_queue)
    async with worker_factory():
        done = await chat_through_a_pipe(
            env, "--agent", "guarded", "--model", model, "--approval-wait", "1.5", lines="send x\n"
        )
        assert done.code == 1, str(done)
        assert re.search(r"nobody decided call_1_0 within 1\.5 s", done.err), str(done)
        assert "Traceback" not in done.err and done.out == ""
        run_id = re.search(r"python client\.py chat (\S+)", done.err)
        assert run_id is not None
        live: t.RunStatus = await client.get_workflow_handle(run_id.group(1)).query(
            t.STATUS_QUERY, result_type=t.RunStatus
        )
        assert [p.call_id for p in live.pending_approvals] == ["call_1_0"]  # still waiting for someone


async def test_through_a_pipe_an_answer_is_waited_for_a_bounded_time(
    client, temporal_server, task_queue, worker_factory
):
    """Before: a piped chat whose answer never came (here: no worker serves the agent) waited
    forever after its warning, a script's step that never ended. Now --answer-wait bounds it."""
    env = env_for(temporal_server, task_queue)
    async with worker_factory():  # serves the queue, not the agent 'ghost'
        done = await chat_through_a_pipe(env, "--agent", "ghost", "--answer-wait", "2", lines="hello\n", timeout=40)
    assert done.code == 1, str(done)
    assert "chat: no answer within 2 s; leaving (--answer-wait)" in done.err, str(done)
    assert "Traceback" not in done.err and done.out == ""
    run_id = re.search(r"the session goes on: python client\.py chat (\S+)", done.err)
    assert run_id is not None, str(done)
    described = await client.get_workflow_handle(run_id.group(1)).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING  # left, not ended
    await client.get_workflow_handle(run_id.group(1)).cancel()
    bad = await chat_through_a_pipe(env, "--answer-wait", "inf", lines="")
    assert bad.code == 2 and "--answer-wait must be a number of seconds in (0, 86,400]" in bad.err, str(bad)


async def test_through_a_pipe_a_calls_hostile_arguments_are_announced_without_terminal_controls(
    client, temporal_server, task_queue, worker_factory, llm
):
    """A model chose the arguments: an 8-bit CSI (\x9b, which JSON does not escape) or an escape in
    them reaches the person's terminal as U+FFFD, in the announcement and in the story's lines."""
    label = "x\x9b2J\x1b]0;pwned\x07"
    model = script(llm, calls(("send", {"label": label})), {"content": "sent it"})
    env = env_for(temporal_server, task_queue)
    async with worker_factory():
        done = await chat_through_a_pipe(
            env, "--agent", "guarded", "--model", model, "--approval-wait", "1.5", lines="send x\n"
        )
    assert "needs approval; decide from another shell" in done.err, str(done)
    assert not any(ch in done.err + done.out for ch in "\x9b\x1b\x07"), repr(done.err)
    assert "x\ufffd2J" in done.err


async def test_a_restarted_server_is_ridden_out(client, temporal_server, task_queue, worker_factory, llm):
    model = script(llm, calls(("patient_record", {"label": "a", "seconds": 6})), {"content": "survived"})
    env = env_for(temporal_server, task_queue)
    run_id = f"chat-restart-{task_queue}"
    async with worker_factory():
        chat = asyncio.create_task(
            chat_through_a_pipe(env, "--agent", "chatter", "--model", model, "--id", run_id, lines="go\n", timeout=120)
        )

        async def in_the_tool() -> bool:
            try:
                live = await client.get_workflow_handle(run_id).query(t.STATUS_QUERY, result_type=t.RunStatus)
            except Exception:
                return False
            return live.phase == "running_tools"

        async with asyncio.timeout(30):
            while not await in_the_tool():
                await asyncio.sleep(0.2)
        temporal_server.stop()  # SQLite keeps the history (not in a thread: test_durability's restart says why)
        await asyncio.sleep(2.0)
        temporal_server.start()
        done = await chat
    # Only the answer on stdout: the SDK's own retry warnings (native code) must not land there either.
    assert done.code == 0 and done.out == "survived\n", str(done)
    assert "Traceback" not in done.err and "\x1b" not in done.out + done.err


async def test_a_message_no_worker_takes_is_said_within_seconds(client, temporal_server, task_queue, worker_factory):
    """Before: `chat` on a queue no worker polls, or with an agent no worker serves, sat silent for
    up to an hour (the message's update waits for a worker). Now it says what waits, on what."""
    nobody = f"{task_queue}-nobody"
    term = await Terminal.open(env_for(temporal_server, nobody), "--by", "tess")
    try:
        await term.expect(r"session \S+ with demo")
        term.type("hello\r")
        said = await term.expect(r"\(no worker polls task queue (\S+): start one", timeout=15)
        assert said.group(1) == nobody
    finally:
        term.close()
    async with worker_factory():  # serves the queue, not the agent 'ghost'
        term = await Terminal.open(env_for(temporal_server, task_queue), "--agent", "ghost", "--by", "tess")
        try:
            await term.expect(r"session \S+ with ghost")
            term.type("hello\r")
            await term.expect(
                rf"no worker serves agent 'ghost' .*nothing polls task queue {task_queue}@ghost", timeout=15
            )
        finally:
            term.close()


async def test_what_cannot_be_joined_is_a_usage_error(client, temporal_server, task_queue, worker_factory, llm):
    env = env_for(temporal_server, task_queue)
    unknown = await chat_through_a_pipe(env, "no-such-run", lines="")
    assert unknown.code == 2 and one_clean_line(unknown.err) == "client.py: error: no run with id 'no-such-run'"
    both = await chat_through_a_pipe(env, "some-run", "--agent", "chatter", lines="")
    assert both.code == 2 and "RUN_ID rejoins one" in one_clean_line(both.err)
    async with worker_factory():
        single = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="go", agent="guarded", model=script(llm, calls(("send", {"label": "x"})))),
            id=f"single-{task_queue}",
            task_queue=task_queue,
        )
        not_session = await chat_through_a_pipe(env, single.id, lines="hi\n")
        assert not_session.code == 2 and "is not a session" in one_clean_line(not_session.err)
        await single.terminate("done")
        ended = await chat_through_a_pipe(env, "--agent", "chatter", "--model", "echo", lines="/end\n")
        assert ended.code == 0, str(ended)
        run_id = re.search(r"session (\S+) has ended", ended.err)
        assert run_id is not None, str(ended)
        again = await chat_through_a_pipe(env, run_id.group(1), lines="hi\n")
        assert again.code == 2 and "has ended (completed)" in one_clean_line(again.err)
        as_json = await chat_through_a_pipe(env, run_id.group(1), "--json", lines="")
        assert as_json.code == 2 and '"exit_code": 2' in as_json.out


# --------------------------------------------------------------------------------- pure pieces


def test_lines_are_messages_commands_or_nothing():
    assert parse_line("hello there\n") == "hello there"
    assert parse_line("   \n") is None
    assert parse_line("/end\n") == Command("end")
    assert parse_line("/END  because\r\n") == Command("end", "because")
    assert parse_line("//etc/hosts is where?\n") == "/etc/hosts is where?"
    assert [parse_choice(a) for a in ["y", "Yes ", "n", "no", "e", "EDIT", "", "maybe"]] == [
        "y", "y", "n", "n", "e", "e", None, None,
    ]  # fmt: skip
    assert parse_arguments('{"label": "x"}') == {"label": "x"}
    for bad, why in [("{label: x}", "not valid JSON"), ('["x"]', "must be a JSON object"), ("", "not valid JSON")]:
        try:
            parse_arguments(bad)
        except ValueError as err:
            assert why in str(err)
        else:
            raise AssertionError(f"{bad!r} accepted")


def event(kind: str, turn: int = 1, text: str = "", detail: str = "", seq: int = 0) -> t.AnyRunEvent:
    return helpers.event(kind, seq=seq, turn=turn, text=text, detail=detail)


def test_a_reply_streams_under_the_agents_name_and_is_not_repeated():
    out = io.StringIO()
    p = ChatPrinter("r", False, out, style=Style(False), agent="demo", mine={1})
    p.event(event("message", text="hi", detail="message 1 from tess"))  # mine: not echoed
    p.event(event("model_started", detail="gpt"))
    p.delta(t.ModelProgress(turn=1, attempt=1, text="Hello the"))
    p.delta(t.ModelProgress(turn=1, attempt=1, text="Hello there, Tess."))
    p.event(event("model_finished", text="Hello there, Tess. How can I help?"))
    p.event(event("final", text="Hello there, Tess. How can I help?"))
    p.event(event("answered", text="Hello there, Tess. How can I help?", detail="message 1"))
    p.event(event("message", text="and me?", detail="message 2 from olga · 1 ahead"))
    p.event(event("tool_started", turn=2, detail="record(label=a)"))
    p.event(event("answered", turn=2, text="ToolError: boom", detail="message 2 · failed (ToolError)"))
    assert out.getvalue() == (
        "demo> Hello there, Tess. How can I help?\n"
        "olga> and me?\n"
        "  ⚙ record(label=a)\n"
        "✗ message 2 was not answered: ToolError: boom\n"
    )


def test_colour_only_when_asked_and_pipes_keep_steps_off_stdout():
    out, info = io.StringIO(), io.StringIO()
    p = ChatPrinter("r", False, out, style=Style(True), agent="demo", stream=False, info=info)
    p.event(event("tool_started", detail="record(label=a)"))
    p.event(event("model_finished", text="the answer"))
    p.event(event("final", text="the answer"))
    assert out.getvalue() == "" and info.getvalue() == "\x1b[2m  ⚙ record(label=a)\x1b[0m\n"
    assert Style(False).agent("demo> ") == "demo> "


class Screen(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_on_a_terminal_unless_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert wants_colour(Screen()) and not wants_colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_colour(Screen())


def test_what_a_chat_waits_for_after_sending():
    mine = Awaited(3)
    assert not mine.done(event("waiting"))  # an earlier wait, before message 3 went in
    assert not mine.done(event("answered", detail="message 2"))
    assert not mine.done(event("message", detail="message 3 from tess"))
    assert mine.done(event("answered", detail="message 3"))
    steering = Awaited(3, steer=True)
    steering.done(event("message", detail="message 3 from tess · steers the answer in progress"))
    assert steering.done(event("answered", detail="message 2"))  # the answer it joined


def test_status_says_how_many_messages_whether_answering_and_the_last_exchange():
    now = datetime.now(UTC)
    last = t.Exchange(message=2, prompt="and tomorrow?", by="tess", first_turn=3, started=now)
    status = t.RunStatus(
        run_id="r",
        agent="demo",
        status="running",
        phase="calling_model",
        turn=3,
        usage=t.Usage(requests=3, input_tokens=120, output_tokens=30),
        session=t.SessionStatus(messages=2, answered=1, state="answering", last=last),
    )
    text = render_status("r", status)
    assert "state:    answering" in text and "messages: 2 received, 1 answered" in text
    assert "tokens:   120 in (0 cached) · 30 out · 3 model calls" in text
    assert "last:     message 2 from tess: and tomorrow?\n          → (being answered)" in text


def test_a_message_that_failed_on_its_budget_says_how_the_next_one_gets_one():
    """A session's message that failed on its budget: the chat's line (with `/raise`), a rejoin's
    last exchange and `send --wait` say how to raise it (2.0.4). A rejoin showed such a message as `(being
    answered: following it)`, or its error under the agent's name."""
    out = io.StringIO()
    printer = ChatPrinter("chat-1", False, out, style=Style(False), stream=True, agent="demo")
    failure = event(
        "answered", text="token budget spent: 916 of 600", detail="message 2 · failed (TokenBudgetExceeded)"
    )
    printer.event(failure)
    assert out.getvalue() == (
        "✗ message 2 was not answered: token budget spent: 916 of 600\n"
        "  raise its budget for the next message: /raise N (N tokens)\n"  # chat's own command
    )
    other = event("answered", text="boom", detail="message 3 · failed (ModelBehaviorError)")
    assert printer.render(other) == "✗ message 3 was not answered: boom\n"  # no budget: no raise
    now = datetime.now(UTC)
    spent = t.Exchange(message=2, prompt="and Paris?", by="tess", first_turn=3, started=now, finished=now,
                       error="CostBudgetExceeded: cost budget spent")  # fmt: skip
    assert render_exchange(spent, "demo", Style(False)).endswith(
        "tess> and Paris?\n✗ not answered: CostBudgetExceeded: cost budget spent\n"
    )
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert print_exchange("chat-1", 2, spent, as_json=False) == 1
    assert said.getvalue().endswith(f"raise its budget for the next message: {cli()} resume chat-1 --add-usd X\n")
