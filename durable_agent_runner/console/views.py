"""The console's pages, rendered on the server as HTML (no template engine, no Node build): the
layout, the runs list and the inbox, with the controls of a waiting call that the run's page
shares. Every value from a run passes through `h` (escaped) on its way into a page.

Every page has a byte bound, MAX_PAGE_BYTES, whatever the runs hold: a long value is folded and
cut at CUT characters, with a link to the whole value served by its own route (a message, a
call's arguments), and each part of a page has its share of the bound (its caps below)."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from durable_agent_runner.client.errors import cli
from durable_agent_runner.console.assets import CSS, JS
from durable_agent_runner.console.data import PHASES, Asking, Doubt, Question, Waiting
from durable_agent_runner.console.eval_pauses import EvalPause, spent_line
from durable_agent_runner.console.links import call_anchor, eval_href
from durable_agent_runner.console.waits import Outside

FOLD = 300  # characters shown before a long text folds
LONG_TEXT = 60  # characters past which an edited text is a textarea, not one line
MAX_PAGE_BYTES = 1024 * 1024  # every page, whatever its runs hold (tests/test_console_bounds.py)
CUT = 2_000  # characters of one value a page shows; the whole is a link away
EDIT_MAX = 2_000  # characters of an argument an edit form holds; a longer one is kept as it is
ROW_BYTES = 24 * 1024  # one waiting call with its controls (else without its edit form)
INBOX_CALLS = 40  # calls the inbox shows, oldest first: 40 rows fit the page's bound


def too_long_hint(w: Waiting) -> str:
    command = cli(f"approve {w.run_id} {w.call.call_id} --args JSON")
    return f"to approve it with other arguments, use <code>{h(command)}</code>"


# An edited argument's form field is named `KIND.NAME`: how the console reads it back (see app.py).
PREFIX = {"integer": "int", "number": "num", "string": "str", "boolean": "bool"}


def h(value: object) -> str:
    return html.escape(str(value), quote=True)


def run_link(run_id: str) -> str:
    return f'<a href="/runs/{quote(run_id, safe="")}">{h(run_id)}</a>'


def when(value: datetime | str | None) -> str:
    if value is None:
        return ""
    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return stamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def size(page: str) -> int:
    return len(page.encode("utf-8"))


def cut_note(text: str, whole: str | None) -> str:
    """After a value cut at CUT characters: how much is not shown, and where the whole is."""
    rest = len(text) - CUT
    if rest <= 0:
        return ""
    link = f': <a class="whole" href="{h(whole)}">the whole value</a>' if whole else ""
    return f'<p class="cut">… {rest:,} more characters not shown here{link}</p>'


def folded(text: str, limit: int = FOLD, whole: str | None = None) -> str:
    """Text, folded into a <details> past `limit` characters and cut at CUT, with a link to the
    whole value (`whole`: its own route) past that."""
    if len(text) <= limit:
        return f'<pre class="text">{h(text)}</pre>'
    head = f'<summary><pre class="text">{h(text[:limit])}…</pre></summary>'
    return f'<details>{head}<pre class="text">{h(text[:CUT])}</pre></details>{cut_note(text, whole)}'


def shown_args(arguments: Any, whole: str) -> str:
    """A call's arguments, formatted and cut at CUT, with a link to them whole."""
    text = pretty(arguments)
    return f'<pre class="args">{h(text[:CUT])}</pre>{cut_note(text, whole)}'


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def page(title: str, body: str, csrf: str, by: str, stream: str = "") -> str:
    data = f' data-stream="{h(stream)}"' if stream else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{h(title)} · agent console</title>
<meta name="csrf" content="{h(csrf)}"><meta name="viewport" content="width=device-width">
<style>{CSS}</style></head>
<body{data}><header><nav><a href="/">Runs</a> <a href="/inbox">Inbox</a> <a href="/schedules">Schedules</a>
<a href="/evals">Evals</a></nav>
<label class="by">Deciding as <input id="by" name="by" value="{h(by)}" maxlength="200"></label></header>
<main><h1>{h(title)}</h1><p id="flash" class="msg" role="status" hidden></p>
{body}</main><script>{JS}</script></body></html>"""


def message_page(title: str, message: str, csrf: str, by: str, back: str = "/") -> str:
    return page(title, f'<p class="refusal">{h(message[:CUT])}</p><p><a href="{h(back)}">back</a></p>', csrf, by)


# ------------------------------------------------------------------------------------ runs


def runs_body(rows: list[dict[str, Any]], filters: dict[str, str], next_token: str) -> str:
    phase = filters.get("phase", "")
    options = "".join(f'<option value="{p}"{" selected" if p == phase else ""}>{p}</option>' for p in ("", *PHASES))
    waiting = " checked" if filters.get("waiting") else ""
    form = f"""<form class="filters" method="get" action="/">
