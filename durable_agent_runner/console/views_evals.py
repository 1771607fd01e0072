"""The console's eval pages: `/evals` lists the latest evals; `/evals/{id}` shows one eval's
progress and its table, live while it runs (its `#eval` section re-rendered by server-sent
events), with each case's link to its run's story and the diff against its baseline."""

from __future__ import annotations

from durable_agent_runner.client.evals import EvalRow, progress_line
from durable_agent_runner.console.eval_pauses import spent_line
from durable_agent_runner.console.links import eval_href
from durable_agent_runner.console.views import h, run_link
from durable_agent_runner.evals.report import Diff, Report
from durable_agent_runner.machine.texts import cost_words
from durable_agent_runner.workflows.types import evals as te

MAX_ROWS = 100  # evals the list shows
MAX_CASE_ROWS = 2_000  # every case run of the largest eval


def evals_body(rows: list[EvalRow]) -> str:
    if not rows:
        return '<p class="empty">No evals yet. Run one with <code>client.py eval run DATASET --agent NAME</code>.</p>'
    head = "<tr><th>Eval</th><th>Status</th><th>Agent</th><th>Tokens</th><th>Cost</th><th>Started</th></tr>"
    body = "".join(
        f'<tr data-eval="{h(r.eval_id)}"><td><a href="{h(eval_href(r.eval_id))}">{h(r.eval_id)}</a></td>'
        f'<td><span class="phase {h(r.status)}">{h(r.status)}</span></td><td>{h(r.agent)}</td>'
        f"<td>{r.tokens:,}</td><td>${r.usd:.4f}</td><td>{h(r.started_at[:19].replace('T', ' '))}</td></tr>"
        for r in rows[:MAX_ROWS]
    )
    return f'<table class="runs evals">{head}{body}</table>'


def eval_body(status: te.EvalStatus, report: Report, diff: Diff | None) -> str:
    raising = f'<div id="raise" class="controls">{raise_form(status)}</div>'
    return f'{raising}<div id="eval">{eval_section(status, report, diff)}</div>'


def raise_form(status: te.EvalStatus) -> str:
    """An eval paused on its budget: what it spent against its limit, and the raise's fields for
    the kinds of budget it has (`client.py eval resume EVAL --add-tokens N | --add-usd X`)."""
    budget = status.budget
    if status.phase != "paused" or budget is None:
        return ""
    tokens = '<label>Add tokens <input name="add_tokens" size="10" inputmode="numeric"></label>'
    usd = '<label>Add USD <input name="add_usd" size="8" inputmode="decimal"></label>'
    fields = (tokens if budget.tokens else "") + (usd if budget.usd else "")
    return (
        f'<form class="act raise" method="post" action="{h(eval_href(status.eval_id))}/resume">'
        f'<b>Paused on its budget: raise it to go on</b> <span class="meta">{h(spent_line(budget))}</span> '
        f'{fields}<button class="approve">Raise and resume</button><span class="msg" role="status"></span></form>'
    )


def _cell(value: bool | float | str | None) -> str:
    if value is None:
        return '<span class="phase failed">error</span>'
    if isinstance(value, bool):
        return "✔" if value else "✘"
    return h(f"{value:.3g}" if isinstance(value, float) else str(value)[:40])


