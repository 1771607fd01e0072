"""Workers that differ on one task queue, as in a rolling deploy: each run's work reaches only
workers that know its agent, in the version the run froze. On a real dev server.

Two versions of agent `routed` each have their own tool `where`; it answers with its version and
writes `<version> <idempotency key>` to the side-effects file, so a call that reached the wrong
worker shows."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError

from durable_agent_runner import Agent, Registry, ToolContext, tool
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.worker.group import WorkerGroup
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t
from tests.devserver import DevServer
from tests.helpers import calls, script, start, transcript


def _where(version: str) -> Any:
    async def where(seconds: float, ctx: ToolContext) -> str:
        """Which version of the agent's tools answered.

        Args:
            seconds: How long to work first.
        """
        await asyncio.sleep(seconds)
        with open(os.environ["SIDE_EFFECTS_FILE"], "a", encoding="utf-8") as f:
            f.write(f"{version} {ctx.idempotency_key}\n")
        return version

    return tool(where, name="where")


routed_v1 = Agent(name="routed", instructions="First version.", tools=[_where("v1")])
routed_v2 = Agent(name="routed", instructions="Second version.", tools=[_where("v2")])
only_old = Agent(name="only_old", instructions="Served by the old workers only.", tools=routed_v1.tools)
OLD = Registry(agents=[routed_v1, only_old])
NEW = Registry(agents=[routed_v2])


@pytest.fixture
def group(temporal_server: DevServer, task_queue: str, settings: LLMSettings) -> Any:
    """`async with group(registry):` one more worker process's workers, on the test's queue.
    Each has a client of its own, as a process would: temporalio refuses two workers of one
    client on one queue."""

    @contextlib.asynccontextmanager
    async def make(registry: Registry) -> AsyncIterator[WorkerGroup]:
        own = await connect(temporal_server.target, "default")
        async with new_http_client(settings) as http, build_worker(own, task_queue, registry, settings, http) as g:
            yield g

    return make


def two_calls(llm: Any, first_seconds: float) -> str:
    return script(
        llm, calls(("where", {"seconds": first_seconds})), calls(("where", {"seconds": 0})), {"content": "done"}
    )


async def answers(handle: Any) -> tuple[str, list[str]]:
    """The version the run froze, and what its tool calls answered."""
    result: t.Transcript = await handle.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
    assert result.agent is not None
    version = {routed_v1.version: "v1", routed_v2.version: "v2", only_old.version: "v1"}[result.agent.version]
    return version, [m.content for m in await transcript(handle) if isinstance(m, t.ToolMessage)]


async def test_versions_differ_and_each_worker_polls_its_agents_queues(client: Client, settings: LLMSettings) -> None:
    assert routed_v1.version != routed_v2.version and only_old.version != routed_v1.version
    async with new_http_client(settings) as http:
        group = build_worker(client, "q", OLD, settings, http)  # built, never started
    assert group.task_queues == [
        "q",
        "q@only_old",
        f"q@only_old@{only_old.version}",
        "q@routed",
        f"q@routed@{routed_v1.version}",
    ]


async def test_a_group_runs_until_shut_down(client, task_queue, settings: LLMSettings, llm) -> None:
    async with new_http_client(settings) as http:
        group = build_worker(client, task_queue, OLD, settings, http)
        running = asyncio.create_task(group.run())
        handle = await start(client, task_queue, "go", agent="only_old", model=two_calls(llm, 0), agent_wait_seconds=10)
        assert (await asyncio.wait_for(handle.result(), 30)).output == "done"
        await asyncio.wait_for(group.shutdown(), 15)
        await asyncio.wait_for(running, 5)


async def test_in_a_rolling_deploy_each_runs_tool_calls_reach_only_its_version(
    client, task_queue, group, llm, counter_file: Path
):
    async def run_all(handles: list[Any]) -> list[tuple[str, list[str]]]:
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
        assert all(r.output == "done" for r in results)
        return [await answers(h) for h in handles]

    async with contextlib.AsyncExitStack() as old_worker:
        await old_worker.enter_async_context(group(OLD))
        before = [await start(client, task_queue, "go", agent="routed", model=two_calls(llm, 1.5)) for _ in range(3)]

        async def all_running_tools() -> bool:
            states = [await h.query(t.STATUS_QUERY, result_type=t.RunStatus) for h in before]
            return all(s.phase == "running_tools" for s in states)

        while not await all_running_tools():
            await asyncio.sleep(0.1)
        async with group(NEW):  # the new version joins while the old one's runs are in flight
            during = [
                await start(client, task_queue, "go", agent="routed", model=two_calls(llm, 0.2)) for _ in range(8)
            ]
            old_only = [
                await start(client, task_queue, "go", agent="only_old", model=two_calls(llm, 0)) for _ in range(3)
            ]
            seen = await run_all(before + during + old_only)
            await old_worker.aclose()  # the old version leaves once its runs are done
            after = await run_all(
                [await start(client, task_queue, "go", agent="routed", model=two_calls(llm, 0)) for _ in range(2)]
            )
    assert [v for v, _ in seen[:3]] == ["v1"] * 3  # resolved before the new version came
    assert [v for v, _ in seen[11:]] == ["v1"] * 3  # only_old: only the old workers know it
    assert [v for v, _ in after] == ["v2"] * 2
    for version, tool_answers in seen + after:
        assert tool_answers == [version, version]  # never the other version's tool
    lines = counter_file.read_text().split("\n")[:-1]
    assert len(lines) == len(set(lines)) == 2 * len(seen + after)  # every call once


async def test_a_run_of_an_agent_no_worker_serves_fails_clearly(client, task_queue, group, llm):
    async with group(NEW):
        handle = await start(client, task_queue, "go", agent="only_old", agent_wait_seconds=1)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 30)
    assert "no worker serves agent 'only_old'" in str(info.value.cause)
    # The run's own worker said it does not serve the agent; the routed resolve found no taker.
    events = (await handle.fetch_history()).events
    markers = [e.marker_recorded_event_attributes for e in events if e.HasField("marker_recorded_event_attributes")]
    declined = [m.failure.application_failure_info.type for m in markers if m.HasField("failure")]
    routed = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert (declined, routed) == ([t.AGENT_NOT_HERE], [t.RESOLVE_AGENT_ACTIVITY])
