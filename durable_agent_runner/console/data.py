"""What the console reads and does, in one module, through the Python client the CLI uses too
(its list rows, its status, its decision, its session message, its pause / resume / edit /
fork), so a person sees and does here exactly what `client.py` would.

Every read is bounded: the runs page asks the server's visibility store for one page, the inbox
asks it for the runs whose AgentPendingApprovals is above zero or whose AgentInDoubt is true and
queries at most INBOX_RUNS of them (and the evals paused on their budget: eval_pauses.py), and a
run's page shows at most MAX_MESSAGES messages and MAX_EVENTS events."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.service import RPCError

from durable_agent_runner.client import listing
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.errors import STATUS_NAMES, AgentRunError, RunNotFound
from durable_agent_runner.client.status import ENDED
from durable_agent_runner.console.eval_pauses import INBOX_EVALS, EvalPause, eval_pause
from durable_agent_runner.console.links import BadRequest, seal, unseal
from durable_agent_runner.console.waits import Outside
from durable_agent_runner.workflows import types as t

PHASES = listing.PHASES
PAGE_SIZE = 50  # runs per page
INBOX_RUNS = 200  # runs with waiting calls the inbox reads, newest first
QUERY_TIMEOUT = timedelta(seconds=2)  # one run's live state; a run no worker answers for is left out
READERS = 8  # queries in flight at once
MAX_MESSAGES = 300  # of a transcript, the last ones shown
MAX_EVENTS = 2000  # of a run's events, read for its waterfall
MAX_CHILDREN = 50
INBOX_TTL = 0.3  # seconds an inbox read is shared by every open inbox
WAIT = 10.0  # seconds a worker has to take an action


class NotFound(Exception):
    """No run with that id: 404."""


@dataclass
class Waiting:
    """One call waiting for a person, with what the inbox shows of it."""

    run_id: str
    agent: str
    call: t.PendingApproval
    schema: dict[str, Any] = field(default_factory=dict)  # the tool's JSON schema: the edit form
    timeout: float | None = None  # the agent's approval timeout, seconds
    outcome: str = "reject"  # what the timeout does

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.call.call_id}"

    @property
    def since(self) -> datetime:
        return self.call.since

    @property
    def deadline(self) -> datetime | None:
        return self.call.since + timedelta(seconds=self.timeout) if self.timeout else None


@dataclass
class Doubt:
    """One call in doubt (a `once` tool's attempt ended without a result), waiting for a person
    to resolve it: rerun, give its result, or fail it."""

    run_id: str
    agent: str
    call: t.InDoubtCall

    @property
    def key(self) -> str:  # a call in doubt again after a rerun is a new row
        return f"{self.run_id}/{self.call.call_id}/doubt-{self.call.doubt}"

    @property
    def since(self) -> datetime:
        return self.call.ended_at


@dataclass
class Question:
    """An `ask_person` question waiting for a person's answer: a choice, or a text."""

    run_id: str
    agent: str
    call: t.PendingQuestion

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.call.call_id}/question"

    @property
    def since(self) -> datetime:
        return self.call.since


# A call to approve, one in doubt, a question; an outside wait; an eval paused on its budget (the inbox's).
Asking = Waiting | Doubt | Question | Outside | EvalPause


# ------------------------------------------------------------------------------------ runs


RUN_FILTERS = ("phase", "agent", "waiting", "schedule")  # the runs page's query parameters


def runs_query(phase: str = "", agent: str = "", waiting: str = "", schedule: str = "") -> str:
    """The runs page's filters as the client's query (`waiting` on when given); a bad one is a BadRequest (400)."""
    try:
        return listing.runs_query(phase, agent, bool(waiting), schedule=schedule)
    except BadArgument as err:  # a filter's field, as the form names it: "phase must be one of …"
        raise BadRequest(f"{err.field} {err.reason}" if err.field else err.reason) from None


async def runs_page(
    client: AgentClient, query: str, token: str = "", page_size: int = PAGE_SIZE, *, key: bytes
) -> tuple[list[dict[str, Any]], str]:
    """One page of runs (newest first) and the link of the next page ("" if none). Links are the
    client's page tokens signed with the console's key (console/links.py): only this console's
    reach Temporal."""
    start = unseal(token, key)  # BadRequest unless this console made it
    try:
        page = await client.runs_page(start.decode() if start else "", query=query, page_size=page_size)
    except BadArgument as err:  # a query Temporal refused, or a token of another client
        raise BadRequest(str(err)) from None
    rows = [row.model_dump() for row in page.rows]
    asking = [r for r in rows if (r["pending_approvals"] or r["in_doubt"]) and r["status"] == "running"]
    await _waiting_calls(client, asking)
    return rows, seal(page.next_page.encode(), key) if page.next_page else ""


async def _waiting_calls(client: AgentClient, rows: list[dict[str, Any]]) -> None:
    """Each row's waiting calls' names (`tool (call id)`), read live."""

    async def one(row: dict[str, Any]) -> None:
        status = await _status(client, row["run_id"])
        doubts = [f"{d.tool} ({d.call_id}) in doubt" for d in status.in_doubt] if status else []
        doubts += [f"ask_person ({q.call_id}): a question" for q in status.questions] if status else []
        row["waiting"] = [f"{p.tool} ({p.call_id})" for p in status.pending_approvals] + doubts if status else []

    await _bounded([one(r) for r in rows])


