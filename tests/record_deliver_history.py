"""Record a DeliverMessage run's history into tests/histories/ for the replay test:
`python -m tests.record_deliver_history [NAME]` (default deliver_message_1_4): a session of the
demo agent, one message given to it by a DeliverMessage run whose id is NAME (as a schedule or a
webhook starts one). Re-record only on purpose: a history that no longer replays means
deliveries in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.deliveries import send_once
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t
from tests.devserver import DevServer


async def record(name: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            settings = LLMSettings(base_url=llm.base_url, model="demo")
            queue = f"record-{uuid.uuid4().hex}"
            registry = Registry.from_modules(["examples.demo_agent"])
            async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
                agents = AgentClient(client, task_queue=queue)
                session = await agents.start_session("demo")
                await send_once(client, queue, name, session.id, "Weather in Tokyo?", by="schedule nightly")
                delivered = await client.get_workflow_handle(name, result_type=t.Delivered).result()
                assert delivered.message == 1, delivered
                await session.answer(1, wait=60)
                await session.end("recorded")
                history = await client.get_workflow_handle(name).fetch_history()
        finally:
            server.stop()
    path = Path(__file__).parent / "histories" / f"{name}.json"
    path.write_text(history.to_json())
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "deliver_message_1_4")))
