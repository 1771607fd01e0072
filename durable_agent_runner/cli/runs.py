"""`client.py run`, `result`, `list` and `cancel`: start a run, wait for its answer, list runs,
cancel one. A run's model settings and breakpoints are checked here, before anything starts."""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from typing import Any

from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from durable_agent_runner.activities import wire
from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import (
    STATUS_NAMES,
    UsageError,
    emit,
    existing,
    failure,
    read_prompt,
    ui_url,
)
from durable_agent_runner.cli.messages import gap_note, print_exchange
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.workflows import types as t

MAX_RUN_ID = 255


def new_run_id(agent: str, prompt: str) -> str:
    """Readable in the Web UI's list: `demo-whats-the-weather-in-3f2a1c9e`."""
    words = re.findall(r"[a-z0-9]+", prompt.lower().replace("'", ""))[:4]
    slug = "-".join(words)[:32].strip("-")
    return f"{agent}-{slug + '-' if slug else ''}{uuid.uuid4().hex[:8]}"


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
    if args.id is not None and not (0 < len(args.id) <= MAX_RUN_ID and args.id.isprintable()):
        raise UsageError(f"--id must be 1-{MAX_RUN_ID} printable characters")
    run_id = args.id or new_run_id(args.agent, prompt)
    handle = await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(
            prompt=prompt,
            agent=args.agent,
            max_turns=args.max_turns,
            model=args.model,
            capture=args.capture,
            model_settings=args.settings,
            breakpoints=breakpoints(args),
        ),
        id=run_id,
        task_queue=args.task_queue,
        result_type=t.RunResult,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(t.SA_AGENT, args.agent), SearchAttributePair(t.SA_PHASE, "starting")]
        ),
        # The prompt itself travels once, in the run's input; the UI's summary shows an excerpt.
        static_summary=f"{args.agent}: {prompt[:120]}",
        static_details=f"**prompt**\n\n{prompt[:2000]}" + ("…" if len(prompt) > 2000 else ""),
    )
    if args.follow:
        if not args.json:
            print(f"run {run_id}  ·  {ui_url(run_id)}", file=sys.stderr)
        return await watch(client, run_id, 0, args.json)
    if not args.wait:
        emit(args.json, {"run_id": run_id, "ui_url": ui_url(run_id)}, run_id)
        if not args.json:
            print(f"follow it: python client.py status {run_id}  ·  {ui_url(run_id)}", file=sys.stderr)
        return 0
    return await print_result(handle, args.json)


def breakpoints(args: argparse.Namespace) -> t.Breakpoints | None:
    if not (args.break_at or args.break_every_turn or args.break_before_tools or args.break_tool):
        return None
    return t.Breakpoints(
        at_turns=args.break_at or [],
        every_turn=args.break_every_turn,
        before_tools=args.break_before_tools,
        tools=args.break_tool or [],
    )


async def print_result(handle: WorkflowHandle[Any, Any], as_json: bool) -> int:
    try:
        result: t.RunResult = await handle.result()
    except WorkflowFailureError as err:
        status, error = failure(err)
        failed = {"run_id": handle.id, "status": status, "error": error, "output": None}
        emit(as_json, failed, f"run {status}: {error['type']}: {error['message']}", error=True)
        return 1
    obj: dict[str, Any] = {"run_id": handle.id, "status": "completed", **result.model_dump(mode="json")}
    obj |= {"cost_usd": result.usage.cost_usd, "ui_url": ui_url(handle.id)}
    if result.output_object is not None:  # typed output: the object itself, under `output`
        obj["output"] = obj.pop("output_object")
        emit(as_json, obj, json.dumps(result.output_object, indent=2, ensure_ascii=False))
        return 0
    obj.pop("output_object", None)
    emit(as_json, obj, result.output)
    return 0


async def cmd_result(client: Client, args: argparse.Namespace) -> int:
    handle, desc = await existing(client, args.run_id)
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
    if args.no_wait:
        if desc.status == WorkflowExecutionStatus.RUNNING:
            still = {"run_id": args.run_id, "status": "running", "output": None}
            emit(args.json, still, "the run is still running", error=True)
            return 1
    return await print_result(handle, args.json)


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
    handle, desc = await existing(client, args.run_id)
    status = desc.status
    if status != WorkflowExecutionStatus.RUNNING:
        raise UsageError(
            f"run {args.run_id} has already ended ({STATUS_NAMES.get(status, 'unknown') if status else '?'})"
        )
    await handle.cancel()
    emit(args.json, {"run_id": args.run_id, "cancel_requested": True}, f"cancellation requested for {args.run_id}")
    return 0
