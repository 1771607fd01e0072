"""Shared fixtures: one real Temporal dev server and one fake_llm server per session, a fresh
task queue per test, and a way to run the project's own worker against them.

Every test is marked `server` or `pure` (`pytest -m pure`: the fast half, which starts no
server). A test is `server` when it needs one of SERVER_FIXTURES, even through other fixtures,
or its module marks it (`pytestmark = pytest.mark.server`: it starts a server of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.group import WorkerGroup
from durable_agent_runner.worker.plugin import build_worker
from tests.devserver import DevServer

TEST_MODULES = ["examples.demo_agent", "tests.fixtures.agents"]
# Fixtures that start a server: the session's Temporal dev server and fake model, and what some
# modules start for themselves (a fake model of their own, the codec server). A module whose
# tests start servers inline says so with `pytestmark = pytest.mark.server`.
SERVER_FIXTURES = frozenset({"temporal_server", "fake_llm", "server", "codec_server"})
_COUNTS = pytest.StashKey[dict[str, int]]()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it selects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    counts = {"pure": 0, "server": 0}
    for item in items:
        needs = SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        kind = "server" if needs or item.get_closest_marker("server") else "pure"
        if item.get_closest_marker(kind) is None:
            item.add_marker(kind)
        counts[kind] += 1
    config.stash[_COUNTS] = counts


def pytest_report_collectionfinish(config: pytest.Config) -> str:
    counts = config.stash.get(_COUNTS, {})
    return f"markers: {counts.get('pure', 0)} pure, {counts.get('server', 0)} server (before -m selects)"


@pytest.fixture(autouse=True)
def _pure_starts_no_server(request: pytest.FixtureRequest) -> Iterator[None]:
    """A `pure` test that reaches a server fixture anyway (request.getfixturevalue) fails: its
    mark would be a lie, and `pytest -m pure` would start the server after all."""
    yield
    if request.node.get_closest_marker("pure") is not None:
        used = sorted(SERVER_FIXTURES.intersection(request.fixturenames))
        if used:
            pytest.fail(f"a test marked pure used {', '.join(used)}: mark its module `server`")


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    server.start()
    yield server
    server.stop(grace=3)  # the session's server is thrown away: no need to wait out its long polls


@pytest.fixture(autouse=True)
def _server_is_back(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that stops the session's server and fails before starting it again (stop 40: a
    worker failed during the outage and cancelled the test) must not take every later test of
    its process down with it: the server is started again after it."""
    yield
    if "temporal_server" in request.fixturenames:
        server: DevServer = request.getfixturevalue("temporal_server")
        if not server.running:
            server.start()


@pytest.fixture(scope="session")
async def client(temporal_server: DevServer) -> Client:
    return await connect(temporal_server.target, "default")


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm(fake_llm: FakeLLMServer) -> FakeLLMServer:
    fake_llm.reset()
    return fake_llm


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry.from_modules(TEST_MODULES)


@pytest.fixture
def hold() -> Iterator[Callable[[str], asyncio.Event]]:
    """`gate = hold("a")`: a `slow_record` call labelled "a" works until `gate.set()` (at most its
    `seconds`), so a test acts while the tool runs however loaded the machine is."""
    from tests.fixtures import agents

    def held(label: str) -> asyncio.Event:
        agents.HELD[label] = gate = asyncio.Event()
        return gate

    yield held
    for gate in agents.HELD.values():
        gate.set()
    agents.HELD.clear()


@pytest.fixture
def settings(llm: FakeLLMServer) -> LLMSettings:
    return LLMSettings(base_url=llm.base_url, model="demo")


@pytest.fixture
def worker_factory(client: Client, task_queue: str, registry: Registry, settings: LLMSettings) -> Any:
    """`async with worker_factory(**overrides):` runs the project's worker in-process."""

    @contextlib.asynccontextmanager
    async def make(**options: Any) -> AsyncIterator[WorkerGroup]:
        s = options.pop("settings", settings)
        reg = options.pop("registry", registry)
        async with new_http_client(s) as http, build_worker(client, task_queue, reg, s, http, **options) as worker:
            yield worker

    return make


def run_id(prefix: str = "test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def counter_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tools in tests/fixtures/agents.py append a line here for every side effect they make."""
    path = tmp_path / "side_effects.log"
    monkeypatch.setenv("SIDE_EFFECTS_FILE", str(path))
    return path
