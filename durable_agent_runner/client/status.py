"""What a run is doing (`RunHandle.status()`, `client.py status`), gathered from its search
attributes, its live state (a query, when a worker answers), whether its workflow task is stuck,
its forks and the activities it retries."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from durable_agent_runner.client.budget import budget_view
from durable_agent_runner.client.errors import STATUS_NAMES, cli, failure
from durable_agent_runner.client.follow import READ
from durable_agent_runner.client.schedule_specs import SCHEDULED_BY
from durable_agent_runner.client.scores import RunScores, scores_of
from durable_agent_runner.client.stuck import stuck, unserved
from durable_agent_runner.workflows import types as t

QUERY_TIMEOUT = timedelta(seconds=3)
ENDED = t.ENDED_STATUSES


class StatusUsage(BaseModel):
    """Token usage so far; the fields past `total_tokens` are known when a worker answered."""

    total_tokens: int = 0
    requests: int | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    unpriced: int | None = None


class RunError(BaseModel):
    type: str
    message: str


class RunInfo(BaseModel):
    """The facts `client.py status` shows. `status`: running, awaiting_approval, in_doubt, paused, waiting
    (a session between messages), stuck, completed, failed, cancelled, terminated or timed_out.
    Fields a worker tells (phase details, approvals, decisions, session) are empty when none
    answered; `note` then says so."""

    run_id: str
    status: str
    agent: str | None = None
    phase: str | None = None
    turn: int = 0
    max_turns: int | None = None
    usage: StatusUsage = StatusUsage()
    cost_usd: float = 0.0
    last_step: str | None = None
    started_at: str | None = None
    closed_at: str | None = None
    ui_url: str = ""
    error: RunError | None = None
    handoffs: list[t.HandoffRecord] = []
    usage_by_agent: dict[str, t.Usage] = {}
    usage_by_model: dict[str, t.Usage] = {}  # the run's own model calls, by model string (cost per provider)
    model: str | None = None  # the model the agent in charge calls now
    switches: list[t.ModelSwitch] = []  # durable fallbacks: which model failed, why, and the one its turn went to
    pending_approvals: list[t.PendingApproval] = []
    decisions: list[t.ApprovalRecord] = []
    in_doubt: list[t.InDoubtCall] = []  # calls of `once` tools whose attempt ended without a result
    resolutions: list[t.CallResolution] = []
    questions: list[t.PendingQuestion] = []  # `ask_person` calls waiting for a person's answer
    answers: list[t.AnswerRecord] = []
    outside: list[t.PendingOutside] = []  # calls waiting for an outside system's completion
    completions: list[t.CompletionRecord] = []
    ignored_signals: list[str] = []
    paused: t.PauseInfo | None = None
    forked_from: t.ForkLink | None = None
    session: t.SessionStatus | None = None
    stuck: dict[str, Any] | None = None
    unserved: list[dict[str, str]] = []  # waits no worker takes: {queue, waiting, message} (client/stuck.py)
    forks: list[dict[str, Any]] = []
    retrying: list[dict[str, Any]] = []
    budget: dict[str, Any] | None = None  # runs with a budget: spent, reserved, left for the run and its tree
    parent: str | None = None  # a child run (an agent used as a tool): the run that started it
    children: list[dict[str, Any]] = []  # the runs it started (its agents used as tools): run_id, agent, status, tokens
    schedule: str | None = None  # a run a schedule started: the schedule's name
    scores: RunScores | None = None  # a completed run its agent's evaluators scored (online scoring)
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON `client.py status --json` prints: the fields that were found."""
        return self.model_dump(mode="json", exclude_unset=True)


def web_ui(base: str, namespace: str, kind: str, name: str) -> str:
    """A page of the Web UI at `base` (TEMPORAL_UI_URL, which the client's settings read once): a
    run's ("workflows") or a schedule's, in `namespace`, the one its client is connected to (which
    `connect(namespace=...)` may have set apart from the environment's)."""
    return f"{base.rstrip('/')}/namespaces/{quote(namespace, safe='')}/{kind}/{quote(name, safe='')}"


def ui_url(base: str, run_id: str, namespace: str) -> str:
    """The run's page in the Web UI at `base`."""
    return web_ui(base, namespace, "workflows", run_id)