<label>Phase <select name="phase">{options}</select></label>
<label>Agent <input name="agent" value="{h(filters.get("agent", ""))}" maxlength="200"></label>
<label>Schedule <input name="schedule" value="{h(filters.get("schedule", ""))}" maxlength="100"></label>
<label><input type="checkbox" name="waiting" value="1"{waiting}> Waiting for me</label>
<button>Filter</button></form>"""
    if not rows:
        return form + '<p class="empty">No runs match.</p>'
    head = "<tr><th>Run</th><th>Agent</th><th>Phase</th><th>Turn</th><th>Tokens</th><th>Cost</th>"
    head += "<th>Started</th><th>Waiting</th><th></th></tr>"
    body = "".join(_run_row(r) for r in rows)
    more = ""
    if next_token:
        query = urlencode({**{k: v for k, v in filters.items() if v}, "page": next_token})
        more = f'<p><a class="next" href="/?{h(query)}">Older runs →</a></p>'
    return f'{form}<table class="runs">{head}{body}</table>{more}'


def _run_row(r: dict[str, Any]) -> str:
    names = r.get("waiting", [])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    waiting = ", ".join(names[:5]) + more or (f"{r['pending_approvals']} call(s)" if r["pending_approvals"] else "")
    if waiting and r["status"] == "running":
        waiting = f'<a href="/inbox">{h(waiting)}</a>'
    phase = r["phase"] or r["status"]
    return (
        f'<tr data-run="{h(r["run_id"])}"><td>{run_link(r["run_id"])}</td><td>{h(r["agent"] or "")}</td>'
        f'<td><span class="phase {h(phase)}">{h(phase)}</span></td><td>{r["turn"]}</td><td>{r["total_tokens"]}</td>'
        f"<td>${r['cost_usd']:.4f}</td><td>{when(r['started_at'])}</td>"
        f"<td>{waiting if r['status'] == 'running' else ''}</td>"
        f'<td><a href="{h(r["ui_url"])}" title="its history in the Temporal Web UI">Web UI</a></td></tr>'
    )


# ----------------------------------------------------------------------------------- inbox


def inbox_body(calls: list[Asking]) -> str:
    rows = "".join(call_row(w, with_run=True) for w in calls[:INBOX_CALLS])
    empty = '<p class="empty" id="none"' + (" hidden" if calls else "") + ">Nothing is waiting for a person.</p>"
    more = ""
    if len(calls) > INBOX_CALLS:
        more = (
            f'<p class="meta">{len(calls):,} calls wait; the {INBOX_CALLS} oldest are shown, and the next '
            "join as these are decided.</p>"
        )
    return f'{empty}{more}<div class="calls" id="calls">{rows}</div>'


def call_row(w: Asking, with_run: bool = False) -> str:
    """A waiting call's row, within ROW_BYTES: one too large with its edit form is shown without it."""
    row = _call_row(w, with_run)
    if size(row) > ROW_BYTES and isinstance(w, Waiting):
        row = _call_row(w, with_run, editable=False)
    return row


def _call_row(w: Asking, with_run: bool = False, editable: bool = True) -> str:
    """One waiting call with its controls: Approve, Reject with a Reason, Edit arguments; or a
    call in doubt with its own (doubt_row)."""
    if isinstance(w, Doubt):
        return doubt_row(w, with_run)
    if isinstance(w, Question):
        return question_row(w, with_run)
    if isinstance(w, Outside):
        return outside_row(w, with_run)
    if isinstance(w, EvalPause):
        return eval_pause_row(w)
    run = quote(w.run_id, safe="")
    call = quote(w.call.call_id, safe="")
    action = f"/runs/{run}/calls/{call}"
    timeout = "waits as long as it takes"
    if w.deadline is not None:
        timeout = f"times out at {when(w.deadline)} ({w.outcome}s after {w.timeout:g} s)"
    where = f"run {run_link(w.run_id)} · agent {h(w.agent)} · " if with_run else ""
    edit = f'<details class="edit"><summary>Edit arguments</summary>{edit_form(w, action)}</details>'
    if not editable:
        edit = f'<p class="meta">Too large to edit here: {too_long_hint(w)}</p>'
    anchor = h(call_anchor(w.run_id, w.call.call_id))  # where a notification's link lands
    return f"""<section class="call" id="{anchor}" data-call="{h(w.key)}">
<h3><code>{h(w.call.tool)}</code> <small>{h(w.call.call_id)} · turn {w.call.turn}</small></h3>
<p class="meta">{where}waiting since {when(w.call.since)} · {h(timeout)}</p>
{shown_args(w.call.arguments, f"{action}/arguments")}
<form class="act decide" method="post" action="{action}/decide">
<label>Reason <input name="reason" maxlength="4000" placeholder="told to the model when you reject"></label>
<button name="verdict" value="approve" class="approve">Approve</button>
<button name="verdict" value="reject" class="reject">Reject</button>
<span class="msg" role="status"></span></form>
{edit}
</section>"""


