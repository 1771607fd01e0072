"""A run's page: its facts, the controls its state allows, its waiting calls, the live answer,
a session's message box, and its story (the conversation, handoffs, a waterfall per turn, its
child runs). The parts that change are rendered alone too, for the page's SSE stream."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from durable_agent_runner.client.errors import cli
from durable_agent_runner.client.scores import RunScores, score_line
from durable_agent_runner.console.data import Asking, RunView
from durable_agent_runner.console.views import CUT, call_row, folded, h, run_link, size, when
from durable_agent_runner.console.views_budget import budget_rows, raise_fields, session_raise
from durable_agent_runner.console.views_cases import case_form
from durable_agent_runner.machine.texts import cost_words, pause_point, turn_words
from durable_agent_runner.workflows import types as t

# Each part's share of views.MAX_PAGE_BYTES (1 MiB): with the layout (~12 KB) and the controls
# (~8 KB), they sum to less than it. A part over its share is cut (the newest messages, the last
# turns, the first children kept) and says what it left out.
FACTS_BYTES = 128 * 1024
RUN_CALLS = 8  # waiting calls on a run's page, each within views.ROW_BYTES (24 KB): 192 KB
CONVERSATION_BYTES = 448 * 1024
HANDOFFS = 50  # the last ones, ~0.5 KB each
TREE_BYTES = 96 * 1024
WATERFALL_TURNS = 200  # the last ones, ~0.4 KB each
LISTED = 20  # forks, children's shares


def visible(calls: list[Asking]) -> list[Asking]:
    """The waiting calls a run's page shows (the first RUN_CALLS; the inbox lists them all)."""
    return calls[:RUN_CALLS]


def run_body(view: RunView) -> str:
    s = view.status
    session = ""
    if s.get("session") is not None and s["status"] not in t.ENDED_STATUSES:
        session = f"""<h2>Session</h2><form class="act clear" method="post" action="{_base(s)}/send">
<label>Message <textarea name="text" maxlength="{t.MAX_MESSAGE_CHARS}" required></textarea></label>
<button>Send</button><span class="msg" role="status"></span></form>"""
    calls = "".join(call_row(w) for w in visible(view.waiting))
    note = "" if view.live else '<p class="refusal">No worker answers for this run: showing what Temporal holds.</p>'
    if len(view.waiting) > RUN_CALLS:
        note += f'<p class="meta">{len(view.waiting)} calls wait; {RUN_CALLS} are shown here, all in the inbox.</p>'
    return f"""{note}<div id="facts">{facts(view)}</div>
<div id="controls" class="controls">{controls(view)}</div>
<h2>Waiting for a person</h2><p class="empty" id="none"{" hidden" if calls else ""}>No call is waiting.</p>
<div class="calls" id="calls">{calls}</div>
<h2>Live</h2><pre id="live" aria-live="polite"></pre>{session}
<div id="story">{story(view)}</div>"""


def _base(s: dict[str, Any]) -> str:
    return f"/runs/{quote(s['run_id'], safe='')}"


def facts(view: RunView) -> str:
    """The run's facts, within FACTS_BYTES (each free text cut at CUT, lists at LISTED)."""
    shown = _facts(view)
    if size(shown) > FACTS_BYTES:
        command = f"{cli()} status {view.status['run_id'][:200]}"
        shown = f'<p class="meta">Its facts are too large to show here: see <code>{h(command)}</code>.</p>'
    return shown


