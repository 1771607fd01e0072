"""Record a demo run's history into tests/histories/ for the replay test:
`python -m tests.record_history NAME "PROMPT"`. Re-record only on purpose: a history that no
longer replays means runs in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from activities import Registry
from activities.connection import connect
from activities.model import new_http_client
from activities.settings import LLMSettings
from fake_llm import FakeLLMServer
from tests.devserver import DevServer
from tests.helpers import start
from worker import build_worker


async def record(name: str, prompt: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            settings = LLMSettings(base_url=llm.base_url, model="demo")
            queue = f"record-{uuid.uuid4().hex}"
            registry = Registry.from_modules(["examples.demo_agent"])
            async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
                handle = await start(client, queue, prompt)
                await handle.result()
            history = await handle.fetch_history()
        finally:
            server.stop()
    path = Path(__file__).parent / "histories" / f"{name}.json"
    path.write_text(history.to_json())
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1], sys.argv[2])))