def doubt_row(d: Doubt, with_run: bool = False) -> str:
    """A call in doubt: it may or may not have run. Rerun it, give the Result it returned (JSON,
    checked as `client.py resolve --result` checks it), or Fail it with a reason."""
    c = d.call
    call = f"/runs/{quote(d.run_id, safe='')}/calls/{quote(c.call_id, safe='')}"
    action = f"{call}/resolve"
    where = f"run {run_link(d.run_id)} · agent {h(d.agent)} · " if with_run else ""
    started = f"attempt started {when(c.started_at)}" if c.started_at else f"attempt asked for {when(c.scheduled_at)}"
    again = f" (in doubt again: time {c.doubt})" if c.doubt > 1 else ""
    anchor = h(call_anchor(d.run_id, c.call_id))  # where a notification's link lands
    return f"""<section class="call doubt" id="{anchor}" data-call="{h(d.key)}">
<h3><code>{h(c.tool)}</code> <small>{h(c.call_id)} · turn {c.turn}</small>
<span class="phase in_doubt">in doubt</span></h3>
<p class="meta">{where}{started} · ended without a result at {when(c.ended_at)}: {h(c.ended)}{again}</p>
<p class="meta">It may or may not have happened: check, then decide.</p>
{shown_args(c.arguments, f"{call}/arguments")}
<form class="act resolve" method="post" action="{action}"><input type="hidden" name="doubt" value="{c.doubt}">
<button name="choice" value="rerun">Rerun</button>
<label>Result (JSON) <textarea name="result" rows="2"
 placeholder='what it returned, e.g. {{"id": 42}}'></textarea></label>
<button name="choice" value="result" class="approve">Result</button>
<label>Reason <input name="reason" maxlength="4000" placeholder="told to the model when you fail it"></label>
<button name="choice" value="fail" class="reject">Fail</button>
<span class="msg" role="status"></span></form>
</section>"""


def question_row(q: Question, with_run: bool = False) -> str:
    """An `ask_person` question: a button per choice, or a text box for a free answer."""
    c = q.call
    action = f"/runs/{quote(q.run_id, safe='')}/calls/{quote(c.call_id, safe='')}/answer"
    where = f"run {run_link(q.run_id)} · agent {h(q.agent)} · " if with_run else ""
    timeout = f" · the default applies at {when(c.deadline)}" if c.deadline is not None else ""
    if c.choices:
        pick = "".join(
            f'<button name="choice" value="{n}" class="approve">{n}. {h(text)}</button> '
            for n, text in enumerate(c.choices, 1)
        )
    else:
        pick = (
            '<label>Answer <textarea name="text" rows="2" maxlength="4000" required></textarea></label>'
            '<button class="approve">Answer</button>'
        )
    anchor = h(call_anchor(q.run_id, c.call_id))  # where a notification's link lands
    return f"""<section class="call question" id="{anchor}" data-call="{h(q.key)}">
<h3><code>ask_person</code> <small>{h(c.call_id)} · turn {c.turn}</small></h3>
<p class="meta">{where}asked {when(c.since)}{timeout}</p>
<p>{folded(c.question)}</p>
<form class="act answer" method="post" action="{action}">{pick}<span class="msg" role="status"></span></form>
</section>"""


def outside_row(o: Outside, with_run: bool = False) -> str:
    """A call waiting for an outside system's completion: what its start returned, until when it
    waits, and the command that completes it (a system's job, so no form)."""
    c = o.call
    where = f"run {run_link(o.run_id)} · agent {h(o.agent)} · " if with_run else ""
    then = "the model is told" if c.on_timeout == "tell_model" else "a person decides (in doubt)"
    started = f"<p>Its start returned: <code>{h(c.started[:500])}</code></p>" if c.started else ""
    command = f"{cli()} complete {o.run_id} {c.call_id} --result JSON | --fail REASON"
    return f"""<section class="call outside" id="{h(call_anchor(o.run_id, c.call_id))}" data-call="{h(o.key)}">
<h3><code>{h(c.tool)}</code> <small>{h(c.call_id)} · turn {c.turn}</small>
<span class="phase running_tools">waiting for outside completion</span></h3>
<p class="meta">{where}since {when(c.since)} · until {when(c.deadline)}, then {then}</p>
{started}<p class="meta">Complete: <code>{h(command)}</code>, or its signed completion URL</p>
</section>"""


