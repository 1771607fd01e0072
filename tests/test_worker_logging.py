"""A worker's log never holds the worker up: a standard error that nobody reads costs log lines only."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from temporalio.client import Client

from durable_agent_runner.worker.log_relay import CLOSE_SECONDS, FORMAT, RelayHandler
from tests.helpers import start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.asyncio
async def test_a_worker_whose_stderr_nobody_reads_keeps_working(
    client: Client, temporal_server: Any, llm: Any, task_queue: str
) -> None:
    # At DEBUG a turn logs about 5 KB (httpcore's request lines, the SDK's): 150 turns fill
    # a 64 KiB pipe several times over. Nothing reads the pipe until the run has ended.
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "LLM_BASE_URL": llm.base_url}
    cmd = [sys.executable, "worker.py", "--tools", "tests/fixtures/agents.py", "--task-queue", task_queue]
    proc = subprocess.Popen(
        [*cmd, "--log-level", "DEBUG"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        handle = await start(client, task_queue, "go", agent="looper", model="loop:150:10")
        result = await asyncio.wait_for(handle.result(), 90)
        assert result.turns == 150
    finally:
        drained: list[bytes] = []
        reader = threading.Thread(target=lambda: drained.append(proc.stdout.read() if proc.stdout else b""))
        reader.start()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        reader.join(10)
        if proc.stdout:
            proc.stdout.close()
    text = b"".join(drained).decode(errors="replace")
    assert "INFO worker: stopped" in text, text[-2000:]  # its log went on once read, to the last line


class Blocked(io.StringIO):
    """A standard error whose writes wait until `open` is set: a pipe nobody reads, then read."""

    def __init__(self) -> None:
        super().__init__()
        self.open = threading.Event()

    def write(self, text: str) -> int:
        self.open.wait()
        return super().write(text)


def test_a_full_queue_drops_records_and_says_how_many_once_written_again() -> None:
    stream = Blocked()
    handler = RelayHandler(stream, records=5)
    handler.setFormatter(logging.Formatter(FORMAT))
    log = logging.getLogger("tests.relay")
    log.addHandler(handler)
    log.propagate = False
    try:
        began = time.monotonic()
        for i in range(20):
            log.warning("line %d", i)
        assert time.monotonic() - began < 1.0  # logging never waited on the blocked stream
        stream.open.set()
        handler.close()
    finally:
        log.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("line 0") and lines[-1].endswith("log records dropped: standard error was not being read")
    written = sum("tests.relay: line" in line for line in lines)
    assert re.search(rf"WARNING durable_agent_runner.worker.log_relay: {20 - written} log records dropped", lines[-1])


def test_closing_over_a_stream_that_never_takes_a_line_returns_in_bounded_time() -> None:
    handler = RelayHandler(Blocked(), records=5)
    handler.emit(logging.makeLogRecord({"msg": "stuck"}))
    began = time.monotonic()
    handler.close()
    assert time.monotonic() - began < 2 * CLOSE_SECONDS + 1


def test_a_module_that_hangs_while_loading_is_said_and_ctrl_c_stops_the_worker_in_one_line(
    tmp_path: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a --tools module whose import waited (on a database, say) held the worker silent,
    and Ctrl-C while it loaded or while it connected to Temporal printed a KeyboardInterrupt
    traceback. The modules now load before the event loop: Ctrl-C stops the load itself."""
    from durable_agent_runner.worker import main as worker_main

    module = tmp_path / "hangs.py"  # its import is interrupted by Ctrl-C, as a real one would be
    module.write_text("import time\n\ntime.sleep(1.0)\nraise KeyboardInterrupt\n")
    monkeypatch.setattr(worker_main, "SLOW_IMPORT", 0.2)
    assert worker_main.main(["--tools", str(module), "--task-queue", "q"]) == 130
    err = capfd.readouterr().err
    assert f"still loading {module} after 0 s: a module's top-level code has not returned" in caplog.text
    assert err.strip().splitlines()[-1] == f"worker.py: stopped while loading {module}", err
    assert "Traceback" not in err