def _facts(view: RunView) -> str:
    s = view.status
    usage = s["usage"]
    status = f'<span class="phase {h(s["status"])}" id="status">{h(s["status"])}</span>'
    if s.get("phase") and s["phase"] != s["status"]:  # as status says it: "paused", not "paused (paused)"
        status += f" ({h(s['phase'])})"
    rows = [
        ("status", status),
        ("agent", h(s.get("agent") or "?")),
        ("turn", h(turn_words(s["turn"], s.get("max_turns"), bool(s.get("session"))))),
        ("tokens", f"{usage['total_tokens']}" + (f" ({usage['requests']} model calls)" if "requests" in usage else "")),
        ("cost", h(cost_words(s.get("cost_usd") or 0, usage.get("unpriced") or 0))),
        ("started", when(s.get("started_at"))),
        ("history", f'<a href="{h(s["ui_url"])}">Temporal Web UI</a>'),
    ]
    rows += budget_rows(s.get("budget"), s["run_id"])
    last = (s.get("session") or {}).get("last") or {}
    if last.get("error") and s["session"]["state"] == "waiting":  # its answer failed; the session goes on
        failed = f"message {last['message']} failed: {h(last['error'][:CUT])}"
        rows.append(("last message", f'<span class="refusal">{failed}</span>'))
    if s.get("closed_at"):
        rows.append(("ended", when(s["closed_at"])))
    if view.parent:
        rows.append(("parent", run_link(view.parent)))
    if s.get("forked_from"):
        rows.append(("fork of", f"{run_link(s['forked_from']['run_id'])} before model call {s['forked_from']['turn']}"))
    forks = s.get("forks", [])
    for f in forks[:LISTED]:
        rows.append(("forked", f"{run_link(f['run_id'])} from model call {f['turn']}"))
    if len(forks) > LISTED:
        rows.append(("forked", f"and {len(forks) - LISTED} more"))
    if s.get("paused"):
        p = s["paused"]
        rows.append(("paused", h(f"{pause_point(p['where'], p['turn'])}: {p['why']}"[:CUT])))
    if e := s.get("error"):
        rows.append(("error", f'<span class="refusal">{h(e["type"][:200])}: {h(e["message"][:CUT])}</span>'))
    rows += [("stalled", h(w["message"][:CUT])) for w in s.get("unserved") or []]  # client/stuck.py
    if s.get("stuck"):
        rows.append(("stuck", h(f"{s['stuck']['error']} — {s['stuck']['what_to_do']}"[:CUT])))
    if s.get("scores"):  # online scoring (client/scores.py)
        rows.append(("scores", h(score_line(RunScores.model_validate(s["scores"]))[:CUT])))
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def controls(view: RunView) -> str:
    s = view.status
    base = _base(s)
    out = []
    running = s["status"] not in t.ENDED_STATUSES
    if running and not s.get("paused"):
        out.append(f"""<form class="act" method="post" action="{base}/pause"><label>Reason
<input name="reason" maxlength="1000"></label><button>Pause</button><span class="msg" role="status"></span></form>""")
    if running and not s.get("paused") and (s.get("session") or {}).get("state") == "waiting":
        out.append(session_raise(s, f"{base}/resume"))
    if running and s.get("paused"):
        out.append(f"""<form class="act" method="post" action="{base}/resume">{raise_fields(s)}<button>Resume</button>
<span class="msg" role="status"></span></form>""")
        ops = "".join(
            f'<option value="{o}">{o}</option>' for o in ("text", "drop", "insert", "args", "drop_call", "agent")
        )
        out.append(f"""<form class="act edit-run" method="post" action="{base}/edit"><b>Edit</b>
<label>Edit <select name="op">{ops}</select></label><label>Index <input name="index" size="4"></label>
<label>Role <select name="role"><option>user</option><option>assistant</option></select></label>
<label>Call id <input name="call_id" size="12"></label><label>Agent <input name="agent" size="10"></label>
<label>Text or JSON <textarea name="text" maxlength="{t.MAX_MESSAGE_CHARS}"></textarea></label>
<button>Apply edit</button><span class="msg" role="status"></span></form>""")
    if view.live:
        out.append(f"""<form class="act" method="post" action="{base}/fork"><label>Fork at turn
<input name="at_turn" size="4" value="{max(int(s["turn"]), 1)}" inputmode="numeric"></label>
<label>with message <input name="prompt" maxlength="4000"></label><button>Fork</button>
<span class="msg" role="status"></span></form>""")
        out.append(case_form(base, int(s["turn"])))
    return "".join(out)


