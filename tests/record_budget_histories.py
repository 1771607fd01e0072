"""Record the checked-in histories of budgets across a tree (tree-budget-1.1): a run paused on its
budget, then raised and resumed to its answer; and a lead whose three children ran in parallel on
their shares of its budget (each child's history too): `python -m tests.record_budget_histories
[RELEASE]` (names end in `_2_0` by default; those of 1.1 were recorded as `_1_1`). Re-record only on
purpose: a history that no longer replays means runs in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t
from tests.budget_runs import parallel_team, pausing_agent
from tests.devserver import DevServer
from tests.record_child_histories import with_children
from tests.test_agents import status


async def record(client: Client, llm: Any, name: str, agent: str, registry: Registry, raise_by: int) -> list[Any]:
    settings = LLMSettings(base_url=llm.base_url, model="demo")
    queue = f"record-{uuid.uuid4().hex}"
    async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
        handle = await client.start_workflow(
            t.WORKFLOW_NAME, t.RunInput(prompt="Explain tides", agent=agent), id=name, task_queue=queue,
            result_type=t.RunResult,
        )  # fmt: skip
        if raise_by:
            while (await status(handle)).paused is None:
                await asyncio.sleep(0.1)
            request = t.ResumeRequest(by="recorder", add_tokens=raise_by)
            await handle.execute_update(t.RESUME_UPDATE, request, result_type=t.RunStatus)
        try:
            await asyncio.wait_for(handle.result(), 60)
        except WorkflowFailureError:
            pass  # the lead stops when its children have spent its budget
    return await with_children(client, handle)


async def main(release: str) -> None:
    """Each run recorded as NAME_<release> (2_0: this release)."""
    folder = Path(__file__).parent / "histories"
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            recorded = [
                *await record(client, llm, f"budget_pause_{release}", "careful", pausing_agent(llm), raise_by=1_000),
                *await record(client, llm, f"budget_children_{release}", "lead", parallel_team(llm), raise_by=0),
            ]
        finally:
            server.stop()
    for history in recorded:
        path = folder / f"{history.workflow_id}.json"
        path.write_text(history.to_json())
        print(path)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "2_0"))
