"""Reads of one run for the console's routes: values a page shows cut (views.CUT), read whole
(one message of its transcript, a waiting call's arguments), and a call waiting for approval."""

from __future__ import annotations

from typing import Any

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.console.data import QUERY_TIMEOUT, NotFound, Waiting, _status, run_is_live, waiting_in
from durable_agent_runner.workflows import types as t


async def message_at(client: AgentClient, run_id: str, index: int) -> t.Message | None:
    """Message `index` of the run's transcript whole (None past its end), for its own route.
    NotFound for an unknown run."""
    await run_is_live(client, run_id)  # NotFound
    tail = await client.get(run_id).transcript(start=index, wait=QUERY_TIMEOUT.total_seconds())
    return tail.messages[0] if tail.messages else None


async def call_arguments(client: AgentClient, run_id: str, call_id: str) -> Any:
    """The arguments of a call waiting for approval or in doubt, whole; NotFound if none is."""
    await run_is_live(client, run_id)  # NotFound
    status = await _status(client, run_id)
    for p in status.pending_approvals if status else []:
        if p.call_id == call_id:
            return p.arguments
    for d in status.in_doubt if status else []:
        if d.call_id == call_id:
            return d.arguments
    raise NotFound(f"call {call_id} of run {run_id} is not waiting for a person (or no worker answered)")


async def waiting_call(client: AgentClient, run_id: str, call_id: str) -> Waiting | None:
    """The call if it waits for approval now (with its tool's schema); None if not, or unknown."""
    found = [w for w in await waiting_in(client, run_id) if isinstance(w, Waiting) and w.call.call_id == call_id]
    return found[0] if found else None
