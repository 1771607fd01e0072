"""BENCH-ONLY: Temporal's own floor for the bench's loop, the least a durable loop of AgentRun's
shape can cost on this SDK and server. A workflow that calls the model as an activity (dispatched
eagerly, as AgentRun's model call is), which runs the tool the reply asks for before it returns
(as AgentRun's model call runs cheap tools with its reply), and does nothing else: no run state
but the turn count, no validation, approvals, events, search attributes or bookkeeping, no
sandbox (`UnsandboxedWorkflowRunner`), plain dataclasses on temporalio's pydantic converter.
History keeps what a durable loop needs (each reply's text and call, and the tool's result); the
model activity keeps each run's conversation in this process, as AgentRun's context cache does,
so the transcript is not sent back through history every turn. The request carries the same
messages and tool schema as AgentRun's, as plain dicts.

What AgentRun's "local tool" row costs above this row is AgentRun's; what this row costs is
temporalio's and the server's, with the worker settings AgentRun keeps too (workflow activations
on a thread of their own, for the SDK's deadlock detector; sync tools in a thread pool; uvloop).
Before AgentRun ran cheap tools with the reply, this loop ran its tool as a local activity, in
the workflow task that handled the reply. The product never runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench.agents import looper_local
from bench.variant_types import BARE_MODEL_ACTIVITY, BARE_WORKFLOW, BareInput, BareResult
from durable_agent_runner.activities import chat_wire
from tests.fixtures.agents import pad

TIMEOUT = timedelta(seconds=60)


@dataclass
class ModelCall:
    run_id: str
    prompt: str
    model: str
    call_id: str | None = None  # the tool result to append first, if any
    output: str | None = None


@dataclass
class ModelAnswer:
    """The reply as history must keep it for the loop to be durable: its text, its call and
    that call's result."""

    content: str | None
    call_id: str | None  # None: the final answer
    output: str = ""


@workflow.defn(name=BARE_WORKFLOW)
class BareLoop:
    @workflow.run
    async def run(self, input: BareInput) -> BareResult:
        call = ModelCall(run_id=workflow.info().run_id, prompt=input.prompt, model=input.model)
        for turn in range(1, input.max_turns + 1):
            summary = f"turn {turn}"
            answer = await workflow.execute_activity(
                BARE_MODEL_ACTIVITY, call, result_type=ModelAnswer, start_to_close_timeout=TIMEOUT, summary=summary
            )
            if answer.call_id is None:
                return BareResult(turns=turn)
            call = dataclasses.replace(call, call_id=answer.call_id, output=answer.output)
        raise ApplicationError(f"no answer in {input.max_turns} turns", non_retryable=True)


class BareActivities:
    def __init__(self, http: httpx.AsyncClient, base_url: str, tools: ThreadPoolExecutor) -> None:
        self._http = http
        self._pool = tools
        self._url = f"{base_url}/chat/completions"
        # What AgentRun sends for looper_local's tool, built once.
        self._tools = chat_wire.build_request(looper_local.spec(max_turns=2, model=""), [], "", False)["tools"]
        self._conversations: dict[str, list[dict[str, Any]]] = {}  # by run: this process's copy

    @activity.defn(name=BARE_MODEL_ACTIVITY)
    async def model(self, call: ModelCall) -> ModelAnswer:
        messages = self._conversations.setdefault(call.run_id, [
            {"role": "system", "content": "Loop."}, {"role": "user", "content": call.prompt},
        ])  # fmt: skip
        if call.call_id is not None and messages[-1].get("tool_call_id") != call.call_id:  # not on a retry
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": call.output})
        body = {"model": call.model, "messages": messages, "tools": self._tools}
        response = await self._http.post(self._url, json=body)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        calls = message.get("tool_calls") or []
        if not calls:
            del self._conversations[call.run_id]
            return ModelAnswer(message.get("content"), call_id=None)
        arguments = json.loads(calls[0]["function"]["arguments"])
        output = await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(pad.fn, **arguments))
        return ModelAnswer(message.get("content"), call_id=calls[0]["id"], output=output)


async def bare_worker(
    target: str, queue: str, base_url: str, http: httpx.AsyncClient, tools: ThreadPoolExecutor
) -> Worker:
    """Its own client on temporalio's pydantic converter; the sync tool in `tools`."""
    client = await Client.connect(target, namespace="default", data_converter=pydantic_data_converter)
    activities = BareActivities(http, base_url, tools)
    return Worker(
        client,
        task_queue=queue,
        workflows=[BareLoop],
        activities=[activities.model],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
