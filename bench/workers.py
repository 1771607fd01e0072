"""The workers the bench runs: the product's, built by `build_worker` with tuning knobs
passed through, and the bench-only variant worker (see `bench.local_variant`)."""

from __future__ import annotations

from typing import Any

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from bench.knobs import Spec, worker_kwargs
from bench.local_variant import AgentRunVariant
from bench.variant_types import INLINE_MODEL_ACTIVITY, InlineModelCall
from durable_agent_runner import Registry
from durable_agent_runner.activities import chat_wire
from durable_agent_runner.activities.model import ModelActivities
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.worker import plugin as product
from durable_agent_runner.worker.group import WorkerGroup
from durable_agent_runner.workflows.types import ModelReply

MODULES = ["tests.fixtures.agents", "bench.agents"]  # `looper` (its `pad` an activity), `looper_local`


def product_worker(
    client: Client, queue: str, registry: Registry, settings: LLMSettings, http: httpx.AsyncClient, spec: Spec
) -> WorkerGroup:
    """build_worker(**options): the knobs override build_worker's own defaults."""
    return product.build_worker(client, queue, registry, settings, http, **worker_kwargs(spec))


class InlineModel:
    """BENCH-ONLY model call for the local-activity variant: the transcript comes inline."""

    def __init__(self, settings: LLMSettings, http: httpx.AsyncClient) -> None:
        self._settings = settings
        self._http = http

    @activity.defn(name=INLINE_MODEL_ACTIVITY)
    async def call(self, input: InlineModelCall) -> ModelReply:
        body = chat_wire.build_request(input.agent, input.messages, input.model, False)
        response = await self._http.post(f"{self._settings.base_url}/chat/completions", json=body)
        if response.status_code != 200:
            raise ApplicationError(f"model server answered {response.status_code}")
        return chat_wire.parse_response(response.json(), input.turn)


def variant_worker(
    client: Client, queue: str, registry: Registry, settings: LLMSettings, http: httpx.AsyncClient, spec: Spec
) -> Worker:
    """The bench-only variant with the product's activities plus the inline model call, and
    the same options build_worker would give (its fixed ones included)."""
    model = ModelActivities(client, settings, http)
    tools = ToolActivities(registry, settings=settings)
    inline = InlineModel(settings, http)
    options: dict[str, Any] = {**product.WORKER_DEFAULTS, **worker_kwargs(spec)}
    return Worker(
        client,
        task_queue=queue,
        workflows=[AgentRunVariant],
        activities=[model.call_model, tools.call_tool, tools.resolve_agent, inline.call],
        **options,
    )


def make_worker(
    variant: str,
    client: Client,
    queue: str,
    registry: Registry,
    settings: LLMSettings,
    http: httpx.AsyncClient,
    spec: Spec,
) -> Worker | WorkerGroup:
    build = variant_worker if variant == "variant" else product_worker
    return build(client, queue, registry, settings, http, spec)
