"""`client.py status`: what a run is doing, gathered from its search attributes, its live state
(a query, when a worker answers), whether its workflow task is stuck, its forks and the activities
it retries; then rendered as text."""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from durable_agent_runner.cli import debug
from durable_agent_runner.cli.common import ENDED, STATUS_NAMES, emit, existing, failure, ui_url
from durable_agent_runner.cli.stuck import stuck
from durable_agent_runner.workflows import types as t

QUERY_TIMEOUT = timedelta(seconds=3)


async def gather_status(
    client: Client, handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription
) -> dict[str, Any]:
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
        "ui_url": ui_url(handle.id),
    }
    try:
        live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT)
        usage = live.usage.model_dump()
        usage["total_tokens"] = live.usage.total_tokens
        out["cost_usd"] = live.usage.cost_usd
        out.update(
            agent=live.agent,
            phase=live.phase,
            turn=live.turn,
            max_turns=live.max_turns,
            usage=usage,
            last_step=live.last_step,
        )
        if live.error:
            out["error"] = {"type": live.error_type or "RunFailed", "message": live.error}
        out["handoffs"] = [h.model_dump(mode="json") for h in live.handoffs]
        if out["status"] == "running" and live.pending_approvals:
            out["status"] = "awaiting_approval"
        out["usage_by_agent"] = {name: u.model_dump() for name, u in live.usage_by_agent.items()}
        # Only a running run has calls waiting: an ended one's state may predate how it ended.
        waiting = live.pending_approvals if out["status"] not in ENDED else []
        out["pending_approvals"] = [p.model_dump(mode="json") for p in waiting]
        out["decisions"] = [d.model_dump(mode="json") for d in live.decisions]
        doubts = live.in_doubt if out["status"] not in ENDED else []
        out["in_doubt"] = [d.model_dump(mode="json") for d in doubts]
        out["resolutions"] = [r.model_dump(mode="json") for r in live.resolutions]
        if out["status"] == "running" and doubts:
            out["status"] = "in_doubt"
        if live.ignored_signals:
            out["ignored_signals"] = live.ignored_signals
        if live.paused is not None:
            out["paused"] = live.paused.model_dump(mode="json")
            if out["status"] == "running":
                out["status"] = "paused"
        if live.forked_from is not None:
            out["forked_from"] = live.forked_from.model_dump()
        if live.session is not None:
            out["session"] = live.session.model_dump(mode="json")
            if out["status"] == "running" and live.status == "waiting":
                out["status"] = "waiting"
    except (RPCError, WorkflowQueryFailedError):
        out["note"] = "live details unavailable (is a worker running?); showing search attributes"
    held = await stuck(client, desc) if out["status"] == "running" else None
    if held is not None:  # a worker answers, but its workflow code fails on this run
        out["status"], out["stuck"] = "stuck", held
        out.pop("note", None)
    forks = await debug.forks_of(client, handle.id)
    if forks:
        out["forks"] = forks
    retrying = [
        {"activity": p.activity_type.name, "attempt": p.attempt, "last_failure": p.last_failure.message}
        for p in desc.raw_description.pending_activities
        if p.attempt > 1 and p.HasField("last_failure")
    ]
    if retrying:
        out["retrying"] = retrying
    if out["status"] in ENDED and out.get("phase") not in (None, "completed", "failed", "cancelled"):
        out["phase"] = out["status"]  # terminated or timed out: the run could not record it itself
    if out["status"] in ENDED - {"completed"} and "error" not in out:
        try:
            await handle.result()
        except WorkflowFailureError as err:
            out["error"] = failure(err)[1]
    return out


