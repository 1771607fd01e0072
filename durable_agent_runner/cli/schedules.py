"""`client.py schedule create | list | describe | pause | unpause | trigger | backfill | delete`:
runs that start themselves, a shell over `AgentClient.schedules` (client/schedules.py). Every
argument is checked as it is parsed (client/schedule_specs.py), so a bad cron, duration or name
is a one-line usage error before anything is sent."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from typing import Any

from durable_agent_runner.cli.args import SCHEDULE, agent_name, checked, integer, model_string, number
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client import checks
from durable_agent_runner.client import schedule_specs as specs
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.schedules import ScheduleRow, ScheduleView

NAME = checked(specs.name)
AGENT = agent_name
NOTE = checked(specs.note)


def check(args: argparse.Namespace) -> None:
    """What argparse cannot check alone, refused before connecting: an empty input, a jitter past
    the interval, a time zone for an interval, a budget or model for a session (it has its own)."""
    if args.verb != "create":
        return
    try:
        checks.prompt(args.input, "input")
        if args.every is not None and args.jitter is not None:
            specs.jitter_within(specs.duration(args.jitter, "jitter"), specs.duration(args.every, "every"))
        specs.zone_for(args.timezone, args.cron)
    except checks.BadArgument as err:
        raise UsageError.of_flag(err) from None
    if args.session is not None and (args.model or args.budget_usd is not None or args.budget_tokens is not None):
        raise UsageError("--session: a session has its own model and budget: give no --model or --budget-*")


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    top = sub.add_parser("schedule", help="runs that start themselves: create, list, describe, pause, trigger, ...")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    c = verbs.add_parser("create", help="a schedule that starts a run of an agent (or messages a session)")
    c.add_argument("name", type=NAME, help="its name: letters, digits, . _ - (its runs' ids begin sched-NAME-)")
    what = c.add_mutually_exclusive_group(required=True)
    what.add_argument("--agent", type=AGENT, help="the agent each run runs (or --session)")
    c.add_argument("--input", required=True, help="what each run is asked (or the message sent to --session)")
    when = c.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", type=checked(specs.cron), metavar="EXPR", help="e.g. '0 9 * * 1-5' or @daily")
    when.add_argument(
        "--every",
        type=checked(lambda v: specs.duration(v, "every", low=specs.MIN_EVERY)),
        metavar="DURATION",
        help="e.g. 10s, 15m, 1h30m, 1d",
    )
    c.add_argument(
        "--overlap",
        choices=list(specs.OVERLAPS),
        default="skip",
        help="when the last run is still going: skip (default), buffer-one, cancel-other, allow-all",
    )
    c.add_argument(
        "--catchup-window",
        type=checked(lambda v: specs.duration(v, "catchup", low=specs.MIN_CATCHUP)),
        metavar="DUR",
        help="after downtime, times missed by at most this still start (default: 1 year)",
    )
    c.add_argument(
        "--jitter",
        type=checked(lambda v: specs.duration(v, "jitter")),
        metavar="DUR",
        help="start each run up to this much later, at random",
    )
    c.add_argument("--timezone", type=checked(specs.timezone), metavar="TZ", help="for --cron: e.g. Europe/Paris")
    c.add_argument("--budget-usd", type=number, metavar="X", help="each run may spend at most $X")
    c.add_argument("--budget-tokens", type=integer, metavar="N", help="each run may use at most N tokens")
    c.add_argument("--model", type=model_string, help="override the agent's model for each run")
    what.add_argument("--session", metavar="RUN_ID", help="send --input to this session instead of starting runs")
    c.add_argument("--paused", action="store_true", help="create it paused (unpause to start it)")
    c.add_argument("--note", type=NOTE, default="", help="a note shown with it")
    c.set_defaults(fn=cmd_create)

    ls = verbs.add_parser("list", help="the schedules, with their last and next runs")
    ls.set_defaults(fn=cmd_list)
    for verb, fn, helptext in [
        ("describe", cmd_describe, "a schedule whole: its spec, policy, recent and next runs"),
        ("pause", cmd_pause, "stop starting runs (the runs going on go on)"),
        ("unpause", cmd_unpause, "start runs again"),
        ("trigger", cmd_trigger, "start one run now"),
        ("delete", cmd_delete, "delete the schedule (its runs go on)"),
    ]:
        v = verbs.add_parser(verb, help=helptext)
        v.add_argument("name", type=NAME, help=SCHEDULE)
        if verb in ("pause", "unpause"):
            v.add_argument("--note", type=NOTE, default="", help="why (shown with the schedule)")
        if verb == "trigger":
            v.add_argument("--overlap", choices=list(specs.OVERLAPS), help="override the schedule's for this run")
        v.set_defaults(fn=fn)
    b = verbs.add_parser("backfill", help="start the runs it would have started between FROM and TO")
    b.add_argument("name", type=NAME, help=SCHEDULE)
    b.add_argument("start", metavar="FROM", type=checked(lambda v: specs.moment(v, "FROM")), help="ISO time (UTC)")
    b.add_argument("end", metavar="TO", type=checked(lambda v: specs.moment(v, "TO")), help="e.g. 2026-12-01T18:00")
    b.set_defaults(fn=cmd_backfill)
    for v in verbs.choices.values():
        v.add_argument("--json", action="store_true", help="print JSON")


def _t(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "-"


def _head(r: ScheduleRow) -> str:
    state = ("paused" if r.paused else "active") + (f" ({r.note})" if r.note else "")
    target = f"session {r.session}" if r.session else f"agent {r.agent}"
    return f"{r.name}  {r.when}  {target}  {state}"


def _row(r: ScheduleRow) -> str:
    last = f"last {r.last_run.run_id} at {_t(r.last_run.started_at)}" if r.last_run else "no run yet"
    nxt = f"next {_t(r.next_runs[0])}" if r.next_runs and not r.paused else "next -"
    return f"{_head(r)}  {last}  {nxt}"


def describe_text(v: ScheduleView) -> str:
    lines = [_head(v)]
    lines.append(f"  input: {v.input[:300]!r}" + (" …" if len(v.input) > 300 else ""))
    policy = [f"overlap {v.overlap}"]
    if v.catchup_window_seconds is not None:
        policy.append(f"catch-up window {specs.said(timedelta(seconds=v.catchup_window_seconds))}")
    if v.jitter_seconds:
        policy.append(f"jitter {specs.said(timedelta(seconds=v.jitter_seconds))}")
    if v.timezone:
        policy.append(f"time zone {v.timezone}")
    lines.append("  " + " · ".join(policy))
    if v.model:
        lines.append(f"  model: {v.model}")
    if v.budget_usd is not None or v.budget_tokens is not None:
        caps = [
            f"${v.budget_usd:g}" if v.budget_usd is not None else "",
            f"{v.budget_tokens:,} tokens" if v.budget_tokens else "",
        ]
        lines.append("  budget per run: " + ", ".join(c for c in caps if c))
    lines.append(
        f"  runs started {v.runs_started} · skipped for overlap {v.skipped_overlap} · missed {v.missed_catchup}"
    )
    lines += [f"  running: {run}" for run in v.running]
    lines += [f"  ran: {r.run_id} (due {_t(r.scheduled_at)})" for r in v.recent[-5:]]
    if not v.paused:
        lines.append("  next: " + (", ".join(_t(n) for n in v.next_runs[:3]) or "-"))
    if v.unserved:
        lines.append(f"  ! {v.unserved}")
    lines.append(f"  Web UI: {v.ui_url}")
    return "\n".join(lines)


def _view(args: argparse.Namespace, view: ScheduleView, head: str) -> int:
    emit(args.json, view.model_dump(mode="json"), f"{head}\n{describe_text(view)}")
    return 0


# The client's fields that are `create`'s flags: a refusal of one names the flag (`--input: …`).
CREATE_FLAGS = frozenset({"input", "session", "model", "note", "timezone", "budget_usd", "budget_tokens"})


async def cmd_create(client: AgentClient, args: argparse.Namespace) -> int:
    try:
        return await _create(client, args)
    except checks.BadArgument as err:
        if err.field not in CREATE_FLAGS:
            raise
        raise UsageError.of_flag(err) from None


async def _create(client: AgentClient, args: argparse.Namespace) -> int:
    view = await client.schedules.create(
        args.name,
        agent=args.agent,
        input=args.input,
        cron=args.cron,
        every=args.every,
        overlap=args.overlap,
        catchup_window=args.catchup_window,
        jitter=args.jitter,
        timezone=args.timezone,
        budget_usd=args.budget_usd,
        budget_tokens=args.budget_tokens,
        session=args.session,
        model=args.model,
        paused=args.paused,
        note=args.note,
    )
    return _view(args, view, f"created schedule {view.name}")


async def cmd_list(client: AgentClient, args: argparse.Namespace) -> int:
    rows = await client.schedules.list()
    text = "\n".join(_row(r) for r in rows) or "no schedules"
    emit(args.json, {"schedules": [r.model_dump(mode="json") for r in rows]}, text)
    return 0


async def cmd_describe(client: AgentClient, args: argparse.Namespace) -> int:
    view = await client.schedules.describe(args.name)
    emit(args.json, view.model_dump(mode="json"), describe_text(view))
    return 0


async def cmd_pause(client: AgentClient, args: argparse.Namespace) -> int:
    return _view(args, await client.schedules.pause(args.name, args.note), f"paused {args.name}")


async def cmd_unpause(client: AgentClient, args: argparse.Namespace) -> int:
    return _view(args, await client.schedules.unpause(args.name, args.note), f"unpaused {args.name}")


async def cmd_trigger(client: AgentClient, args: argparse.Namespace) -> int:
    done = await client.schedules.trigger(args.name, overlap=args.overlap)
    emit(args.json, done.model_dump(mode="json"), f"{args.name}: {done.message}")
    return 0


async def cmd_backfill(client: AgentClient, args: argparse.Namespace) -> int:
    view = await client.schedules.backfill(args.name, args.start, args.end)
    return _view(args, view, f"backfilled {args.name} from {args.start} to {args.end}")


async def cmd_delete(client: AgentClient, args: argparse.Namespace) -> int:
    await client.schedules.delete(args.name)
    emit(args.json, {"deleted": args.name}, f"deleted schedule {args.name} (the runs it started go on)")
    return 0
