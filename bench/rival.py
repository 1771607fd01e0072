"""BENCH-ONLY: a worker for `bench.rival_workflow`, built as the OpenAI Agents integration's
README shows: `OpenAIAgentsPlugin` on the client, SDK defaults otherwise (its sandbox, its
pydantic converter, its worker settings). Its model provider calls fake_llm over Chat Completions,
not streamed, as the bench's own worker does. The Agents SDK's tracing is switched off: there is no
OpenAI to send traces to, and it would only add to the rival's cost (so its figures are its best).

Needs the `bench` extra (`pip install -e '.[bench]'`: temporalio-openai-agents, which brings the
openai-agents and openai SDKs); only the bench's worker subprocess imports this module.
"""

from __future__ import annotations

import os
from datetime import timedelta

from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI
from temporalio.client import Client
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.worker import Worker

from bench.rival_workflow import RivalRun, pad


async def rival_worker(target: str, queue: str, base_url: str) -> Worker:
    # Read by every trace provider, the plugin's own included (set_tracing_disabled is not: the
    # plugin installs a fresh provider while the worker runs).
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=base_url, api_key="bench"), use_responses=False)
    params = ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60))  # the default provider's default
    plugin = OpenAIAgentsPlugin(model_params=params, model_provider=provider)
    client = await Client.connect(target, namespace="default", plugins=[plugin])
    return Worker(client, task_queue=queue, workflows=[RivalRun], activities=[pad])