async def forks_of(client: Client, run_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """The runs forked from `run_id` (the other direction of the link), newest first."""
    query = f"{t.SA_FORKED_FROM.name}={json.dumps(run_id)}"
    out = []
    async for wf in client.list_workflows(query, limit=limit, rpc_timeout=READ):
        memo = await wf.memo()
        turn = (memo.get("forked_from") or {}).get("turn")
        out.append({"run_id": wf.id, "turn": turn, "started_at": wf.start_time.isoformat()})
    return out


def children_query(run_id: str) -> str:
    """The visibility query for the runs `run_id` started: its agents used as tools."""
    return f'ParentWorkflowId={json.dumps(run_id)} AND WorkflowType="{t.WORKFLOW_NAME}"'


async def children_of(client: Client, run_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """The runs `run_id` started, as status names them: id, agent, status, tokens."""
    out = []
    async for wf in client.list_workflows(children_query(run_id), limit=limit, rpc_timeout=READ):
        sa, status = wf.typed_search_attributes, STATUS_NAMES.get(wf.status, "unknown") if wf.status else "unknown"
        out.append(
            {"run_id": wf.id, "agent": sa.get(t.SA_AGENT), "status": status, "total_tokens": sa.get(t.SA_TOKENS)}
        )
    return out


async def gather(
    client: Client, handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription, ui: str
) -> RunInfo:
    """The run's status from its description and its status query; `ui`: the Web UI's base URL."""
    sa = desc.typed_search_attributes
    out: dict[str, Any] = {
        "run_id": handle.id,
        "status": STATUS_NAMES.get(desc.status, "unknown") if desc.status else "unknown",
        "agent": sa.get(t.SA_AGENT),
        "phase": sa.get(t.SA_PHASE),
        "turn": sa.get(t.SA_TURN) or 0,
        "usage": {"total_tokens": sa.get(t.SA_TOKENS) or 0},
        "cost_usd": sa.get(t.SA_COST) or 0.0,
        "last_step": None,
        "started_at": desc.start_time.isoformat() if desc.start_time else None,
        "closed_at": desc.close_time.isoformat() if desc.close_time else None,
        "ui_url": ui_url(ui, handle.id, client.namespace),
    }
    if desc.parent_id:
        out["parent"] = desc.parent_id
    if sa.get(SCHEDULED_BY):
        out["schedule"] = sa.get(SCHEDULED_BY)
    try:
        if desc.workflow_type == t.DELIVER_WORKFLOW:  # no agent, no status query: say what it is
            out["note"] = "a delivery: it gives a session one message from a schedule or a webhook (see the session)"
        else:
            live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT)
            out.update(_live(live, out["status"]))
            if live.budget is not None:
                out["budget"] = await budget_view(client, live)
    except (RPCError, WorkflowQueryFailedError):
        out["note"] = "live details unavailable (is a worker running?); showing search attributes"
    held = await stuck(client, desc) if out["status"] == "running" else None
    if held is not None:  # a worker answers, but its workflow code fails on this run
        out["status"], out["stuck"] = "stuck", held
        out.pop("note", None)
    waits = await unserved(client, desc) if out["status"] not in ENDED else []
    if waits:  # what it waits for has no worker: said, not waited out in silence
        out["unserved"] = waits
    forks = await forks_of(client, handle.id)
    if forks:
        out["forks"] = forks
    if children := await children_of(client, handle.id):
        out["children"] = children
    if out["status"] == "completed" and (scores := await scores_of(client, handle.id)) is not None:
        out["scores"] = scores
    retrying = [
        {"activity": p.activity_type.name, "attempt": p.attempt, "last_failure": p.last_failure.message}
        for p in desc.raw_description.pending_activities
        if p.attempt > 1 and p.HasField("last_failure")
    ]
    if retrying:
        out["retrying"] = retrying
    if out["status"] in ENDED and out.get("phase") not in {None, *t.FINAL_PHASES}:
        out["phase"] = out["status"]  # terminated or timed out: the run could not record it itself
    if out["status"] in ENDED - {t.Phase.COMPLETED} and "error" not in out:
        try:
            await handle.result(rpc_timeout=READ)
        except WorkflowFailureError as err:
            out["error"] = failure(err)[1]
    return RunInfo.model_validate(out)


def _live(live: t.RunStatus, status: str) -> dict[str, Any]:
    """What the run's own status query adds."""
    usage = live.usage.model_dump()
    usage["total_tokens"] = live.usage.total_tokens
    out: dict[str, Any] = {
        "cost_usd": live.usage.cost_usd,
        "phase": live.phase,
        "turn": live.turn,
        "max_turns": live.max_turns,
        "usage": usage,
        "last_step": live.last_step,
    }
    if live.agent is not None:  # None before its agent is resolved: the one it was started for (AgentName) stays
        out["agent"] = live.agent
    if live.error:
        out["error"] = {"type": live.error_type or "RunFailed", "message": live.error}
    out["handoffs"] = [h.model_dump(mode="json") for h in live.handoffs]
    if status == "running" and live.pending_approvals:
        status = t.Phase.AWAITING_APPROVAL.value
    out["usage_by_agent"] = {name: u.model_dump() for name, u in live.usage_by_agent.items()}
    out["usage_by_model"] = {name: u.model_dump() for name, u in live.usage_by_model.items()}
    out["model"] = live.model
    out["switches"] = [x.model_dump(mode="json") for x in live.switches]
    # Only a running run has calls waiting: an ended one's state may predate how it ended.
    waiting = live.pending_approvals if status not in ENDED else []
    out["pending_approvals"] = [p.model_dump(mode="json") for p in waiting]
    out["decisions"] = [d.model_dump(mode="json") for d in live.decisions]
    doubts = live.in_doubt if status not in ENDED else []
    out["in_doubt"] = [d.model_dump(mode="json") for d in doubts]
    out["resolutions"] = [r.model_dump(mode="json") for r in live.resolutions]
    if status == "running" and doubts:
        status = t.Phase.IN_DOUBT.value
    questions = live.questions if status not in ENDED else []
    out["questions"] = [q.model_dump(mode="json") for q in questions]
    out["answers"] = [a.model_dump(mode="json") for a in live.answers]
    out["outside"] = [o.model_dump(mode="json") for o in (live.outside if status not in ENDED else [])]
    out["completions"] = [c.model_dump(mode="json") for c in live.completions]
    if live.ignored_signals:
        out["ignored_signals"] = live.ignored_signals
    if live.paused is not None:
        out["paused"] = live.paused.model_dump(mode="json")
        if status == "running":
            status = "paused"
    if live.forked_from is not None:
        out["forked_from"] = live.forked_from.model_dump()
    if live.session is not None:
        out["session"] = live.session.model_dump(mode="json")
        if status == "running" and live.status == "waiting":
            status = "waiting"
    out["status"] = status
    return out


class WaitingFor(BaseModel):
    """One thing a run waits for a person on: a call's `approval`, a call `in_doubt`, a `resume`
    (it is paused), a `message` (a session between messages), a `question`; or, for an outside
    system, a call's `outside` completion. `command` acts on it."""

    kind: Literal["approval", "in_doubt", "resume", "message", "question", "outside"]
    call_id: str | None = None
    tool: str | None = None
    question: str | None = None  # a `question`: what was asked, and its choices (None: a free answer)
    choices: list[str] | None = None
    since: datetime | None = None
    command: str

    def __str__(self) -> str:
        what = {
            "approval": f"approval of {self.tool} (call {self.call_id})",
            "in_doubt": f"a decision on {self.tool} (call {self.call_id}), in doubt",
            "resume": "a resume (it is paused)",
            "message": "the next message, or its end (a session)",
            "question": f"an answer to: {self.question}",
            "outside": f"an outside completion of {self.tool} (call {self.call_id})",
        }[self.kind]
        return f"{what}: {self.command}"


def waiting_for(run_id: str, live: t.RunStatus) -> list[WaitingFor]:
    """What a live run waits for a person (or an outside system) on, from its status query (empty:
    nothing, it works)."""
    if live.status in t.FINAL_PHASES:
        return []
    out = [
        WaitingFor(
            kind="approval",
            call_id=p.call_id,
            tool=p.tool,
            since=p.since,
            command=f"{cli()} approve {run_id} {p.call_id} | reject {run_id} {p.call_id} --reason WHY",
        )
        for p in live.pending_approvals
    ]
    out += [
        WaitingFor(
            kind="in_doubt",
            call_id=d.call_id,
            tool=d.tool,
            since=d.ended_at,
            command=f"{cli()} resolve {run_id} {d.call_id} --rerun | --result JSON | --fail REASON",
        )
        for d in live.in_doubt
    ]
    out += [
        WaitingFor(
            kind="question",
            call_id=q.call_id,
            tool="ask_person",
            since=q.since,
            question=q.question,
            choices=q.choices,
            command=f"{cli()} answer {run_id} {q.call_id} " + ("--choice N" if q.choices else "TEXT"),
        )
        for q in live.questions
    ]
    out += [
        WaitingFor(
            kind="outside", call_id=o.call_id, tool=o.tool, since=o.since,
            command=f"{cli()} complete {run_id} {o.call_id} --result JSON | --fail REASON",
        )
        for o in live.outside
    ]  # fmt: skip
    if live.paused is not None:
        out.append(WaitingFor(kind="resume", since=live.paused.at, command=f"{cli()} resume {run_id}"))
    if live.session is not None and live.status == "waiting":
        out.append(WaitingFor(kind="message", command=f"{cli()} send {run_id} TEXT | end {run_id}"))
    return out
