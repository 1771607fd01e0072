"""Record a DeliverMessage run's history into tests/histories/ for the replay test:
`python -m tests.record_deliver_history [NAME]` (default deliver_message_1_4): a session of the
demo agent, one message given to it by a DeliverMessage run whose id is NAME (as a schedule or a
webhook starts one). Re-record only on purpose: a history that no longer replays means
deliveries in flight would break."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.deliveries import send_once
from durable_agent_runner.workflows import types as t
from tests.recording import recording, write


async def record(name: str) -> Path:
    async with recording() as r:
        session = await AgentClient(r.client, task_queue=r.queue).start_session("demo")
        await send_once(r.client, r.queue, name, session.id, "Weather in Tokyo?", by="schedule nightly")
        delivered = await r.client.get_workflow_handle(name, result_type=t.Delivered).result()
        assert delivered.message == 1, delivered
        await session.answer(1, wait=60)
        await session.end("recorded")
        return write(name, await r.client.get_workflow_handle(name).fetch_history())


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "deliver_message_1_4")))
