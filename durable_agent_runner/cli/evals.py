"""`client.py eval run | status | watch | report | list | resume | add-case`: durable evals, a shell over
`AgentClient.evals` (client/evals.py). `eval run` waits (unless --no-wait), prints the report and
applies the gate: exit 1 naming the cases that failed it, 2 for bad arguments."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from durable_agent_runner.cli.args import EVAL_ID, agent_name, bounded, model_string, new_id, run_id
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.cli.session import add_wait
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.errors import cli
from durable_agent_runner.client.evals import EvalHandle, check_dataset, progress_line
from durable_agent_runner.evals.cases import Dataset
from durable_agent_runner.evals.files import DatasetError, load_dataset
from durable_agent_runner.evals.report import Diff, Report, gate, markdown
from durable_agent_runner.workflows.types import evals as te

POLL_SECONDS = 1.0
BAR = 30


def _dataset(text: str) -> Dataset:
    """The dataset file, read as the arguments are parsed: a bad one is a usage error, before connecting."""
    try:
        dataset = load_dataset(Path(text))
    except DatasetError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    try:  # the client's own rule for an eval's dataset (`--repeat` is weighed once connected), said with its file
        check_dataset(dataset, repeat=1)
    except BadArgument as err:
        raise argparse.ArgumentTypeError(f"{text}: dataset {err.reason}") from None
    return dataset


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None


def _gate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", metavar="EVAL_ID", help="compare case by case with this eval")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a case regressed (--baseline)")
    p.add_argument("--min-pass-rate", type=bounded(float, 0, 1), metavar="X", help="exit 1 below this pass rate")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the report as JSON")
    out.add_argument("--markdown", action="store_true", help="print the report as Markdown (the default text)")


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    top = sub.add_parser("eval", help="durable evals: run a dataset against an agent, follow it, report, compare")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    r = verbs.add_parser("run", help="run every case of DATASET (YAML or JSON) as a run of --agent")
    r.add_argument("dataset", type=_dataset, help="a dataset file (pydantic-evals' layout)")
    r.add_argument("--agent", type=agent_name, required=True, help="the agent every case runs")
    r.add_argument(
        "--concurrency",
        type=bounded(int, 1, te.MAX_CONCURRENCY),
        default=4,
        metavar="N",
        help=f"cases run at once (1-{te.MAX_CONCURRENCY}, default 4)",
    )
    r.add_argument("--repeat", type=bounded(int, 1, te.MAX_REPEAT), default=1, metavar="K", help="each case K times")
    r.add_argument("--budget-usd", type=bounded(float, 1e-9, 1e9), metavar="X", help="all cases may spend at most $X")
    r.add_argument("--budget-tokens", type=bounded(int, 1, 10**12), metavar="N", help="all cases: at most N tokens")
    r.add_argument("--on-budget", choices=["pause", "fail"], help="when spent (default: the agent's on_budget)")
    r.add_argument(
        "--model", type=model_string, help="override the agent's model for every case (and the judge's default)"
    )
    r.add_argument("--id", type=new_id, metavar="EVAL_ID", help="the eval's id (default: eval-DATASET-xxxxxxxx)")
    r.add_argument(
        "--inline-scoring",
        action="store_true",
        help="score a case whose evaluators are all cheap built-ins (Contains, ...) with no activity",
    )
    r.add_argument("--no-wait", action="store_true", help="print the eval's id and return")
    r.add_argument("--timeout", type=bounded(float, 1, 7 * 86400), default=86400, metavar="S", help="wait at most S s")
    _gate_flags(r)
    r.set_defaults(fn=cmd_run)

    s = verbs.add_parser("status", help="an eval's progress: done, passed, failed, waiting, tokens, USD")
    s.add_argument("eval_id", type=run_id, help=EVAL_ID)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(fn=cmd_status)

    w = verbs.add_parser("watch", help="follow an eval with a progress bar until it ends")
    w.add_argument("eval_id", type=run_id, help=EVAL_ID)
    w.add_argument(
        "--timeout", type=bounded(float, 1, 7 * 86400), default=86400, metavar="S", help="follow it at most S s"
    )
    w.add_argument("--json", action="store_true", help="print the final progress as JSON")
    w.set_defaults(fn=cmd_watch)

    rep = verbs.add_parser("report", help="an eval's report, optionally against a baseline eval")
    rep.add_argument("eval_id", type=run_id, help=EVAL_ID)
    _gate_flags(rep)
    rep.set_defaults(fn=cmd_report)

    ls = verbs.add_parser("list", help="the latest evals")
    ls.add_argument("--limit", type=bounded(int, 1, 1000), default=20, help="at most this many (1-1000, default 20)")
    ls.add_argument(
        "--started-on-1x", action="store_true", help="only evals still running that started on 1.x (docs/patches.md)"
    )
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(fn=cmd_list)

    cancel = verbs.add_parser("cancel", help="cancel an eval and its cases in flight; finished ones keep their results")
    cancel.add_argument("eval_id", type=run_id, help=EVAL_ID)
    cancel.add_argument("--json", action="store_true", help="print JSON")
    cancel.set_defaults(fn=cmd_cancel)

    res = verbs.add_parser("resume", help="raise the budget of an eval paused on it")
    res.add_argument("eval_id", type=run_id, help=EVAL_ID)
    res.add_argument("--add-usd", type=bounded(float, 1e-9, 1e6), metavar="X", help="add $X to its budget")
    res.add_argument("--add-tokens", type=bounded(int, 1, 10**9), metavar="N", help="add N tokens to its budget")
    res.add_argument("--json", action="store_true", help="print JSON")
    add_wait(res)
    res.set_defaults(fn=cmd_resume)

    add = verbs.add_parser("add-case", help="make a recorded run a case of DATASET: only the model is asked again")
    add.add_argument("dataset", help="the dataset file to add to (YAML or JSON; made if missing)")
    add.add_argument("run_id", type=run_id, help="the recorded run (a production incident, say)")
    add.add_argument("--at-turn", type=bounded(int, 1, 10**6), metavar="N", help="start before model call N "
                     "(default: the run's last model call)")  # fmt: skip
    exp = add.add_mutually_exclusive_group()
    exp.add_argument("--expected", metavar="TEXT", help="the expected output, as text")
    exp.add_argument("--expected-json", type=_json, metavar="JSON", help="the expected output, as a JSON value")
    add.add_argument("--name", help="the case's name (default: RUN_ID at turn N)")
    add.add_argument("--json", action="store_true", help="print JSON")
    add.set_defaults(fn=cmd_add_case)


def check(args: argparse.Namespace) -> None:
    """What argparse cannot check alone, refused before connecting."""
    if getattr(args, "fail_on_regression", False) and not args.baseline:
        raise UsageError("--fail-on-regression needs --baseline EVAL_ID")
    if getattr(args, "fn", None) is cmd_add_case and _a_file(args.run_id) and not _a_file(args.dataset):
        raise UsageError(f"add-case takes DATASET, then RUN_ID: {args.run_id!r} looks like the dataset file")


def _a_file(text: str) -> bool:
    return text.lower().endswith((".yaml", ".yml", ".json"))


async def cmd_run(client: AgentClient, args: argparse.Namespace) -> int:
    dataset = args.dataset
    try:
        ev = await client.evals.start(
            dataset, agent=args.agent, concurrency=args.concurrency, repeat=args.repeat,
            budget_usd=args.budget_usd, budget_tokens=args.budget_tokens, on_budget=args.on_budget,
            model=args.model, baseline=args.baseline, eval_id=args.id, inline_scoring=args.inline_scoring,
        )  # fmt: skip
    except BadArgument as err:  # no such baseline: said as its flag, where it read `baseline: …`
        raise (UsageError.of_flag(err) if err.field == "baseline" else err) from None
    if args.no_wait:  # its id alone on standard output, as `run` prints a run's: `E=$(... --no-wait)`
        emit(args.json, {"eval_id": ev.eval_id}, ev.eval_id)
        if not args.json:
            print(f"follow it: {cli(f'eval watch {ev.eval_id}')}", file=sys.stderr)
        return 0
    print(f"eval {ev.eval_id}: {len(dataset.cases)} case(s) × {args.repeat} on {args.agent}", file=sys.stderr)
    await _follow(ev, args.timeout)
    return await _report(ev, args)


async def cmd_report(client: AgentClient, args: argparse.Namespace) -> int:
    return await _report(client.evals.get(args.eval_id), args)


async def _report(ev: EvalHandle, args: argparse.Namespace) -> int:
    now, diff = await ev.report(args.baseline)
    failures = gate(now, diff, fail_on_regression=args.fail_on_regression, min_pass_rate=args.min_pass_rate)
    _print_report(args.json, now, diff, failures)
    for line in failures:
        print(f"gate failed: {line}", file=sys.stderr)
    return 1 if failures else 0


def _print_report(as_json: bool, now: Report, diff: Diff | None, failures: list[str]) -> None:
    body = {
        "report": now.model_dump(mode="json"),
        "diff": diff.model_dump(mode="json") if diff else None,
        "gate": {"passed": not failures, "failures": failures},
    }
    emit(as_json, body, markdown(now, diff))


async def cmd_status(client: AgentClient, args: argparse.Namespace) -> int:
    s = await client.evals.get(args.eval_id).status()
    lines = [f"eval {s.eval_id}: {s.dataset} on {s.agent}", "  " + progress_line(s)]
    lines += [f"  stalled: {wait['message']}" for wait in s.unserved]
    lines += [f"  running: {r}" + (" (waits for a person)" if r in s.waiting else "") for r in s.running]
    lines += [f"  scoring: {r}" for r in s.scoring]
    emit(args.json, _status_body(s), "\n".join(lines))
    return 0


def _status_body(s: te.EvalStatus) -> dict[str, Any]:
    """Progress as JSON: the counters and the cases in flight (the results are the report's)."""
    body = s.model_dump(mode="json", exclude={"results"})
    body["results"] = len(s.results)
    return body


def bar(s: te.EvalStatus) -> str:
    filled = BAR * s.done // max(s.total, 1)
    return f"[{'#' * filled}{'.' * (BAR - filled)}] {progress_line(s)}"


async def _follow(ev: EvalHandle, seconds: float) -> te.EvalStatus:
    """A progress bar on standard error until the eval ends (one line per change when not a
    terminal), and, each once on a line of its own, a case run that waits for a person (how to
    see what it asks) and a wait no worker takes (an agent no worker serves)."""
    tty, last = sys.stderr.isatty(), ""
    deadline = time.monotonic() + seconds
    told: set[str] = set()  # what was said (a case run waiting for a person, a wait no worker takes), once each
    try:
        while True:
            s = await ev.status()
            said = {r: f"case run {r} waits for a person: {cli()} status {r}" for r in s.waiting}
            said |= {f"{w['queue']} {w['waiting']}": w["message"] for w in s.unserved}
            for key, text in said.items():
                if key not in told:
                    told.add(key)
                    print(("\n" if tty and last else "") + text, file=sys.stderr, flush=True)
                    last = ""  # the bar is drawn again below the message
            line = bar(s)
            if line != last:
                print(("\r" + line) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
                last = line
            if s.phase in te.EVAL_ENDED:
                if tty:
                    print(file=sys.stderr)
                return s
            if time.monotonic() > deadline:
                raise UsageError(f"eval {ev.eval_id} still running after {seconds:g}s (it goes on; see eval status)")
            await asyncio.sleep(POLL_SECONDS)
    except asyncio.CancelledError:  # Ctrl-C: this stops following, not the eval
        print(f"\nstopped following; eval {ev.eval_id} goes on: {cli()} eval watch {ev.eval_id}", file=sys.stderr)
        raise


async def cmd_watch(client: AgentClient, args: argparse.Namespace) -> int:
    s = await _follow(client.evals.get(args.eval_id), args.timeout)
    emit(args.json, _status_body(s), progress_line(s))
    return 0


async def cmd_list(client: AgentClient, args: argparse.Namespace) -> int:
    rows = await client.evals.list(args.limit, started_on_1x=args.started_on_1x)
    text = "\n".join(f"{r.eval_id}  {r.status}  {r.agent}  {r.tokens:,} tokens  ${r.usd:.4f}" for r in rows)
    none = "no eval started on 1.x is running" if args.started_on_1x else "no evals"
    emit(args.json, {"evals": [r.model_dump(mode="json") for r in rows]}, text or none)
    return 0


async def cmd_cancel(client: AgentClient, args: argparse.Namespace) -> int:
    await client.evals.get(args.eval_id).cancel()
    said = f"cancellation requested for eval {args.eval_id} (finished cases keep their results: eval report)"
    emit(args.json, {"eval_id": args.eval_id, "cancel_requested": True}, said)
    return 0


async def cmd_resume(client: AgentClient, args: argparse.Namespace) -> int:
    if args.add_usd is None and args.add_tokens is None:
        raise UsageError("say how much to add: --add-usd X or --add-tokens N")
    handle = client.evals.get(args.eval_id)
    budget = await handle.resume(add_usd=args.add_usd, add_tokens=args.add_tokens, wait=args.worker_wait)
    emit(args.json, budget.model_dump(mode="json"), f"resumed eval {args.eval_id}")
    return 0


async def cmd_add_case(client: AgentClient, args: argparse.Namespace) -> int:
    expected = args.expected_json if args.expected_json is not None else args.expected
    try:
        case = await client.evals.add_case(
            args.dataset, args.run_id, at_turn=args.at_turn, expected=expected, name=args.name
        )
    except DatasetError as err:
        raise UsageError(str(err)) from None
    except BadArgument as err:  # a case of that name already: said as the flag that names it
        raise (UsageError.of_flag(err) if err.field == "name" else err) from None
    point = case.from_run
    assert point is not None
    body = {"dataset": args.dataset, "case": case.name, "run_id": point.run_id, "at_turn": point.at_turn}
    text = f"added case {case.name!r} to {args.dataset}: {len(point.messages)} message(s) of {point.run_id}, "
    emit(args.json, body, text + f"the model asked again from call {point.at_turn}")
    return 0
