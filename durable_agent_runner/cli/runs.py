"""`client.py run`, `result`, `list` and `cancel`: start a run, wait for its answer, list runs,
cancel one, through the Python client (durable_agent_runner/client/). A run's model settings and
breakpoints are parsed from the flags here, and checked before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from durable_agent_runner.activities import wire
from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import STATUS_NAMES, UsageError, emit, read_prompt, ui_url
from durable_agent_runner.cli.messages import gap_note, print_exchange
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.client.agent_client import AgentClient, check_run_id
from durable_agent_runner.client.errors import RunFailed
from durable_agent_runner.client.handles import RunHandle
from durable_agent_runner.client.stuck import warn_unserved
from durable_agent_runner.workflows import types as t

# `run`'s flags for ModelSettings fields, by field name (the flag is the name with dashes).
SETTINGS_FLAGS = (
    "temperature", "top_p", "max_output_tokens", "tool_choice", "parallel_tool_calls", "reasoning_effort", "seed",
    "stop",
)  # fmt: skip


def model_settings(args: argparse.Namespace) -> t.ModelSettings | None:
    """The run's model settings: --model-settings JSON, each flag given overriding its field;
    None when none was given (the agent's own apply). Checked here, so a bad value is a usage
    error before anything starts."""
    given: dict[str, Any] = {}
    if args.model_settings is not None:
        try:
            given = json_object(args.model_settings, "--model-settings", "a JSON object of model settings")
        except ValueError as err:
            raise UsageError(str(err)) from None
        unknown = sorted(set(given) - set(t.ModelSettings.model_fields))
        if unknown:
            known = ", ".join(t.ModelSettings.model_fields)
            raise UsageError(f"--model-settings: unknown field {', '.join(unknown)} (known: {known})")
    flags = {name: getattr(args, name) for name in SETTINGS_FLAGS if getattr(args, name) is not None}
    if not given and not flags:
        return None
    try:
        settings = t.ModelSettings.model_validate({**given, **flags})
        wire.check_extra_body(settings.extra_body)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        where = f"--{field.replace('_', '-')}" if field in flags else f"--model-settings {field}".rstrip()
        raise UsageError(f"{where}: {first['msg']}") from None
    except wire.BadSettings as err:
        raise UsageError(f"--model-settings: {err}") from None
    return settings


async def cmd_run(client: Client, args: argparse.Namespace) -> int:
    prompt = read_prompt(args)
    try:
        if args.id is not None:
            check_run_id(args.id)
    except ValueError as err:
        raise UsageError(f"--{err}") from None
    run = await AgentClient(client, task_queue=args.task_queue).start(
        args.agent,
        prompt,
        id=args.id,
        max_turns=args.max_turns,
        model=args.model,
        capture=args.capture,
        model_settings=args.settings,
        breakpoints=breakpoints(args),
    )
    if args.follow:
        if not args.json:
            print(f"run {run.id}  ·  {ui_url(run.id)}", file=sys.stderr)
        return await watch(client, run.id, 0, args.json)
    if not args.wait:
        emit(args.json, {"run_id": run.id, "ui_url": ui_url(run.id)}, run.id)
        if not args.json:
            print(f"follow it: python client.py status {run.id}  ·  {ui_url(run.id)}", file=sys.stderr)
        return 0
    return await print_result(run, args.json)


def breakpoints(args: argparse.Namespace) -> t.Breakpoints | None:
    if not (args.break_at or args.break_every_turn or args.break_before_tools or args.break_tool):
        return None
    return t.Breakpoints(
        at_turns=args.break_at or [],
        every_turn=args.break_every_turn,
        before_tools=args.break_before_tools,
        tools=args.break_tool or [],
    )


async def print_result(run: RunHandle, as_json: bool) -> int:
    # Meanwhile, a wait no worker takes (no worker serves the agent, a tool's version) is said at once.
    say = asyncio.create_task(warn_unserved(run.temporal, run.handle, lambda text: print(text, file=sys.stderr)))
    try:
        result = await run.outcome()
    except RunFailed as err:
        failed = {"run_id": run.id, "status": err.status, "error": {"type": err.error_type, "message": err.message}}
        emit(as_json, failed | {"output": None}, f"run {err.status}: {err.error_type}: {err.message}", error=True)
        return 1
    finally:
        say.cancel()
    obj: dict[str, Any] = {"run_id": run.id, "status": "completed", **result.model_dump(mode="json")}
    obj |= {"cost_usd": result.usage.cost_usd, "ui_url": ui_url(run.id)}
    if result.output_object is not None:  # typed output: the object itself, under `output`
        obj["output"] = obj.pop("output_object")
        emit(as_json, obj, json.dumps(result.output_object, indent=2, ensure_ascii=False))
        return 0
    obj.pop("output_object", None)
    emit(as_json, obj, result.output)
    return 0


async def cmd_result(client: Client, args: argparse.Namespace) -> int:
    run = AgentClient(client).get(args.run_id)
    status = await run.exists()
    if args.message is not None:
        if args.no_wait:
            exchange = await session.get_exchange(client, args.run_id, args.message)
            if exchange is None or (exchange.output is None and exchange.error is None):
                emit(
                    args.json,
                    {"run_id": args.run_id, "message": args.message, "output": None},
                    "not answered yet",
                    True,
                )
                return 1
        else:
            exchange = await session.wait_answer(client, args.run_id, args.message, gap_note(args.run_id))
        return print_exchange(args.run_id, args.message, exchange, args.json)
    if args.no_wait and status == WorkflowExecutionStatus.RUNNING:
        still = {"run_id": args.run_id, "status": "running", "output": None}
        emit(args.json, still, "the run is still running", error=True)
        return 1
    return await print_result(run, args.json)


async def cmd_list(client: Client, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be between 1 and 1000")
    rows: list[dict[str, Any]] = []
    async for wf in client.list_workflows(f'WorkflowType="{t.WORKFLOW_NAME}"', limit=args.limit):
        rows.append(run_row(wf))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no runs yet")
    for r in rows:
        print(f"{r['run_id']:<34} {r['status']:<10} {r['phase'] or '':<14} turn {r['turn']:<4} {r['started_at'][:19]}")
    return 0


def run_row(wf: WorkflowExecution) -> dict[str, Any]:
    """One run as `list` shows it (and the console's runs page), from its visibility record alone."""
    sa = wf.typed_search_attributes
    return {
        "run_id": wf.id,
        "status": STATUS_NAMES.get(wf.status, "unknown") if wf.status else "unknown",
        "agent": sa.get(t.SA_AGENT),
        "phase": sa.get(t.SA_PHASE),
        "turn": sa.get(t.SA_TURN) or 0,
        "total_tokens": sa.get(t.SA_TOKENS) or 0,
        "cost_usd": sa.get(t.SA_COST) or 0.0,
        "pending_approvals": sa.get(t.SA_PENDING) or 0,
        "started_at": wf.start_time.isoformat(),
    }


async def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    await AgentClient(client).get(args.run_id).cancel()
    emit(args.json, {"run_id": args.run_id, "cancel_requested": True}, f"cancellation requested for {args.run_id}")
    return 0
