"""Servers this project starts are not rate-limited (tests/devserver.py DYNAMIC_CONFIG): workers
that start together, each polling a queue per agent, are served at once, and the server refuses
none of their requests, nor says it has no namespace (DEV_SERVER_CONFIG)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.worker.plugin import build_worker
from tests.devserver import DevServer
from tests.helpers import script, start

WORKERS = 8
REFUSALS = ("rate limit exceeded", "Max QPS Reached")


async def test_workers_that_start_together_are_served_at_once(client, temporal_server, registry, settings, llm):
    seen = temporal_server.log.stat().st_size
    queues = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(WORKERS)]
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(new_http_client(settings))
        groups = [build_worker(client, queue, registry, settings, http) for queue in queues]
        await asyncio.gather(*(stack.enter_async_context(group) for group in groups))  # all at once
        handles = [await start(client, queue, "hi", model=script(llm, {"content": "hello"})) for queue in queues]
        results: list[Any] = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    assert [r.output for r in results] == ["hello"] * WORKERS
    with temporal_server.log.open("rb") as log:
        log.seek(seen)
        since = log.read().decode(errors="replace")
    refused = [line for line in since.splitlines() if any(r in line for r in REFUSALS)]
    assert refused == [], f"{len(refused)} refusals, e.g. {refused[0][:300]}"


@pytest.mark.server  # a server of its own: the search attribute it adds stays there
async def test_a_dev_server_knows_its_namespace_from_its_cache(tmp_path: Path) -> None:
    """The dev server reads the namespace (its search attributes) from its cache, not from SQLite
    on each start and workflow task: under load such a read missed its 3 s deadline and the server
    answered "Namespace default is not found" to a start. The sign of the cache: a search attribute
    added while the server runs is known once the cache refreshes, not at once. Ours are given at
    its start."""
    server = DevServer(tmp_path)
    await asyncio.to_thread(server.start)
    try:
        client = await Client.connect(server.target)
        added = {"ProbeKeyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace="default", search_attributes=added)
        )
        probe = TypedSearchAttributes([SearchAttributePair(SearchAttributeKey.for_keyword("ProbeKeyword"), "x")])
        try:
            await client.start_workflow("probe", id=uuid.uuid4().hex, task_queue="probe", search_attributes=probe)
        except RPCError as err:
            assert "no mapping defined for search attribute ProbeKeyword" in err.message
        else:
            raise AssertionError("the server read the namespace from SQLite for a start")
    finally:
        await asyncio.to_thread(server.stop)
