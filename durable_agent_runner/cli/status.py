"""`client.py status`: what a run is doing, as the Python client's `RunHandle.status()` gathers it
(durable_agent_runner/client/status.py), rendered as text."""

from __future__ import annotations

import argparse
import json
from typing import Any

from durable_agent_runner.cli.budget import raise_hint, render_budget
from durable_agent_runner.cli.common import emit
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import cli
from durable_agent_runner.client.scores import RunScores, score_line
from durable_agent_runner.machine.texts import cost_words, pause_point, turn_words


def render_status(s: dict[str, Any]) -> str:
    usage = s["usage"]
    tokens = f"{usage['total_tokens']} total"
    if "input_tokens" in usage:
        tokens = (
            f"{usage['input_tokens']} in ({usage['cached_tokens']} cached) · "
            f"{usage['output_tokens']} out · {usage['requests']} model calls"
        )
    turn = turn_words(s["turn"], s.get("max_turns"), bool(s.get("session")))
    if usage.get("unpriced") or s.get("cost_usd"):
        tokens += f" · {cost_words(s.get('cost_usd') or 0, usage.get('unpriced') or 0)}"
    lines = [
        f"run:     {s['run_id']}",
        f"agent:   {s['agent'] or '?'}" + (f" · model {s['model']}" if s.get("model") else ""),
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
    for wait in s.get("unserved", []):
        lines.append(f"stalled: {wait['message']}")
    if s.get("budget"):
        lines += render_budget(s["budget"], s["run_id"])
    if s.get("paused"):
        p = s["paused"]
        lines.append(f"paused:  {pause_point(p['where'], p['turn'])}: {p['why']} (inspect, edit, then resume)")
    if s.get("scores"):
        lines.append(f"scores:  {score_line(RunScores.model_validate(s['scores']))}")
    if s.get("schedule"):
        lines.append(f"schedule: started by schedule {s['schedule']} ({cli()} schedule describe {s['schedule']})")
    if s.get("forked_from"):
        f = s["forked_from"]
        live = " (its earlier tool calls and child runs ran again: --live-tools)" if f.get("live_tools") else ""
        lines.append(f"fork of: {f['run_id']} before model call {f['turn']}{live}")
    for f in s.get("forks", []):
        lines.append(f"forked:  {f['run_id']} from model call {f['turn']} at {f['started_at'][:19]}")
    if s.get("parent"):
        lines.append(f"parent:  {s['parent']} (it started this run: an agent used as a tool)")
    for c in s.get("children", []):
        lines.append(f"child:   {c['run_id']}  {c['agent'] or '?'} · {c['status']} · {c['total_tokens'] or 0} tokens")
    if s.get("session"):
        c = s["session"]
        queued = f", {c['queued']} queued" if c["queued"] else ""
        lines.append(f"session: {c['state']} · {c['messages']} message(s), {c['answered']} answered{queued}")
        if c.get("last"):
            last = c["last"]
            lines.append(f"  you:   [{last['message']}] {last['by']}: {last['prompt']}")
            if last["output"] is None and last.get("error"):  # its answer failed; the session goes on
                lines.append(f"  ✗ not answered: {last['error'][:300]}")
                hint = raise_hint(last["error"].partition(":")[0], s["run_id"]) if c["state"] == "waiting" else None
                lines += [f"         {hint}"] if hint else []
            else:
                lines.append(f"  agent: {(last['output'] if last['output'] is not None else '(answering…)')[:300]}")
        if c.get("idle_deadline"):
            lines.append(f"  ends:  {c['idle_deadline'][:19]} unless a message comes")
    for p in s.get("pending_approvals", []):
        args = json.dumps(p["arguments"], ensure_ascii=False)
        lines.append(f"waiting: {p['call_id']}  {p['tool']}({args})  since {p['since'][:19]}")
        lines.append(f"         approve: {cli()} approve {s['run_id']} {p['call_id']}")
    for d in s.get("decisions", []):
        verdict = "approved" if d["approved"] else "rejected"
        extra = f": {d['reason']}" if d["reason"] else ""
        edited = " with edited arguments" if d["arguments"] is not None else ""
        lines.append(f"decided: {d['call_id']}  {d['tool']} {verdict}{edited} by {d['by']} at {d['at'][:19]}{extra}")
    lines += _doubt_lines(s)
    for q in s.get("questions", []):
        lines.append(f"question: {q['call_id']}  {q['question'][:300]}  since {q['since'][:19]}")
        lines += [f"         {n}. {c}" for n, c in enumerate(q.get("choices") or [], 1)]
        how = "--choice N" if q.get("choices") else "TEXT"
        lines.append(f"         answer: {cli()} answer {s['run_id']} {q['call_id']} {how}")
    for a in s.get("answers", []):
        choice = f"choice {a['choice']}: " if a.get("choice") is not None else ""
        lines.append(f"answered: {a['call_id']}  {choice}{a['answer'][:200]} by {a['by']} at {a['at'][:19]}")
    for o in s.get("outside", []):
        started = f"  started: {o['started'][:200]}" if o.get("started") else ""
        until = o["deadline"][:19]
        lines.append(f"outside: {o['call_id']}  {o['tool']} waits for an outside completion until {until}{started}")
        how = "--result JSON | --fail REASON"
        lines.append(f"         complete: {cli()} complete {s['run_id']} {o['call_id']} {how}")
    for c in s.get("completions", []):
        what = f"failed: {c['fail'][:200]}" if c.get("fail") is not None else f"result {c['result'][:200]}"
        lines.append(f"completed: {c['call_id']}  {c['tool']} {what} by {c['by']} at {c['at'][:19]}")
    for note in s.get("ignored_signals", []):
        lines.append(f"ignored: {note}")
    for r in s.get("retrying", []):
        lines.append(f"retrying: {r['activity']} attempt {r['attempt']}: {r['last_failure']}")
    for x in s.get("switches", []):
        lines.append(f"fallback: {x['from_model']} → {x['to_model']} in turn {x['turn']} at {x['at'][:19]}: {x['why']}")
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
        if d.get("fork_of"):  # a --live-tools fork's once call, asked about before it runs again
            lines.append(f"         {d['ended']}")
        else:
            lines.append(f"         its attempt ({began}) ended without a result: {d['ended']} at {d['ended_at'][:19]}")
        command = f"{cli()} resolve {s['run_id']} {d['call_id']}"
        lines.append(f"         resolve: {command} --rerun | --result JSON | --fail REASON")
    for r in s.get("resolutions", []):
        what = {"rerun": "run again", "result": f"result given: {r['result']}", "fail": f"failed: {r['reason']}"}
        lines.append(f"resolved: {r['call_id']}  {r['tool']} {what[r['action']][:200]} by {r['by']} at {r['at'][:19]}")
    return lines


async def cmd_status(client: AgentClient, args: argparse.Namespace) -> int:
    status = (await client.get(args.run_id).status()).as_dict()
    emit(args.json, status, render_status(status))
    return 0