def story(view: RunView) -> str:
    parts = ["<h2>Conversation</h2>", conversation(view)]
    handoffs = view.status.get("handoffs") or []
    if handoffs:
        items = "".join(
            f"<li>{h(x['from_agent'][:200])} → {h(x['to_agent'][:200])} in turn {x['turn']} at {when(x['at'])}</li>"
            for x in handoffs[-HANDOFFS:]
        )
        earlier = (
            f'<p class="meta">{len(handoffs) - HANDOFFS} earlier not shown.</p>' if len(handoffs) > HANDOFFS else ""
        )
        parts.append(f"<h2>Handoffs</h2>{earlier}<ul>{items}</ul>")
    switches = view.status.get("switches") or []
    if switches:
        items = "".join(
            f"<li>{h(x['from_model'][:200])} → {h(x['to_model'][:200])} in turn {x['turn']} at {when(x['at'])}:"
            f" {h(x['why'][:300])}</li>"
            for x in switches[-HANDOFFS:]
        )
        parts.append(f"<h2>Model fallbacks</h2><ul>{items}</ul>")
    if view.children:
        shown = tree(view.children)
        if size(shown) > TREE_BYTES:  # the runs it started, without theirs
            shown = tree([{**c, "children": []} for c in view.children])
        if size(shown) > TREE_BYTES:
            shown = f'<p class="meta">{len(view.children)} child runs: too many to list here.</p>'
        parts.append(f'<h2>Child runs</h2><div class="tree">{shown}</div>')
    parts.append(f"<h2>Turns</h2>{waterfall(view.events)}")
    return "".join(parts)


def conversation(view: RunView) -> str:
    """The messages, newest kept: each value cut at CUT with a link to the message whole, and as
    many as fit CONVERSATION_BYTES."""
    if not view.messages:
        return '<p class="empty">No messages to show yet.</p>'
    base = _base(view.status)
    shown: list[str] = []
    room = CONVERSATION_BYTES
    for index, m in reversed(view.messages):
        part = message(m, index, f"{base}/messages/{index}")
        room -= size(part)
        if room < 0:
            break
        shown.append(part)
    hidden = view.hidden + len(view.messages) - len(shown)
    out = [f'<p class="empty">{hidden} earlier message(s) not shown.</p>'] if hidden else []
    return "".join([*out, '<div class="conv">', *reversed(shown), "</div>"])


def message(m: t.Message, index: int, whole: str) -> str:
    idx = f'<a class="idx" href="{h(whole)}" title="this message whole, as text">#{index}</a>'
    if isinstance(m, t.UserMessage):
        note = f" (summary of {m.summary_of} messages)" if m.summary_of else ""
        return f'<div class="m user"><div class="who">user{note} {idx}</div>{folded(m.content, whole=whole)}</div>'
    if isinstance(m, t.AssistantMessage):
        calls = "".join(
            f'<div class="tc">→ <code>{h(c.name[:200])}</code> <small>{h(c.call_id[:200])}</small>'
            f"{folded(_args(c.arguments), 200, whole=whole)}</div>"
            for c in m.tool_calls
        )
        text = folded(m.content, whole=whole) if m.content else ""
        return f'<div class="m assistant"><div class="who">assistant {idx}</div>{text}{calls}</div>'
    decided = ""
    if m.approval is not None:
        a = m.approval
        verdict = "approved" if a.approved else f"rejected: {a.reason}"
        decided = f'<div class="meta">{h(verdict[:CUT])} by {h(a.by[:200])} at {when(a.at)}</div>'
    err = " error" if m.is_error else ""
    who = f"tool <code>{h(m.name[:200])}</code> {h(m.call_id[:200])} {idx}"
    return f'<div class="m tool{err}"><div class="who">{who}</div>{decided}{folded(m.content, whole=whole)}</div>'


def raw_message(m: t.Message) -> str:
    """A message whole, as text: what its own route serves (app.py)."""
    if isinstance(m, t.AssistantMessage):
        calls = "".join(f"\n\n→ {c.name} ({c.call_id})\n{_args(c.arguments)}" for c in m.tool_calls)
        return (m.content or "") + calls
    return m.content


