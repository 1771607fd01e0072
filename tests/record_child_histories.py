"""Record the checked-in histories of a run whose child run failed, and of one whose child was
cancelled (each counts its child's usage): `python -m tests.record_child_histories [RELEASE]` (names
end in `_2_0` by default; those of 1.0 were recorded as `_1_0`). Re-record only on purpose: a
history that no longer replays means runs in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t
from tests.devserver import DevServer
from tests.helpers import calls
from tests.test_agents import first_child, research_team, slow_fact, status

SPENT = {"usage": {"prompt_tokens": 400, "completion_tokens": 20}}


async def record(client: Client, llm: Any, name: str, registry: Registry, cancel_child: bool) -> list[Any]:
    settings = LLMSettings(base_url=llm.base_url, model="demo")
    queue = f"record-{uuid.uuid4().hex}"
    async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
        handle = await client.start_workflow(
            t.WORKFLOW_NAME, t.RunInput(prompt="Explain tides", agent="lead"), id=name, task_queue=queue,
            result_type=t.RunResult,
        )  # fmt: skip
        if cancel_child:
            child = await first_child(client, handle)
            while (await status(child)).phase != "running_tools":
                await asyncio.sleep(0.1)
            await child.cancel()
        await asyncio.wait_for(handle.result(), 60)
    return await with_children(client, handle)


async def with_children(client: Client, handle: Any) -> list[WorkflowHistory]:
    """The run's history, then each child run's it started, in order."""
    history = await handle.fetch_history()
    children = [
        await client.get_workflow_handle(
            e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        ).fetch_history()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    return [history, *children]


async def main(release: str) -> None:
    """Each run recorded as NAME_<release> (2_0: this release)."""
    folder = Path(__file__).parent / "histories"
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            failing = research_team(
                llm,
                [calls(("slow_fact", {"topic": "tides"})) | SPENT],
                [calls(("ask", {"input": "tides"})), {"content": "The scholar failed; sorry."}],
                tools=[slow_fact],
                max_turns=1,
            )
            cancelled = research_team(
                llm,
                [calls(("slow_fact", {"topic": "tides"})) | SPENT, {"content": "never"}],
                [calls(("ask", {"input": "tides"})), {"content": "The scholar was stopped."}],
                tools=[slow_fact],
            )
            recorded = [
                *await record(client, llm, f"child_failed_{release}", failing, cancel_child=False),
                *await record(client, llm, f"child_cancelled_{release}", cancelled, cancel_child=True),
            ]
        finally:
            server.stop()
    for history in recorded:
        path = folder / f"{history.workflow_id}.json"
        path.write_text(history.to_json())
        print(path)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "2_0"))
