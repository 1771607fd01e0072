"""`AgentTestEnv`: your agents on a real worker, against an offline model and a Temporal dev server.

    async with AgentTestEnv(agents=[assistant], model=model) as env:
        result = await env.run(assistant, "What's the weather in Paris?")
        run = await env.start(assistant, "And in Tokyo?")   # the project's RunHandle
        env.client, env.task_queue, env.model_server.requests

It starts (each step bounded, failing with one clear line): a Temporal dev server from the
Temporal CLI (unless `address` names a server already running), the model's server, and a worker
of the agents on a fresh task queue, with the AgentPlugin as `worker.py` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from temporalio.client import Client

from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.agents.agent import Agent
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.client import AgentClient, RunHandle, SessionHandle
from durable_agent_runner.config.connection import connect
from durable_agent_runner.testing.devserver import DevServer
from durable_agent_runner.testing.models import OfflineModel
from durable_agent_runner.testing.server import ModelServer
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows.types import WORKFLOW_NAME, RunInput, RunResult

STARTUP_SECONDS = 60.0  # the dev server's start, and the connection to a given one


class AgentTestEnv:
    """A dev server, an offline model's server and a worker for `agents` (each with its team),
    for as long as the `async with` lasts. `address`: a Temporal server already running (the
    dev server is then not started). `api` and `stream`: how the worker calls the model."""

    def __init__(
        self,
        agents: Sequence[Agent],
        model: OfflineModel,
        *,
        address: str | None = None,
        namespace: str = "default",
        api: Literal["chat", "responses"] = "chat",
        stream: bool = True,
        startup_seconds: float = STARTUP_SECONDS,
        **worker_options: Any,
    ) -> None:
        if not agents:
            raise ValueError("AgentTestEnv needs at least one agent")
        self.agents = list(agents)
        self.model = model
        self.address = address
        self.namespace = namespace
        self.api: Literal["chat", "responses"] = api
        self.stream = stream
        self.startup_seconds = startup_seconds
        self.worker_options = worker_options
        self.task_queue = f"agents-test-{uuid.uuid4().hex[:12]}"
        self._stack = contextlib.AsyncExitStack()
        self._client: Client | None = None
        self._model_server: ModelServer | None = None

    @property
    def client(self) -> Client:
        """A client of the server, with the project's data converter."""
        if self._client is None:
            raise RuntimeError("AgentTestEnv is not started: use `async with AgentTestEnv(...) as env`")
        return self._client

    @property
    def model_server(self) -> ModelServer:
        """The offline model's server: `requests`, `requests_for(agent)`."""
        if self._model_server is None:
            raise RuntimeError("AgentTestEnv is not started: use `async with AgentTestEnv(...) as env`")
        return self._model_server

    async def __aenter__(self) -> AgentTestEnv:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        registry = Registry(agents=self.agents)  # checks the agents: a clear error before any server starts
        address = self.address or await self._dev_server()
        try:
            self._client = await asyncio.wait_for(connect(address, self.namespace), self.startup_seconds)
        except ConnectionError as exc:  # it names the address and what to set
            raise RuntimeError(f"AgentTestEnv: {exc}") from None
        except Exception as exc:
            why = str(exc) or f"no answer in {self.startup_seconds:.0f} s"
            raise RuntimeError(f"AgentTestEnv: cannot connect to Temporal at {address}: {why}") from None
        self._model_server = await self._stack.enter_async_context(self.model.serve(self.agents))
        settings = self._model_server.settings(model="offline", api=self.api, stream=self.stream)
        http = await self._stack.enter_async_context(new_http_client(settings))
        worker = build_worker(self._client, self.task_queue, registry, settings, http, **self.worker_options)
        await self._stack.enter_async_context(worker)

    async def _dev_server(self) -> str:
        workdir = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="agents-test-")))
        server = DevServer(workdir)
        self._stack.callback(server.stop)  # first: a server that never came up is stopped too
        await asyncio.to_thread(server.start, self.startup_seconds)
        return server.target

    async def start(self, agent: Agent | str, prompt: str, **fields: Any) -> RunHandle:
        """Start a run of `agent` on `prompt` (`fields`: RunInput's others) and return its handle,
        the Python client's own (docs/python-client.md): `result()` typed by the agent's
        `output_type`, `status()`, `events()`, `approve()`, ... A `SessionHandle` for
        `session=True`."""
        name = agent if isinstance(agent, str) else agent.name
        run_id = f"test-{name}-{uuid.uuid4().hex[:12]}"
        await self.client.start_workflow(
            WORKFLOW_NAME,
            RunInput(prompt=prompt, agent=name, **fields),
            id=run_id,
            task_queue=self.task_queue,
            result_type=RunResult,
        )
        known = self._agent(agent)
        runs = AgentClient(self.client, task_queue=self.task_queue)
        handle: RunHandle | SessionHandle = (
            runs.get_session(run_id, agent=known) if fields.get("session") else runs.get(run_id, agent=known)
        )
        return handle

    async def run(self, agent: Agent | str, prompt: str, **fields: Any) -> RunResult:
        """Run `agent` on `prompt` to its end: all it recorded (RunFailed if it ends without an
        answer, as the Python client's `outcome()`)."""
        return await (await self.start(agent, prompt, **fields)).outcome()

    def _agent(self, agent: Agent | str) -> Agent | None:
        """The Agent of that name among the env's agents and their teams (its output types)."""
        if isinstance(agent, Agent):
            return agent
        for member in (m for a in self.agents for m in (a, *a.team())):
            if member.name == agent:
                return member
        return None
