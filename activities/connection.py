"""One way to reach Temporal, shared by the worker, the client, the tests and the replayer:
the same address defaults and the same data converter everywhere. That converter is pydantic's,
with large payloads kept in the payload store instead of history (activities/payload_store.py)
and failure texts cut to a size Temporal accepts."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.failure.v1 import Failure
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverter, PayloadConverter
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig

from activities.payload_store import external_storage
from workflows.types import SEARCH_ATTRIBUTES

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "agent-runner"
MAX_FAILURE_TEXT = 64 * 1024  # characters of a failure's message, and of its stack trace


class BoundedFailureConverter(DefaultFailureConverter):
    """A failure's message and stack trace are strings, not payloads, so external storage cannot
    move them: past 2 MB Temporal refuses the workflow task (retried forever: the run wedges) or
    swaps the text for "Failure exceeds size limit."; past 4 MB an activity's completion never
    arrives. A tool that raises with a huge message is cut here instead."""

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        super().to_failure(exception, payload_converter, failure)
        level: Failure | None = failure
        while level is not None:
            for field in ("message", "stack_trace"):
                text: str = getattr(level, field)
                if len(text) > MAX_FAILURE_TEXT:
                    setattr(level, field, f"{text[:MAX_FAILURE_TEXT]}… [{len(text) - MAX_FAILURE_TEXT} characters cut]")
            level = level.cause if level.HasField("cause") else None


@functools.cache
def data_converter() -> DataConverter:
    """Built on first use, not at import: a bad PAYLOAD_STORE setting is then reported by the
    command that needs it, as one clear line, instead of a traceback at import time."""
    return dataclasses.replace(
        pydantic_data_converter, failure_converter_class=BoundedFailureConverter, external_storage=external_storage()
    )


def __getattr__(name: str) -> DataConverter:
    if name == "DATA_CONVERTER":  # `from activities.connection import DATA_CONVERTER` still works
        return data_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


def namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE", DEFAULT_NAMESPACE)


def task_queue() -> str:
    return os.environ.get("AGENT_TASK_QUEUE", DEFAULT_TASK_QUEUE)


async def connect(target: str | None = None, ns: str | None = None, runtime: Runtime | None = None) -> Client:
    return await Client.connect(
        target or address(), namespace=ns or namespace(), data_converter=data_converter(), runtime=runtime
    )


def quiet_runtime(logger: logging.Logger) -> Runtime:
    """A runtime whose core logs (gRPC retries while a server restarts, …) go to `logger`,
    instead of to standard output in colour, where a CLI's output belongs."""
    logging_config = LoggingConfig(filter=LoggingConfig.default.filter, forwarding=LogForwardingConfig(logger=logger))
    return Runtime(telemetry=TelemetryConfig(logging=logging_config))


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
