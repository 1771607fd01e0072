"""`client.py run`, `result`, `list` and `cancel`: start a run, wait for its answer, list runs,
cancel one, through the Python client (durable_agent_runner/client/). A run's model settings and
breakpoints are parsed from the flags here, and checked before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from durable_agent_runner.cli.common import UsageError, emit, for_terminal
from durable_agent_runner.cli.messages import gap_note, print_exchange
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import RunFailed, StillRunning, cli
from durable_agent_runner.client.handles import RunHandle
from durable_agent_runner.client.sessions import ANSWER_WAIT
from durable_agent_runner.client.status import WaitingFor
from durable_agent_runner.client.stuck import warn_unserved
from durable_agent_runner.workflows import types as t

# `run`'s flags for ModelSettings fields, by field name (the flag is the name with dashes).
SETTINGS_FLAGS = (
    "temperature", "top_p", "max_output_tokens", "tool_choice", "parallel_tool_calls", "reasoning_effort", "seed",
    "stop",
)  # fmt: skip


def model_settings(args: argparse.Namespace) -> t.ModelSettings | None:
    """The run's model settings: --model-settings JSON, each flag given overriding its field;
    None when none was given (the agent's own apply). Checked here by the client's own check
    (checks.model_settings: unknown fields too), so a bad value is a usage error that names its
    flag before anything starts."""
    given: dict[str, Any] = {}
    if args.model_settings is not None:
        try:
            given = checks.json_object(args.model_settings, "--model-settings", "a JSON object of model settings")
        except ValueError as err:
            raise UsageError(str(err)) from None
    flags = {name: getattr(args, name) for name in SETTINGS_FLAGS if getattr(args, name) is not None}
    if not given and not flags:
        return None
    try:
        return checks.model_settings({**given, **flags})
    except checks.BadArgument as err:
        if err.field in flags:
            where = f"--{err.field.replace('_', '-')}: "
        elif err.field in ("model_settings", "extra_body"):
            where = "--model-settings: "
        else:
            where = f"--model-settings {err.field}: "
        raise UsageError(where + err.reason) from None


def check_run(args: argparse.Namespace) -> None:
    """`run`'s flags checked before anything connects, each a usage error that names its flag:
    the model settings (kept as `args.settings`), the turns, the fallback models; then the settings
    against the models named (the line names the model and the setting)."""
    args.settings = model_settings(args)
    try:
        checks.max_turns(args.max_turns)
        if args.fallback_model is not None:
            checks.models(args.fallback_model, "fallback-model", first=args.model)
    except checks.BadArgument as err:
        raise UsageError.of_flag(err) from None
    except ValueError as err:
        raise UsageError(f"--{err}") from None
    try:
        checks.settings_fit([m for m in [args.model, *(args.fallback_model or [])] if m], args.settings)
    except checks.BadArgument as err:
        raise UsageError(err.reason) from None


async def cmd_run(client: AgentClient, args: argparse.Namespace) -> int:
    prompt = args.text  # read before connecting (main)
    run = await client.start(
        args.agent,
        prompt,
        id=args.id,
        max_turns=args.max_turns,
        model=args.model,
        fallback_models=args.fallback_model,
        capture=args.capture,
        model_settings=args.settings,
        breakpoints=breakpoints(args),
        budget_usd=args.budget_usd,
        budget_tokens=args.budget_tokens,
    )
    if args.follow:
        if not args.json:
            print(f"run {run.id}  ·  {run.ui_url}", file=sys.stderr)
        return await watch(client, run.id, 0, args.json)
    if not args.wait:
        emit(args.json, {"run_id": run.id, "ui_url": run.ui_url}, run.id)
        if not args.json:
            print(f"follow it: {cli()} status {run.id}  ·  {run.ui_url}", file=sys.stderr)
        return 0
    return await print_result(run, args.json, on_waiting=waits_note(run.id, "run --wait"))


def breakpoints(args: argparse.Namespace) -> t.Breakpoints | None:
    if not (args.break_at or args.break_every_turn or args.break_before_tools or args.break_tool):
        return None
    return t.Breakpoints(
        at_turns=args.break_at or [],
        every_turn=args.break_every_turn,
        before_tools=args.break_before_tools,
        tools=args.break_tool or [],
    )


async def print_result(run: RunHandle, as_json: bool, on_waiting: Any = None, wait: float | None = None) -> int:
    # Meanwhile, a wait no worker takes (no worker serves the agent, a tool's version) is said at once.
    say = asyncio.create_task(warn_unserved(run.temporal, run.handle, lambda text: print(text, file=sys.stderr)))
    try:
        result = await run.outcome(wait=wait, on_waiting=on_waiting)
    except StillRunning as err:
        return still_running(err, as_json)
    except RunFailed as err:
        failed = {"run_id": run.id, "status": err.status, "error": {"type": err.error_type, "message": err.message}}
        emit(as_json, failed | {"output": None}, f"run {err.status}: {err.error_type}: {err.message}", error=True)
        return 1
    finally:
        say.cancel()
    obj: dict[str, Any] = {"run_id": run.id, "status": "completed", **result.model_dump(mode="json")}
    obj |= {"cost_usd": result.usage.cost_usd, "ui_url": run.ui_url}
    if result.output_object is not None:  # typed output: the object itself, under `output`
        obj["output"] = obj.pop("output_object")
        emit(as_json, obj, json.dumps(result.output_object, indent=2, ensure_ascii=False))
        return 0
    obj.pop("output_object", None)
    emit(as_json, obj, result.output)
    return 0


async def cmd_result(client: AgentClient, args: argparse.Namespace) -> int:
    run = client.get(args.run_id)
    await run.exists()
    if args.message is not None:
        session = client.get_session(args.run_id)
        if args.no_wait:
            exchange = await session.exchange_now(args.message)
            if exchange is None or (exchange.output is None and exchange.error is None):
                emit(
                    args.json,
                    {"run_id": args.run_id, "message": args.message, "output": None},
                    "not answered yet",
                    True,
                )
                return 1
        else:
            wait = args.result_wait if args.result_wait is not None else ANSWER_WAIT
            try:
                exchange = await session.exchange(args.message, gap_note(args.run_id), wait=wait)
            except StillRunning as err:
                return still_running(err, args.json)
        return print_exchange(args.run_id, args.message, exchange, args.json)
    if args.no_wait:
        try:
            await run.outcome(wait=0)
        except StillRunning as err:
            return still_running(err, args.json)
        except RunFailed:
            pass  # printed below, as without --no-wait
    note = None if args.no_wait else waits_note(args.run_id, bound=args.result_wait)
    return await print_result(run, args.json, on_waiting=note, wait=None if args.no_wait else args.result_wait)


def still_running(err: StillRunning, as_json: bool) -> int:
    """`result --no-wait` (or `--wait S` run out) on a run that has not ended: what it waits for a
    person on, if anything."""
    waits = [w for w in err.waiting_for if isinstance(w, WaitingFor)]
    obj: dict[str, Any] = {"run_id": err.run_id, "status": "waiting_for_person" if waits else "running"}
    obj["output"] = None
    obj |= {"waiting_for": [w.model_dump(mode="json") for w in waits], "phase": err.phase}
    emit(as_json, obj, str(err), error=True)
    return 1


def waits_note(run_id: str, who: str = "result", bound: float | None = None) -> Any:
    """While `result` (or `run --wait`) waits: one line on stderr each time the run starts waiting
    for a person, and how long it is waited for (`--wait S`, or until it ends)."""
    how_long = f"at most {bound:g} s" if bound is not None else "on until it ends"

    def note(waits: list[WaitingFor]) -> None:
        if waits:
            said = "; ".join(str(w) for w in waits)
            print(f"run {run_id} waits for a person: {said} ({who} waits {how_long})", file=sys.stderr)

    return note


async def cmd_list(client: AgentClient, args: argparse.Namespace) -> int:
    found = await client.list(
        args.limit,
        phase=args.phase or "",
        agent=args.agent or "",
        waiting=args.waiting,
        started_on_1x=args.started_on_1x,
        schedule=args.schedule or "",
    )
    rows = [r.model_dump(mode="json") for r in found]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(_no_runs(args))
        return 0
    # Columns as wide as what they hold (an id past 64 characters only pushes its own line on).
    ids, statuses, phases = (min(max(len(str(r[k] or "")) for r in rows), 64) for k in ("run_id", "status", "phase"))
    for r in rows:
        by = f" · schedule {r['schedule']}" if r.get("schedule") else ""
        line = f"{r['run_id']:<{ids}}  {r['status']:<{statuses}}  {r['phase'] or '':<{phases}}  turn {r['turn']:<4}"
        print(for_terminal(f"{line} {r['started_at'][:19]}{by}", sys.stdout))
    return 0


def _no_runs(args: argparse.Namespace) -> str:
    """What `list` says when no run matches its filters (none given: none at all)."""
    said = [
        "started on 1.x" if args.started_on_1x else "",
        f"of agent {args.agent!r}" if args.agent else "",
        f"in phase {args.phase}" if args.phase else "",
        "waiting for a person" if args.waiting else "",
        f"started by schedule {args.schedule!r}" if args.schedule else "",
    ]
    if not any(said):
        return "no runs yet"
    return " ".join(["no run", *filter(None, said)]) + (" is running" if args.started_on_1x else "")


async def cmd_cancel(client: AgentClient, args: argparse.Namespace) -> int:
    await client.get(args.run_id).cancel()
    emit(args.json, {"run_id": args.run_id, "cancel_requested": True}, f"cancellation requested for {args.run_id}")
    return 0
