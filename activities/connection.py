"""One way to reach Temporal, shared by the worker, the client, the tests and the replayer:
the same address defaults and the same pydantic data converter everywhere."""

from __future__ import annotations

import os

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from workflows.types import SEARCH_ATTRIBUTES

DATA_CONVERTER = pydantic_data_converter
DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "agent-runner"


def address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


def namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE", DEFAULT_NAMESPACE)


def task_queue() -> str:
    return os.environ.get("AGENT_TASK_QUEUE", DEFAULT_TASK_QUEUE)


async def connect(target: str | None = None, ns: str | None = None) -> Client:
    return await Client.connect(target or address(), namespace=ns or namespace(), data_converter=DATA_CONVERTER)


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the run's search attributes if the server lacks them; returns those added."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {
        name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name not in listed.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