def eval_pause_row(p: EvalPause) -> str:
    """An eval paused on its budget: what it spent against its limit, and a link to its page, where
    a person raises it (views_evals.raise_form)."""
    href, s = h(eval_href(p.eval_id)), p.status
    if s is None:  # no worker answered in time: what its search attributes say
        spent = f"{p.row.tokens:,} tokens · ${p.row.usd:.4f} spent (its limit: no worker answered in time)"
        about = f"agent {h(p.row.agent)}"
    else:
        spent = spent_line(s.budget)
        about = f"{h(s.dataset)} on agent {h(s.agent)} · {s.done}/{s.total} cases done · {h(s.why)}"
    return f"""<section class="call eval-pause" data-call="{h(p.key)}">
<h3>Eval <a href="{href}">{h(p.eval_id)}</a> <span class="phase paused">paused on its budget</span></h3>
<p class="meta">{about} · started {when(p.since)}</p>
<p class="spent">{h(spent)}</p>
<p><a href="{href}">Raise its budget on its page</a>, or
<code>{cli()} eval resume {h(p.eval_id)} --add-tokens N | --add-usd X</code></p>
</section>"""


def edit_form(w: Waiting, action: str) -> str:
    """A form built from the tool's JSON schema: a field per property, typed; others as JSON. A
    required property's field is `required` (the console checks it too: forms.checked_edit); a long
    or multi-line text is a textarea."""
    props = w.schema.get("properties") if isinstance(w.schema.get("properties"), dict) else None
    required = set(w.schema.get("required") or []) if isinstance(w.schema.get("required"), list) else set()
    fields = []
    if props:
        for name, spec in props.items():
            kind = spec.get("type") if isinstance(spec, dict) else None
            value = w.call.arguments.get(name)
            need = " required" if name in required else ""
            label = f"{h(name)}{' *' if need else ''}"
            desc = spec.get("description", "") if isinstance(spec, dict) else ""
            title = f' title="{h(desc)}"' if desc else ""
            field = f"{PREFIX.get(str(kind), 'json')}.{h(name)}"
            shown = "" if value is None else str(value) if kind in PREFIX else pretty(value)
            if len(shown) > EDIT_MAX:  # kept as it is (forms.checked_edit reads keep.NAME)
                fields.append(
                    f'<p class="meta">{label}: too long to edit here ({len(shown):,} characters), kept as it is '
                    f'(<a href="{action}/arguments">see it whole</a>)<input type="hidden" name="keep.{h(name)}" '
                    'value="1"></p>'
                )
            elif kind == "boolean":
                opts = "".join(
                    f'<option value="{v}"{" selected" if str(value).lower() == v else ""}>{v}</option>'
                    for v in ("", "true", "false")
                )
                fields.append(f'<label{title}>{label} <select name="{field}"{need}>{opts}</select></label>')
            elif kind in ("integer", "number"):
                mode = "numeric" if kind == "integer" else "decimal"
                shown = "" if value is None else value
                fields.append(
                    f'<label{title}>{label} <input name="{field}" value="{h(shown)}" inputmode="{mode}"{need}></label>'
                )
            elif kind == "string":
                text = "" if value is None else str(value)
                if "\n" in text or len(text) > LONG_TEXT:
                    rows = min(max(text.count("\n") + 1, len(text) // 80 + 1, 3), 12)
                    box = f'<textarea name="{field}" rows="{rows}"{need}>{h(text)}</textarea>'
                else:
                    box = f'<input name="{field}" value="{h(text)}"{need}>'
                fields.append(f"<label{title}>{label} {box}</label>")
            else:
                shown = "" if value is None else pretty(value)
                fields.append(
                    f'<label{title}>{label} (JSON) <textarea name="json.{h(name)}"{need}>{h(shown)}</textarea></label>'
                )
    else:
        text = pretty(w.call.arguments)
        if len(text) > EDIT_MAX:
            return f'<p class="meta">Too long to edit here ({len(text):,} characters): {too_long_hint(w)}</p>'
        box = f'<textarea name="arguments" required>{h(text)}</textarea>'
        fields.append(f"<label>arguments (JSON) {box}</label>")
    return (
        f'<form class="act edit-args" method="post" action="{action}/edit">{"".join(fields)}'
        '<button class="approve">Approve with these arguments</button><span class="msg" role="status"></span></form>'
    )