async def _bounded(jobs: list[Any]) -> None:
    gate = asyncio.Semaphore(READERS)

    async def run(job: Any) -> None:
        async with gate:
            await job

    await asyncio.gather(*(run(j) for j in jobs))


async def _status(client: AgentClient, run_id: str) -> t.RunStatus | None:
    return await client.get(run_id).live(QUERY_TIMEOUT.total_seconds())


async def run_is_live(client: AgentClient, run_id: str) -> bool:
    """Whether the run is open (False: it has closed); NotFound for an unknown id."""
    try:
        status = await client.get(run_id).exists()
    except RunNotFound as err:  # or NotThatKind: an eval's id
        raise NotFound(str(err)) from None
    return STATUS_NAMES.get(status) not in ENDED if status is not None else False


# ----------------------------------------------------------------------------------- inbox

_specs: OrderedDict[str, t.AgentSpec | None] = OrderedDict()  # run id → its frozen agent (with its team)


async def agent_spec(client: AgentClient, run_id: str) -> t.AgentSpec | None:
    """The run's frozen first agent and team, read once per run."""
    if run_id in _specs:
        return _specs[run_id]
    spec = await client.get(run_id).agent(wait=QUERY_TIMEOUT.total_seconds())
    if spec is None:
        return None
    _specs[run_id] = spec
    while len(_specs) > 1000:
        _specs.popitem(last=False)
    return spec


def find_agent(spec: t.AgentSpec | None, name: str | None) -> t.AgentSpec | None:
    if spec is None:
        return None
    return next((a for a in [spec, *spec.team] if a.name == name), spec)


def find_tool(spec: t.AgentSpec | None, name: str) -> t.ToolSpec | None:
    for agent in [spec, *spec.team] if spec else []:
        for tool in agent.tools:
            if tool.name == name:
                return tool
    return None


def call_keys(run_id: str, status: t.RunStatus | None) -> list[str] | None:
    """The keys of the calls a run asks a person about (as `waiting_in` gives them); None: unknown."""
    if status is None:
        return None
    doubts = [Doubt(run_id, "", d).key for d in status.in_doubt]
    questions = [Question(run_id, "", q).key for q in status.questions]
    outside = [Outside(run_id, "", o).key for o in status.outside]
    return [f"{run_id}/{p.call_id}" for p in status.pending_approvals] + doubts + questions + outside


async def waiting_in(client: AgentClient, run_id: str, status: t.RunStatus | None = None) -> list[Asking]:
    """The calls waiting for a person in one run: approvals (with their tools' schemas and
    timeouts), then calls in doubt."""
    status = status or await _status(client, run_id)
    if status is None or status.status in t.FINAL_PHASES:
        return []
    doubts: list[Asking] = [Doubt(run_id, status.agent or "?", d) for d in status.in_doubt]
    doubts += [Question(run_id, status.agent or "?", q) for q in status.questions]
    doubts += [Outside(run_id, status.agent or "?", o) for o in status.outside]
    if not status.pending_approvals:
        return doubts
    spec = await agent_spec(client, run_id)
    agent = find_agent(spec, status.agent)
    out: list[Asking] = []
    for call in status.pending_approvals:
        tool = find_tool(spec, call.tool)
        out.append(
            Waiting(
                run_id=run_id,
                agent=status.agent or "?",
                call=call,
                schema=tool.parameters if tool else {},
                timeout=agent.approval_timeout_seconds if agent else None,
                outcome=agent.approval_timeout_outcome if agent else "reject",
            )
        )
    return [*out, *doubts]


class Inbox:
    """Every call waiting for a person across runs, and every eval paused on its budget, oldest first.
    One read serves every open inbox for INBOX_TTL seconds; a decision made here makes the next read fresh."""

    def __init__(self) -> None:
        self._read: tuple[float, list[Asking]] | None = None
        self._lock: asyncio.Lock | None = None

    async def read(self, client: AgentClient) -> list[Asking]:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._read is not None and time.monotonic() - self._read[0] < INBOX_TTL:
                return self._read[1]
            found: list[Asking] = []
            ids = [row.run_id for row in await client.list(INBOX_RUNS, waiting=True)]
            evals = await client.evals.list(INBOX_EVALS, paused=True)

            async def one(run_id: str) -> None:
                found.extend(w for w in await waiting_in(client, run_id) if not isinstance(w, Outside))

            async def paused(row: Any) -> None:
                found.extend(await eval_pause(client, row, QUERY_TIMEOUT.total_seconds()))

            await _bounded([one(i) for i in ids] + [paused(r) for r in evals])
            found.sort(key=lambda w: (w.since, w.key))
            self._read = (time.monotonic(), found)
            return found

    def forget(self) -> None:
        self._read = None


# ------------------------------------------------------------------------------- a run


