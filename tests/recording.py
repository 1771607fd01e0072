"""What the history recorders share (tests/record_*.py): a dev server of their own, the fake
model, and a worker of the demo agent on a fresh queue; and where a recorded history is written."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowHistory

from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from tests.devserver import DYNAMIC_CONFIG, DevServer

HISTORIES = Path(__file__).parent / "histories"


@dataclass
class Recording:
    client: Client
    queue: str
    llm: FakeLLMServer


@asynccontextmanager
async def recording(
    modules: tuple[str, ...] = ("examples.demo_agent",), config: tuple[str, ...] = ()
) -> AsyncIterator[Recording]:
    """A dev server in a temporary directory (with `config`: more dynamic config, KEY=VALUE), the
    fake model, and a worker serving `modules`' agents on a fresh queue, all stopped on the way out."""
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp), config=DYNAMIC_CONFIG + config)
        server.start()
        try:
            client = await connect(server.target, "default")
            settings = LLMSettings(base_url=llm.base_url, model="demo")
            queue = f"record-{uuid.uuid4().hex}"
            registry = Registry.from_modules(list(modules))
            async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
                yield Recording(client, queue, llm)
        finally:
            server.stop()


def write(name: str, history: WorkflowHistory) -> Path:
    path = HISTORIES / f"{name}.json"
    path.write_text(history.to_json())
    return path
