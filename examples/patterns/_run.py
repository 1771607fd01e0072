"""Runs a pattern example: its workflow on a worker of its own (the AgentPlugin plus the
example's workflow), against a real model when LLM_API_KEY, OPENAI_API_KEY or LLM_BASE_URL is
set, else the example's offline model (durable_agent_runner.testing). Temporal is the one the
settings name (TEMPORAL_ADDRESS, default localhost:7233: `temporal server start-dev`)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent_runner import Agent, AgentPlugin, Registry
from durable_agent_runner.client.status import ui_url
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.env import ClientSettings
from durable_agent_runner.config.llm import API_KEY_VARIABLES, LLMSettings
from durable_agent_runner.testing import OfflineModel


def real_model() -> bool:
    return any(os.environ.get(name) for name in (*API_KEY_VARIABLES, "LLM_BASE_URL"))


async def run_pattern(
    workflow: Any, arg: Any, agents: Sequence[Agent], offline: OfflineModel, *, client: Client | None = None
) -> Any:
    """Runs the workflow class `workflow` on `arg` and returns its result."""
    client = client or await connect()
    queue, run_id = f"patterns-{uuid.uuid4().hex[:8]}", f"{workflow.__name__.lower()}-{uuid.uuid4().hex[:8]}"
    async with contextlib.AsyncExitStack() as stack:
        if real_model():
            settings = LLMSettings.from_env()
        else:
            server = await stack.enter_async_context(offline.serve(agents))
            settings = LLMSettings(base_url=server.base_url, model="offline")
        plugin = AgentPlugin(Registry(agents=agents), settings=settings)
        await stack.enter_async_context(Worker(client, task_queue=queue, workflows=[workflow], plugins=[plugin]))
        result = await client.execute_workflow(workflow.run, arg, id=run_id, task_queue=queue)
    link = ui_url(str(ClientSettings.load().ui_url), run_id, client.namespace)  # TEMPORAL_UI_URL, as client.py links
    print(f"workflow: {run_id}  ({link})")
    return result