@dataclass
class RunView:
    status: dict[str, Any]
    messages: list[tuple[int, t.Message]]  # (index, message), the last MAX_MESSAGES
    hidden: int  # earlier messages not shown
    events: list[t.AnyRunEvent]
    next_event: int
    children: list[dict[str, Any]]
    parent: str | None
    waiting: list[Asking]
    live: bool  # a worker answered its queries


async def run_view(client: AgentClient, run_id: str) -> RunView:
    run = client.get(run_id)
    try:
        status = (await run.status()).as_dict()
    except RunNotFound as err:  # or NotThatKind: an eval's id
        raise NotFound(str(err)) from None
    live = "note" not in status
    messages: list[tuple[int, t.Message]] = []
    hidden = 0
    events: list[t.AnyRunEvent] = []
    if live:
        try:
            transcript = await run.transcript(wait=QUERY_TIMEOUT.total_seconds())
            hidden = max(len(transcript.messages) - MAX_MESSAGES, 0)
            messages = list(enumerate(transcript.messages))[hidden:]
            events = await read_events(client, run_id, 0)
        except (RPCError, AgentRunError):
            live = False
    asks = live and any(status.get(k) for k in ("pending_approvals", "in_doubt", "questions", "outside"))
    waiting = await waiting_in(client, run_id) if asks else []
    return RunView(
        status=status,
        messages=messages,
        hidden=hidden,
        events=events,
        next_event=follow_from(events),
        children=await children_of(client, run_id),
        parent=status.get("parent"),
        waiting=waiting,
        live=live,
    )


def follow_from(events: list[t.AnyRunEvent]) -> int:
    """Where a live page follows the run from: after its last event, or at the model call still in
    flight (the follower learns from that event that text streams)."""
    for ev in reversed(events):
        if ev.kind == t.EventKind.MODEL_FINISHED:
            break
        if ev.kind == t.EventKind.MODEL_STARTED:
            return ev.seq
    return events[-1].seq + 1 if events else 0


async def read_events(client: AgentClient, run_id: str, since: int) -> list[t.AnyRunEvent]:
    return await client.get(run_id).read_events(since, MAX_EVENTS)


async def children_of(client: AgentClient, run_id: str, depth: int = 2) -> list[dict[str, Any]]:
    """The runs this one started (agents as tools), with theirs, `depth` levels down."""
    return await client.get(run_id).children(depth)


# ------------------------------------------------------------------------------ actions


async def decide_call(
    client: AgentClient,
    run_id: str,
    call_id: str,
    *,
    approve: bool,
    by: str,
    reason: str = "",
    arguments: Any = None,
) -> t.DecisionReceipt:
    decision = t.ApprovalDecision(
        call_id=call_id, approve=approve, arguments=arguments, reason="" if approve else reason, by=by
    )
    return await client.get(run_id).decide(decision, wait=WAIT)


async def unserved(client: AgentClient, run_id: str) -> list[dict[str, str]]:
    """After an approval: what the run now waits for that no worker takes (`RunHandle.unserved`, as
    `client.py approve` says it). A look the server does not answer within its bound says nothing:
    the approval stands, and the run's page looks again."""
    try:
        return await client.get(run_id).unserved()
    except (RPCError, TimeoutError):
        return []


async def resolve(
    client: AgentClient,
    run_id: str,
    call_id: str,
    action: Any,
    *,
    by: str,
    result: str | None,
    reason: str,
    doubt: int | None,
) -> t.ResolveReceipt:
    """A person's decision on a call in doubt, as `client.py resolve` records it."""
    return await client.get(run_id).resolve(call_id, action, result, reason, by=by, doubt=doubt, wait=WAIT)


async def answer(
    client: AgentClient, run_id: str, call_id: str, text: str | None, choice: int | None, by: str
) -> t.AnswerReceipt:
    """A person's answer to an `ask_person` question, as `client.py answer` records it."""
    return await client.get(run_id).answer_question(call_id, text, choice=choice, by=by, wait=WAIT)


async def send(client: AgentClient, run_id: str, text: str, by: str) -> t.MessageReceipt:
    return await client.get_session(run_id).send(text, by=by, wait=WAIT)


async def pause(client: AgentClient, run_id: str, by: str, reason: str) -> t.RunStatus:
    return await client.get(run_id).pause(reason, by=by, wait=WAIT)


async def resume(
    client: AgentClient, run_id: str, by: str, add_tokens: int | None = None, add_usd: float | None = None
) -> t.RunStatus:
    """Resume a paused run; one paused on its budget goes on with it raised (the client checks the raise)."""
    return await client.get(run_id).resume(by=by, add_tokens=add_tokens, add_usd=add_usd, wait=WAIT)


async def edit(client: AgentClient, run_id: str, change: t.Edit) -> t.EditReceipt:
    return await client.get(run_id).edit(change, wait=WAIT)


async def fork(client: AgentClient, run_id: str, at_turn: int, prompt: str, task_queue: str) -> str:
    forked = await client.get(run_id).fork(at_turn, prompt or None, task_queue=task_queue)
    return forked.run_id
