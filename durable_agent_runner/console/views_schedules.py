"""The console's schedules page: each schedule with its agent (or session), when it runs, its
last run (a link to the run) and its next, and its Pause / Unpause and Trigger buttons (actions
posted with the CSRF token, as every action of the console)."""

from __future__ import annotations

from urllib.parse import quote

from durable_agent_runner.client.schedules import ScheduleRow
from durable_agent_runner.console.views import h, run_link, when

MAX_ROWS = 200  # schedules a page shows: a bound on its size whatever the namespace holds


def schedules_body(rows: list[ScheduleRow]) -> str:
    if not rows:
        return (
            '<p class="empty">No schedules yet. Create one with <code>client.py schedule create NAME --agent A '
            "--input TEXT --every 1h</code>.</p>"
        )
    head = "<tr><th>Schedule</th><th>Starts</th><th>When</th><th>State</th><th>Last run</th><th>Next run</th>"
    head += "<th></th><th></th></tr>"
    more = (
        f'<p class="meta">{len(rows):,} schedules; the first {MAX_ROWS} by name are shown.</p>'
        if len(rows) > MAX_ROWS
        else ""
    )
    return f'<table class="runs schedules">{head}{"".join(_row(r) for r in rows[:MAX_ROWS])}</table>{more}'


def _row(r: ScheduleRow) -> str:
    action = f"/schedules/{quote(r.name, safe='')}"
    target = f"session {run_link(r.session)}" if r.session else f"agent {h(r.agent)}"
    state = '<span class="phase paused">paused</span>' if r.paused else '<span class="phase completed">active</span>'
    if r.note:
        state += f' <small class="meta">{h(r.note[:200])}</small>'
    last = f"{run_link(r.last_run.run_id)} <small>{when(r.last_run.started_at)}</small>" if r.last_run else "—"
    nxt = when(r.next_runs[0]) if r.next_runs and not r.paused else "—"
    toggle = "unpause" if r.paused else "pause"
    return (
        f'<tr data-schedule="{h(r.name)}"><td>{h(r.name)} <a class="runs-of" href="/?schedule={quote(r.name)}" '
        f'title="the runs it started">runs</a> <a class="wf" href="{h(r.ui_url)}" '
        'title="this schedule in the Temporal Web UI">Web UI</a></td>'
        f"<td>{target}</td><td>{h(r.when)}</td><td>{state}</td><td>{last}</td><td>{nxt}</td>"
        f'<td><form class="act" method="post" action="{action}/{toggle}">'
        f'<button class="{toggle}">{toggle.title()}</button><span class="msg" role="status"></span></form></td>'
        f'<td><form class="act" method="post" action="{action}/trigger"><button class="approve">Trigger</button>'
        '<span class="msg" role="status"></span></form></td></tr>'
    )