def render_status(s: dict[str, Any]) -> str:
    usage = s["usage"]
    tokens = f"{usage['total_tokens']} total"
    if "input_tokens" in usage:
        tokens = (
            f"{usage['input_tokens']} in ({usage['cached_tokens']} cached) · "
            f"{usage['output_tokens']} out · {usage['requests']} model calls"
        )
    turn = f"{s['turn']}" + (f" of {s['max_turns']}" if s.get("max_turns") else "")
    if usage.get("unpriced"):
        tokens += f" · ${s.get('cost_usd', 0):.4f} (+ {usage['unpriced']} call(s) to models without a price)"
    elif s.get("cost_usd"):
        tokens += f" · ${s['cost_usd']:.4f}"
    lines = [
        f"run:     {s['run_id']}",
        f"agent:   {s['agent'] or '?'}",
        f"status:  {s['status']}" + (f" ({s['phase']})" if s.get("phase") and s["phase"] != s["status"] else ""),
        f"turn:    {turn}",
        f"tokens:  {tokens}",
    ]
    if s.get("stuck"):
        held = s["stuck"]
        lines.append(f"stuck:   its workflow task failed {held['attempts']} times: {held['error']}")
        lines.append(f"         {held['what_to_do']}")
    if s.get("last_step"):
        lines.append(f"last:    {s['last_step']}")
    if s.get("paused"):
        p = s["paused"]
        point = "model call" if p["where"] == "before_model" else "the tool calls of turn"
        lines.append(f"paused:  before {point} {p['turn']}: {p['why']} (inspect, edit, then resume)")
    if s.get("forked_from"):
        f = s["forked_from"]
        lines.append(f"fork of: {f['run_id']} before model call {f['turn']}")
    for f in s.get("forks", []):
        lines.append(f"forked:  {f['run_id']} from model call {f['turn']} at {f['started_at'][:19]}")
    if s.get("session"):
        c = s["session"]
        queued = f", {c['queued']} queued" if c["queued"] else ""
        lines.append(f"session: {c['state']} · {c['messages']} message(s), {c['answered']} answered{queued}")
        if c.get("last"):
            last = c["last"]
            lines.append(f"  you:   [{last['message']}] {last['by']}: {last['prompt']}")
            answer = last["output"] if last["output"] is not None else last["error"] or "(answering…)"
            lines.append(f"  agent: {answer[:300]}")
        if c.get("idle_deadline"):
            lines.append(f"  ends:  {c['idle_deadline'][:19]} unless a message comes")
    for p in s.get("pending_approvals", []):
        args = json.dumps(p["arguments"], ensure_ascii=False)
        lines.append(f"waiting: {p['call_id']}  {p['tool']}({args})  since {p['since'][:19]}")
        lines.append(f"         approve: python client.py approve {s['run_id']} {p['call_id']}")
    for d in s.get("decisions", []):
        verdict = "approved" if d["approved"] else "rejected"
        extra = f": {d['reason']}" if d["reason"] else ""
        edited = " with edited arguments" if d["arguments"] is not None else ""
        lines.append(f"decided: {d['call_id']}  {d['tool']} {verdict}{edited} by {d['by']} at {d['at'][:19]}{extra}")
    lines += _doubt_lines(s)
    for note in s.get("ignored_signals", []):
        lines.append(f"ignored: {note}")
    for r in s.get("retrying", []):
        lines.append(f"retrying: {r['activity']} attempt {r['attempt']}: {r['last_failure']}")
    for h in s.get("handoffs", []):
        lines.append(f"handoff: {h['from_agent']} → {h['to_agent']} in turn {h['turn']} at {h['at'][:19]}")
    if s.get("error"):
        lines.append(f"error:   {s['error']['type']}: {s['error']['message']}")
    if s.get("note"):
        lines.append(f"note:    {s['note']}")
    lines.append(f"ui:      {s['ui_url']}")
    return "\n".join(lines)


def _doubt_lines(s: dict[str, Any]) -> list[str]:
    """Each call in doubt (what, its arguments, when its attempt began, how it ended, the command
    that resolves it) and each resolution made (who, when, what)."""
    lines: list[str] = []
    for d in s.get("in_doubt", []):
        args = json.dumps(d["arguments"], ensure_ascii=False)
        began = f"started {d['started_at'][:19]}" if d.get("started_at") else f"asked for {d['scheduled_at'][:19]}"
        lines.append(f"in doubt: {d['call_id']}  {d['tool']}({args})")
        lines.append(f"         its attempt ({began}) ended without a result: {d['ended']} at {d['ended_at'][:19]}")
        command = f"python client.py resolve {s['run_id']} {d['call_id']}"
        lines.append(f"         resolve: {command} --rerun | --result JSON | --fail REASON")
    for r in s.get("resolutions", []):
        what = {"rerun": "run again", "result": f"result given: {r['result']}", "fail": f"failed: {r['reason']}"}
        lines.append(f"resolved: {r['call_id']}  {r['tool']} {what[r['action']][:200]} by {r['by']} at {r['at'][:19]}")
    return lines


async def cmd_status(client: Client, args: argparse.Namespace) -> int:
    status = await gather_status(client, *await existing(client, args.run_id))
    emit(args.json, status, render_status(status))
    return 0