def eval_section(status: te.EvalStatus, report: Report, diff: Diff | None) -> str:
    """The live part of an eval's page: progress, what it waits for that no worker takes
    (`stalled`, as `eval status` says it), evaluators, the case table, the baseline's diff."""
    done = 100 * status.done // max(status.total, 1)
    parts = [
        f'<p class="meta">{h(status.dataset)} on agent {h(status.agent)}'
        + (f" ({h(status.agent_version)})" if status.agent_version else "")
        + f' · <span class="phase {h(status.phase)}">{h(status.phase)}</span></p>',
        f'<progress max="100" value="{done}"></progress> <span id="progress">{h(progress_line(status))}</span>',
        *(f'<p class="refusal stalled">stalled: {h(wait["message"])}</p>' for wait in status.unserved),
        f'<p class="meta">pass rate {report.pass_rate:.1%} · p50 {report.p50_seconds:.2f}s · '
        f"p95 {report.p95_seconds:.2f}s · {h(cost_words(report.usd, report.unpriced))}</p>",
    ]
    if report.evaluators:
        rows = "".join(
            f"<tr><td>{h(e.name)}</td><td>{'-' if e.mean is None else f'{e.mean:.3f}'}</td>"
            f"<td>{'-' if e.pass_rate is None else f'{e.pass_rate:.1%}'}</td><td>{e.errors}</td></tr>"
            for e in report.evaluators
        )
        parts.append(f'<table class="runs"><tr><th>Evaluator</th><th>Mean</th><th>Pass rate</th><th>Errors</th></tr>'
                     f"{rows}</table>")  # fmt: skip
    names = list(dict.fromkeys(n for r in report.rows for n in r.scores))
    head = "<tr><th>Case</th><th>#</th><th>Result</th>" + "".join(f"<th>{h(n)}</th>" for n in names)
    head += "<th>Why</th><th>Turns</th><th>Tokens</th><th>Cost</th><th>Seconds</th><th>Run</th></tr>"
    body = []
    for r in report.rows[:MAX_CASE_ROWS]:
        result = "passed" if r.passed else ("failed" if r.end == "completed" else r.end)
        why = r.error or "; ".join(f"{k}: {v}" for k, v in r.reasons.items())
        cells = "".join(f"<td>{_cell(r.scores[n]) if n in r.scores else ''}</td>" for n in names)
        body.append(
            f'<tr data-case="{h(r.case)}"><td>{h(r.case)}</td><td>{r.repeat}</td>'
            f'<td><span class="phase {"completed" if r.passed else "failed"}">{h(result)}</span></td>{cells}'
            f"<td><small>{h(why[:300])}</small></td><td>{r.turns}</td><td>{r.tokens:,}</td><td>${r.usd:.4f}</td>"
            f"<td>{r.seconds:.2f}</td><td>{run_link(r.run_id)}</td></tr>"
        )
    for run_id in status.running:
        waiting = "waiting for a person" if run_id in status.waiting else "running"
        body.append(f'<tr class="running"><td colspan="3">{h(waiting)}</td><td colspan="{len(names) + 6}">'
                    f"{run_link(run_id)}</td></tr>")  # fmt: skip
    for run_id in status.scoring:
        body.append(f'<tr class="running"><td colspan="3">scoring</td><td colspan="{len(names) + 6}">'
                    f"{run_link(run_id)}</td></tr>")  # fmt: skip
    parts.append(f'<table class="runs cases">{head}{"".join(body)}</table>')
    if diff is not None:
        parts.append(diff_section(diff))
    return "\n".join(parts)


def diff_section(diff: Diff) -> str:
    lines = [
        f'<h2>Against <a href="{h(eval_href(diff.baseline))}">{h(diff.baseline)}</a></h2>',
        f'<p class="meta">pass rate {diff.pass_rate:+.1%} · cost {diff.usd:+.4f} USD · p50 {diff.p50_seconds:+.2f}s · '
        f"p95 {diff.p95_seconds:+.2f}s · {len(diff.regressed)} regressed · {len(diff.improved)} improved</p>",
        *([f'<p class="refusal">Note: {h(diff.note)}.</p>'] if diff.note else []),
    ]
    moved = [c for c in diff.cases if c.change != "same"]
    if moved:
        rows = "".join(
            f'<tr data-diff="{h(c.case)}"><td>{h(c.case)}</td>'
            f'<td><span class="phase {"failed" if c.change == "regressed" else "completed"}">{h(c.change)}</span></td>'
            f"<td>{_rate(c.baseline_pass_rate)} → {_rate(c.pass_rate)}</td>"
            f"<td>{h(', '.join(f'{k} {v:+.3g}' for k, v in c.scores.items() if v) or '-')}</td>"
            f"<td>{c.usd:+.4f}</td><td>{c.seconds:+.2f}</td></tr>"
            for c in moved
        )
        head = "<tr><th>Case</th><th>Change</th><th>Pass rate</th><th>Scores</th><th>USD</th><th>Seconds</th></tr>"
        lines.append(f'<table class="runs diff">{head}{rows}</table>')
    else:
        lines.append('<p class="empty">No case changed.</p>')
    return "\n".join(lines)


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"
