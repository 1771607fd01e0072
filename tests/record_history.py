"""Record a demo run's history into tests/histories/ for the replay test:
`python -m tests.record_history NAME "PROMPT" [--approve]`. With --approve, every call that
waits for a person is approved as it comes. Re-record only on purpose: a history that no longer
replays means runs in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

from activities import Registry
from activities.connection import connect
from activities.model import new_http_client
from activities.settings import LLMSettings
from fake_llm import FakeLLMServer
from tests.devserver import DevServer
from tests.helpers import start
from worker import build_worker
from workflows import types as t


async def approve_all(handle: WorkflowHandle[Any, Any]) -> None:
    """Approve each call as it comes to wait, until the run ends."""
    done: set[str] = set()
    while True:
        status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        if status.phase in t.FINAL_PHASES:
            return
        for p in status.pending_approvals:
            if p.call_id not in done:
                done.add(p.call_id)
                decision = t.ApprovalDecision(call_id=p.call_id, approve=True, by="recorder")
                await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
        await asyncio.sleep(0.2)


async def record(name: str, prompt: str, approve: bool = False) -> Path:
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
                if approve:
                    await asyncio.wait_for(approve_all(handle), timeout=60)
                await handle.result()
            history = await handle.fetch_history()
        finally:
            server.stop()
    path = Path(__file__).parent / "histories" / f"{name}.json"
    path.write_text(history.to_json())
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1], sys.argv[2], approve="--approve" in sys.argv[3:])))