def _args(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return raw


def tree(children: list[dict[str, Any]]) -> str:
    items = "".join(
        f"<li>{run_link(c['run_id'])} · {h(c['agent'] or '?')} · {h(c['phase'] or c['status'])} · "
        f"{c['total_tokens']} tokens{tree(c['children']) if c['children'] else ''}</li>"
        for c in children
    )
    return f"<ul>{items}</ul>"


Span = tuple[datetime, datetime]
WAITS = {  # a person decides
    "approval_requested": "approval_decided", "call_in_doubt": "call_resolved", "question_asked": "question_answered"
}  # fmt: skip


@dataclass
class Turn:
    """One turn's figures: each is wall-clock time, the union of its spans, so two calls waiting at
    once count once, and a call's time waiting for a person is not its tool time too (a call's
    tool_started comes before its approval is asked for)."""

    number: int
    start: datetime | None = None
    end: datetime | None = None
    model: float = 0.0
    tools: float = 0.0
    waiting: float = 0.0
    usage: t.Usage | None = None

    def span(self, at: datetime) -> None:
        self.start = at if self.start is None or at < self.start else self.start
        self.end = at if self.end is None or at > self.end else self.end


def _union(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(span: Span, holes: list[Span]) -> list[Span]:
    """`span` without the parts `holes` (a union, in order) cover."""
    out, (a, b) = [], span
    for x, y in holes:
        if y <= a or x >= b:
            continue
        if x > a:
            out.append((a, x))
        a = max(a, y)
    if a < b:
        out.append((a, b))
    return out


def _seconds(spans: list[Span]) -> float:
    return sum((b - a).total_seconds() for a, b in _union(spans))


def turns(events: list[t.AnyRunEvent]) -> list[Turn]:
    """Per turn: model time, tool time and time waiting for a person, from the run's events."""
    by: dict[int, Turn] = {}
    opened: dict[tuple[int, str, str], datetime] = {}  # (turn, what, call id) → when it began
    model: dict[int, list[Span]] = {}
    tool: dict[int, dict[str, list[Span]]] = {}
    wait: dict[int, dict[str, list[Span]]] = {}
    closes = {"model_finished": "model_started", "tool_finished": "tool_started"}
    closes.update({end: begin for begin, end in WAITS.items()})
    for ev in events:
        if ev.turn < 1:
            continue
        turn = by.setdefault(ev.turn, Turn(ev.turn))
        turn.span(ev.at)
        call = ev.call_id or ""  # a call's events always name it (t.CallEvent); a model's, none
        if ev.kind in (t.EventKind.MODEL_STARTED, t.EventKind.TOOL_STARTED, *WAITS):
            opened[(ev.turn, ev.kind, call)] = ev.at
        elif ev.kind in closes:
            began = opened.pop((ev.turn, closes[ev.kind], call), None)
            if began is None or ev.at < began:
                continue
            if ev.kind == t.EventKind.MODEL_FINISHED:
                model.setdefault(ev.turn, []).append((began, ev.at))
                turn.usage = ev.usage
            elif ev.kind == t.EventKind.TOOL_FINISHED:
                tool.setdefault(ev.turn, {}).setdefault(call, []).append((began, ev.at))
            else:
                wait.setdefault(ev.turn, {}).setdefault(call, []).append((began, ev.at))
    for n, turn in by.items():
        waits = wait.get(n, {})
        turn.model = _seconds(model.get(n, []))
        turn.waiting = _seconds([s for spans in waits.values() for s in spans])
        running = [
            part
            for call, spans in tool.get(n, {}).items()
            for s in spans
            for part in _minus(s, _union(waits.get(call, [])))
        ]
        turn.tools = _seconds(running)
    return [by[n] for n in sorted(by)]


def waterfall(events: list[t.AnyRunEvent]) -> str:
    rows = turns(events)
    if not rows:
        return '<p class="empty">No turn yet.</p>'
    earlier = (
        f'<p class="meta">{len(rows) - WATERFALL_TURNS} earlier turns not shown.</p>'
        if len(rows) > WATERFALL_TURNS
        else ""
    )
    rows = rows[-WATERFALL_TURNS:]
    longest = max((r.model + r.tools + r.waiting) for r in rows) or 1.0
    out = [
        earlier,
        '<div class="wf"><div class="legend">',
        '<span class="model"></span>model',
        '<span class="tool"></span>tools',
    ]
    out.append('<span class="wait"></span>waiting for a person</div>')
    for r in rows:
        u = r.usage
        spend = f" · {u.total_tokens} tokens · ${u.cost_usd:.4f}" if u else ""
        label = f"turn {r.number}: model {r.model:.2f} s · tools {r.tools:.2f} s · waiting {r.waiting:.2f} s{spend}"
        bars = "".join(
            f'<div class="{kind}" style="width:{100 * secs / longest:.2f}%" title="{kind} {secs:.2f} s"></div>'
            for kind, secs in (("model", r.model), ("tool", r.tools), ("wait", r.waiting))
            if secs > 0
        )
        out.append(f'<div data-turn="{r.number}">{h(label)}<div class="bar">{bars}</div></div>')
    out.append("</div>")
    return "".join(out)
