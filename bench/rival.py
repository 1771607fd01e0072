"""BENCH-ONLY: a worker for `bench.rival_workflow`, Temporal's OpenAI Agents integration run as
its users run it, at its best honest configuration. Each choice, and why:

- The plugin as its README builds it: `OpenAIAgentsPlugin()` with no arguments, so its own
  defaults hold: its model provider (`OpenAIProvider(openai_client=AsyncOpenAI(max_retries=0))`:
  one client for the worker's life, its pooled keep-alive connections reused, no retries inside
  the activity: the activity's retries stand in for them), `ModelActivityParameters()` (a regular
  activity, 60 s start-to-close, no heartbeat), its pydantic payload converter, its tracing
  interceptor and its sandbox passthrough (`openai`, `agents`, `mcp`).
  Until 2.0 the bench built its own `OpenAIProvider(AsyncOpenAI(...))`: the same calls, but not
  what a user writes (and with the OpenAI client's own two retries).
- The model server as its users point it anywhere but OpenAI: `OPENAI_BASE_URL` and
  `OPENAI_API_KEY` in the worker's environment, read by that default client.
- Chat Completions, not the Agents SDK's default Responses API: one documented line
  (`agents.set_default_openai_api("chat_completions")`), the wire our product speaks by default
  (so both send fake_llm the same requests), and the rival's faster one here: on the bench's loop
  with Responses it took about 1.7x the time a turn (55.7 against 33.8 ms at 20 turns, 0 ms;
  worker CPU 35.5 against 20.0 ms), so Responses would flatter us. `what_if={"api": "responses"}`
  measures it (bench-only).
- The Agents SDK's tracing off (`OPENAI_AGENTS_DISABLE_TRACING`): there is no OpenAI to export
  traces to, and exporting would only add to the rival's cost.
- The workflow in temporalio's sandbox, as the integration's samples run (AgentRun leaves the
  sandbox by its own definition; the rival unsandboxed was not faster in a probe: on Responses,
  51.9 / 87.5 against 58.4 / 79.2 ms a turn at 20 / 40 turns, within that probe's noise).
- SDK defaults for every Worker option, as its users get them (our product worker gets
  `WORKER_DEFAULTS`, which only bound shutdown and heartbeat throttling: neither touches a turn).
- Runs of 20 turns in the per-turn section (`bench.plan`): its turn grows with the turns (each
  model activity carries the whole transcript), so the 40 the bench ran before 2.0 made it
  about 1.4x slower a turn than at the independent measurement's 20.
- Its process, event loop and server are the product worker's: `bench.worker_proc` runs every
  worker on the loop `python worker.py` runs on (uvloop; each worker reports its loop, and the
  bench records it), against the bench's one dev server with its one dynamic config.

Needs the `bench` extra (`pip install -e '.[bench]'`: temporalio-openai-agents, which brings the
openai-agents and openai SDKs); only the bench's worker subprocess imports this module.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from temporalio.client import Client
from temporalio.worker import Worker

from bench.rival_workflow import RivalRun, pad

APIS: dict[str, Literal["chat_completions", "responses"]] = {"chat": "chat_completions", "responses": "responses"}


async def rival_worker(target: str, queue: str, base_url: str, what_if: dict[str, Any] | None = None) -> Worker:
    """The rival's worker on `queue`; `what_if` {"api": "responses"} is the one bench-only change."""
    api = str((what_if or {}).get("api", "chat"))
    if api not in APIS:
        raise ValueError(f"the rival's api must be one of {sorted(APIS)}, not {api!r}")
    # Read by the plugin's default client (AsyncOpenAI) and by every trace provider, the plugin's
    # own included (set_tracing_disabled is not: the plugin installs a fresh provider as the
    # worker runs); set before the plugin builds either.
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = "bench"
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    from agents import set_default_openai_api
    from temporalio.openai_agents import OpenAIAgentsPlugin

    set_default_openai_api(APIS[api])
    client = await Client.connect(target, namespace="default", plugins=[OpenAIAgentsPlugin()])
    return Worker(client, task_queue=queue, workflows=[RivalRun], activities=[pad])
