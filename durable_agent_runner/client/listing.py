"""Runs as the server's visibility store lists them (`AgentClient.list`, `runs_page`,
`children`): one row a run, from its search attributes alone (no worker needed)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import schedule_specs
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.errors import STATUS_NAMES
from durable_agent_runner.client.schedule_specs import SCHEDULED_BY
from durable_agent_runner.client.status import children_query, ui_url
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import RELEASE_2_PATCH

PHASES: tuple[str, ...] = tuple(p.value for p in t.Phase)  # the words a filter takes
MAX_LIST = 1000
READ_TIMEOUT = timedelta(seconds=10)


class RunRow(BaseModel):
    """One run as `list` shows it: its status, agent, phase, turn, spend and waiting calls."""

    run_id: str
    status: str
    agent: str | None = None
    phase: str | None = None
    turn: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    pending_approvals: int = 0
    in_doubt: bool = False
    started_at: str
    schedule: str | None = None  # the schedule that started it (client/schedules.py)
    ui_url: str = ""


class RunsPage(BaseModel):
    """One page of runs, newest first, and the token of the next page ("" when none)."""

    rows: list[RunRow]
    next_page: str = ""


def run_row(wf: WorkflowExecution, ui: str) -> RunRow:
    """A run as `list` shows it, from its visibility record; `ui`: the Web UI's base URL."""
    sa = wf.typed_search_attributes
    return RunRow(
        run_id=wf.id,
        status=STATUS_NAMES.get(wf.status, "unknown") if wf.status else "unknown",
        agent=sa.get(t.SA_AGENT),
        phase=sa.get(t.SA_PHASE),
        turn=sa.get(t.SA_TURN) or 0,
        total_tokens=sa.get(t.SA_TOKENS) or 0,
        cost_usd=sa.get(t.SA_COST) or 0.0,
        pending_approvals=sa.get(t.SA_PENDING) or 0,
        in_doubt=bool(sa.get(t.SA_IN_DOUBT)),
        started_at=wf.start_time.isoformat(),
        schedule=sa.get(SCHEDULED_BY),
        ui_url=ui_url(ui, wf.id, wf.namespace),
    )


# Running and started on 1.x code: no 2.0 marker (workflows/versions.py). Temporal writes each marker's
# id into TemporalChangeVersion; `!=` also finds a run that recorded no marker at all.
STARTED_ON_1X = f'ExecutionStatus="Running" AND TemporalChangeVersion != "{RELEASE_2_PATCH}"'


def runs_query(
    phase: str = "", agent: str = "", waiting: bool = False, started_on_1x: bool = False, schedule: str = ""
) -> str:
    """The visibility query for runs in `phase`, of `agent`, waiting for a person, running since
    1.x, or started by `schedule` (each value checked, then quoted)."""
    parts = [f'WorkflowType="{t.WORKFLOW_NAME}"']
    if started_on_1x:
        parts.append(STARTED_ON_1X)
    if phase:
        if phase not in PHASES:
            raise BadArgument("phase", f"must be one of {', '.join(PHASES)}")
        parts.append(f"{t.SA_PHASE.name}={json.dumps(phase)}")
    if agent:
        if len(agent) > 200 or not agent.isprintable():
            raise BadArgument("agent", "must be a name of at most 200 printable characters")
        parts.append(f"{t.SA_AGENT.name}={json.dumps(agent)}")
    if schedule:  # Temporal's own attribute on the runs a schedule starts
        parts.append(f"{SCHEDULED_BY.name}={json.dumps(schedule_specs.name(schedule, 'schedule'))}")
    if waiting:
        parts.append(f'ExecutionStatus="Running" AND ({t.SA_PENDING.name} > 0 OR {t.SA_IN_DOUBT.name} = true)')
    return " AND ".join(parts)


async def list_runs(client: Client, query: str, limit: int, ui: str) -> list[RunRow]:
    return [run_row(wf, ui) async for wf in client.list_workflows(query, limit=limit, rpc_timeout=READ_TIMEOUT)]


def _token(text: str) -> bytes | None:
    if not text:
        return None
    try:
        return base64.b64decode(text.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise BadArgument("page", "that page token is not one this client made") from None


async def runs_page(client: Client, query: str, ui: str, token: str = "", page_size: int = 50) -> RunsPage:
    """One page of runs (newest first within it) and the token of the next."""
    start = _token(token)
    pages = client.list_workflows(query, page_size=page_size, next_page_token=start, rpc_timeout=READ_TIMEOUT)
    try:
        await pages.fetch_next_page()
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise BadArgument("query", f"Temporal refused it: {err.message}") from None
        raise
    # Newest first within the page: the dev server's SQLite store ignores ORDER BY and gives
    # running runs first, then by close time; Elasticsearch and SQL stores give start time already.
    found = sorted(pages.current_page or [], key=lambda wf: wf.start_time, reverse=True)
    nxt = pages.next_page_token
    return RunsPage(
        rows=[run_row(wf, ui) for wf in found], next_page=base64.urlsafe_b64encode(nxt).decode() if nxt else ""
    )


async def children(client: Client, run_id: str, ui: str, depth: int = 2, limit: int = 50) -> list[dict[str, Any]]:
    """The runs this one started (agents as tools), each a row with its own `children`, `depth`
    levels down; [] when the store cannot say."""
    query = children_query(run_id)
    out = []
    try:
        async for wf in client.list_workflows(query, limit=limit, rpc_timeout=READ_TIMEOUT):
            row = run_row(wf, ui).model_dump()
            row["children"] = await children(client, wf.id, ui, depth - 1, limit) if depth > 1 else []
            out.append(row)
    except RPCError:
        return []
    return out
