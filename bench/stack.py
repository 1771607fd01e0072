"""What a bench runs against: one dev server, one FakeLLMServer, a client, and workers.

Workers run in a subprocess by default (`bench.worker_proc`): the fake model server and the
client live in this process, and on two cores a worker sharing their GIL would be charged for
their work. `--worker inproc` runs them here instead, via the same `make_worker`.
Everything started is stopped by `close()`, which the entry point calls on any exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from temporalio.client import Client

from bench.knobs import Spec
from bench.workers import MODULES, make_worker
from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from tests.devserver import DYNAMIC_CONFIG, DevServer

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process (all its threads), from /proc."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def _quiet_disconnects(llm: FakeLLMServer) -> None:
    """socketserver prints a traceback when a client drops a keep-alive connection (httpx does,
    after a streamed reply); in a bench that is noise, so only those are silenced."""
    httpd = getattr(llm, "_httpd", None)  # FakeLLMServer keeps its server private
    if httpd is None:
        return
    original = httpd.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            original(request, client_address)

    httpd.handle_error = handle_error


@dataclass(frozen=True)
class WorkerSpec:
    options: Spec = field(default_factory=dict)
    variant: str = "product"  # or "variant" (bench.local_variant), "rival" (bench.rival), "bare" (bench.bare)
    stream: bool = False
    mode: str | None = None  # "subprocess" | "inproc"; None: the stack's default
    queue: str | None = None  # None: a fresh one (a worker started again after a kill takes its queue)


@dataclass
class WorkerHandle:
    queue: str
    pid: int | None  # None: in-process
    error: str | None = None  # set when it failed to start (tolerant start only)
    loop: str | None = None  # the event loop's module, as the worker reported it ("uvloop"); None: in-process

    def cpu(self) -> float | None:
        return cpu_seconds(self.pid)


class Stack:
    def __init__(self, workdir: Path, worker_mode: str = "subprocess", server_config: list[str] | None = None) -> None:
        self.workdir = workdir
        self.worker_mode = worker_mode
        self.server_config = server_config or []
        # Our servers lift the transfer-queue poll limit (tests/devserver.DYNAMIC_CONFIG); given
        # values are added after it, so a bench can put the default back to compare.
        self.server_config_all = (*DYNAMIC_CONFIG, *self.server_config)  # every worker's one server runs this
        self.server = DevServer(workdir, config=self.server_config_all)
        self.llm = FakeLLMServer(max_log=50_000)
        self.registry = Registry.from_modules(MODULES)
        self.client: Client | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._ready: dict[int, BinaryIO] = {}  # by pid: the pipe a worker says READY on

    def start(self) -> None:
        self.server.start()
        self.llm.start()
        _quiet_disconnects(self.llm)

    async def connect(self) -> Client:
        self.client = await connect(self.server.target, "default")
        return self.client

    @property
    def server_pid(self) -> int | None:
        proc = getattr(self.server, "_proc", None)  # DevServer keeps its Popen private
        return proc.pid if proc is not None else None

    def settings(self, stream: bool = False) -> LLMSettings:
        # The providers a model string names reach the same fake (bench.caching: anthropic:…).
        root, key = self.llm.url, "bench-offline-key"
        return LLMSettings(
            base_url=self.llm.base_url, model="demo", stream=stream, anthropic_base_url=root, anthropic_api_key=key,
            gemini_base_url=root, gemini_api_key=key, openai_base_url=self.llm.base_url, openai_api_key=key,
        )  # fmt: skip

    def phase(self, latency_ms: float) -> None:
        """A clean request log and the given model latency for the next measurement."""
        self.llm.reset()
        self.llm.set_latency(latency_ms)

    @contextlib.asynccontextmanager
    async def worker(
        self, options: Spec | None = None, variant: str = "product", stream: bool = False, mode: str | None = None
    ) -> AsyncIterator[WorkerHandle]:
        async with self.workers([WorkerSpec(options or {}, variant, stream, mode)]) as handles:
            yield handles[0]

    @contextlib.asynccontextmanager
    async def workers(self, specs: list[WorkerSpec], tolerant: bool = False) -> AsyncIterator[list[WorkerHandle]]:
        """Several workers, each on its own task queue, started together (subprocesses import
        in parallel) and all stopped on the way out. `tolerant`: a worker that fails to start
        gets its `error` set instead of failing the lot."""
        async with contextlib.AsyncExitStack() as stack:
            handles: list[WorkerHandle] = []
            spawned: list[tuple[int, subprocess.Popen[bytes]]] = []
            for spec in specs:
                queue = spec.queue or f"bench-{uuid.uuid4().hex[:12]}"
                if (spec.mode or self.worker_mode) == "inproc":
                    await stack.enter_async_context(self._inproc(spec, queue))
                    handles.append(WorkerHandle(queue, None))
                    continue
                config = {
                    "target": self.server.target, "queue": queue, "base_url": self.llm.base_url,
                    "variant": spec.variant, "stream": spec.stream, "options": spec.options,
                }  # fmt: skip
                proc = self._spawn(config)
                spawned.append((len(handles), proc))
                handles.append(WorkerHandle(queue, proc.pid))
            procs = [proc for _, proc in spawned]
            stack.push_async_callback(asyncio.to_thread, self._stop_all, procs)
            ready = await asyncio.gather(*(self._wait_ready(proc) for proc in procs), return_exceptions=True)
            for (index, _), outcome in zip(spawned, ready, strict=True):
                if isinstance(outcome, BaseException):
                    if not tolerant:
                        raise outcome
                    handles[index].error = f"{type(outcome).__name__}: {outcome}"
                else:
                    handles[index].loop = outcome
            yield handles

    @contextlib.asynccontextmanager
    async def _inproc(self, spec: WorkerSpec, queue: str) -> AsyncIterator[None]:
        assert self.client is not None
        settings = self.settings(spec.stream)
        async with new_http_client(settings) as http:
            async with make_worker(spec.variant, self.client, queue, self.registry, settings, http, spec.options):
                yield

    def _spawn(self, config: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Its stdout and stderr go to workers.log, READY to a pipe of its own. Not stdout: read
        only up to READY, that pipe filled with the SDK core's warnings (the rival's worker prints
        them there) until a write blocked the core's thread and the worker polled no more."""
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        ready, ready_w = os.pipe()
        try:
            with (self.workdir / "workers.log").open("ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "bench.worker_proc", json.dumps(config | {"ready_fd": ready_w})],
                    cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(ready_w,),
                    start_new_session=True,  # Ctrl-C reaches only the bench, which stops it in order
                )  # fmt: skip
        except BaseException:
            os.close(ready)
            raise
        finally:
            os.close(ready_w)  # the worker holds its own copy
        self._ready[proc.pid] = os.fdopen(ready, "rb")
        self._procs.append(proc)
        return proc

    async def _wait_ready(self, proc: subprocess.Popen[bytes]) -> str:
        """The event loop the worker said it runs on, once it is READY."""
        with self._ready.pop(proc.pid) as ready:
            try:
                line = await asyncio.wait_for(asyncio.to_thread(ready.readline), READY_TIMEOUT)
            except TimeoutError:
                msg = f"bench worker not ready after {READY_TIMEOUT:.0f}s: see {self.workdir}/workers.log"
                raise RuntimeError(msg) from None
        word, _, loop = line.decode(errors="replace").strip().partition(" ")
        if word != "READY":
            raise RuntimeError(f"bench worker failed to start: see {self.workdir}/workers.log")
        return loop

    def _stop_all(self, procs: list[subprocess.Popen[bytes]]) -> None:
        for proc in procs:  # ask them all first, so they shut down in parallel
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
        for proc in procs:
            self._stop(proc)

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Closing stdin asks for a graceful stop; then SIGTERM, then SIGKILL, by its own id."""
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        if proc in self._procs:
            self._procs.remove(proc)

    def close(self) -> None:
        self._stop_all(list(self._procs))
        self.llm.stop()
        self.server.stop()
