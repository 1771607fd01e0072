"""Start, follow and manage agent runs: `python client.py COMMAND ...` (see --help).

Exit codes: 0 ok; 1 the run failed (or was cancelled), or Temporal could not be reached;
2 a usage error: bad arguments, a bad environment variable, an unknown run id, a run that refused
what was asked; 3 no worker took an approve, reject, send, end, pause or resume within --wait
seconds (default 10).

Those six are Temporal updates: a worker must take one before it is recorded in the run. One that
no worker took in time is not recorded; the server may still hold it in memory, and a worker that
polls the run before the server drops it (a restart, the run leaving its cache) applies it then,
once; otherwise never. Sending the same again is safe: each is sent under an id that makes a
repeat count once (approve/reject: the call; send: --message-id, which the line names; end: the
run), except pause and resume, which change nothing when repeated. `status` shows what was applied.

--json: every command that prints something takes it (errors too become a JSON object on
standard output), except `export` (always JSON lines) and `codec-server` (a server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, get_args
from urllib.parse import quote

from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities import wire
from activities.capture import CaptureStore
from durable_agent_runner.cli import chat, codec_server, debug, session
from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.export import export_run, write_jsonl
from durable_agent_runner.cli.stuck import stuck
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.config.connection import CORE_LOG, address, connect, namespace, task_queue
from durable_agent_runner.config.env import ClientSettings, SettingsError
from durable_agent_runner.payloads import codec
from durable_agent_runner.payloads.store import PayloadStoreError
from durable_agent_runner.telemetry import flush as flush_telemetry
from durable_agent_runner.telemetry import traced
from workflows import types as t

STATUS_NAMES = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "running",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}
QUERY_TIMEOUT = timedelta(seconds=3)
MAX_PROMPT_BYTES = 10 * 1024 * 1024  # larger prompts belong in a tool's input, not a chat turn
MAX_RUN_ID = 255
ENDED = {"failed", "cancelled", "terminated", "timed_out", "completed"}
CORE_LOG.setLevel(logging.ERROR)  # the SDK core's own logs (gRPC retries while a server restarts): errors only


class UsageError(Exception):
    """A mistake in what the user asked for: exit code 2."""


class RunFailed(Exception):
    """The run ended without an answer: exit code 1."""


def ui_url(run_id: str) -> str:
    base = str(ClientSettings.load().ui_url).rstrip("/")
    return f"{base}/namespaces/{quote(namespace(), safe='')}/workflows/{quote(run_id, safe='')}"


def new_run_id(agent: str, prompt: str) -> str:
    """Readable in the Web UI's list: `demo-whats-the-weather-in-3f2a1c9e`."""
    words = re.findall(r"[a-z0-9]+", prompt.lower().replace("'", ""))[:4]
    slug = "-".join(words)[:32].strip("-")
    return f"{agent}-{slug + '-' if slug else ''}{uuid.uuid4().hex[:8]}"


def emit(as_json: bool, obj: dict[str, Any], text: str, error: bool = False) -> None:
    """JSON always goes to stdout; in text mode, an error message goes to stderr."""
    if as_json:
        print(json.dumps(obj, indent=2, default=str))
    else:
        print(text, file=sys.stderr if error else sys.stdout)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


async def existing(client: Client, run_id: str) -> tuple[WorkflowHandle[Any, Any], WorkflowExecutionDescription]:
    """The run's handle and its description; an unknown id is a usage error."""
    handle = client.get_workflow_handle(run_id, result_type=t.RunResult)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise UsageError(f"no run with id '{run_id}'") from None
        raise
    return handle, desc


# ------------------------------------------------------------------------------------ commands


def read_prompt(args: argparse.Namespace) -> str:
    """The prompt: the words given, `-` for standard input, or `--prompt-file F`."""
    if args.prompt_file is not None and args.prompt:
        raise UsageError("give the prompt as words, '-' or --prompt-file, not several")
    if args.prompt_file is not None or args.prompt == ["-"]:
        source = "standard input" if args.prompt_file is None else str(args.prompt_file)
        try:
            raw = sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1) if args.prompt_file is None else _read(args.prompt_file)
            prompt = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UsageError(f"the prompt in {source} is not UTF-8 text ({err.reason} at byte {err.start})") from None
        if len(raw) > MAX_PROMPT_BYTES:
            raise UsageError(f"the prompt in {source} is larger than {MAX_PROMPT_BYTES // 2**20} MiB")
    else:
        prompt = " ".join(args.prompt)
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(MAX_PROMPT_BYTES + 1)
    except OSError as err:
        raise UsageError(f"cannot read --prompt-file {path}: {err.strerror or err}") from None


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


def failure(err: WorkflowFailureError) -> tuple[str, dict[str, str]]:
    """How a run ended without an answer: its status, and the error as {type, message} — the
    type a guardrail, a limit or the provider gave (`InputGuardrailTripwireTriggered`, …)."""
    cause = err.cause
    message = getattr(cause, "message", None) or str(cause or err)
    kinds = {"CancelledError": "cancelled", "TerminatedError": "terminated", "TimeoutError": "timed_out"}
    status = kinds.get(type(cause).__name__, "failed")
    kind = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    return status, {"type": kind, "message": message}


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


def gap_note(run_id: str) -> Callable[[str, int], None]:
    """While an answer is awaited, one line on stderr when reads start going unanswered."""

    def note(said: str, in_a_row: int) -> None:
        if in_a_row == 1:
            print(f"run {run_id}: a read went unanswered ({said}); waiting on (is a worker running?)", file=sys.stderr)

    return note


def print_exchange(run_id: str, message: int, ex: t.Exchange, as_json: bool) -> int:
    """One message's answer: the text (typed output: its object), or why answering it failed."""
    obj = {
        "run_id": run_id,
        "message": message,
        "answered_by_exchange": ex.message,
        "output": ex.output_object if ex.output_object is not None else ex.output,
        "turn": ex.first_turn + ex.turns - 1,
        "turns": ex.turns,
        "usage": ex.usage.model_dump() | {"total_tokens": ex.usage.total_tokens},
        "error": ex.error,
    }
    if ex.error is not None:
        emit(as_json, obj, f"message {message} failed: {ex.error}", error=True)
        return 1
    text = json.dumps(ex.output_object, indent=2, ensure_ascii=False) if ex.output_object is not None else ex.output
    emit(as_json, obj, text or "")
    return 0


async def cmd_send(client: Client, args: argparse.Namespace) -> int:
    text = read_prompt(args)
    if len(text) > t.MAX_MESSAGE_CHARS:
        raise UsageError(f"the message is longer than {t.MAX_MESSAGE_CHARS:,} characters: give large inputs to a tool")
    receipt = await session.send_message(
        client, args.run_id, text, by=args.by, message_id=args.message_id, wait=args.worker_wait
    )
    if not args.wait:
        how = (
            " (steers the answer in progress)"
            if receipt.steer
            else f" ({receipt.queued} ahead)"
            if receipt.queued
            else ""
        )
        emit(args.json, {"run_id": args.run_id, **receipt.model_dump()}, f"message {receipt.message} sent{how}")
        return 0
    exchange = await session.wait_answer(client, args.run_id, receipt.message, gap_note(args.run_id))
    return print_exchange(args.run_id, receipt.message, exchange, args.json)


async def cmd_end(client: Client, args: argparse.Namespace) -> int:
    receipt = await session.end_session(client, args.run_id, by=args.by, reason=args.reason, wait=args.worker_wait)
    left = f"; {receipt.unanswered} message(s) still to answer first" if receipt.unanswered else ""
    emit(
        args.json,
        {"run_id": args.run_id, **receipt.model_dump()},
        f"ending {args.run_id} after {receipt.messages} message(s){left}",
    )
    return 0


async def gather_status(
    client: Client, handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription
) -> dict[str, Any]:
    sa = desc.typed_search_attributes
    out: dict[str, Any] = {
        "run_id": handle.id,
        "status": STATUS_NAMES.get(desc.status, "unknown") if desc.status else "unknown",
        "agent": sa.get(t.SA_AGENT),
        "phase": sa.get(t.SA_PHASE),
        "turn": sa.get(t.SA_TURN) or 0,
        "usage": {"total_tokens": sa.get(t.SA_TOKENS) or 0},
        "cost_usd": sa.get(t.SA_COST) or 0.0,
        "last_step": None,
        "started_at": desc.start_time.isoformat() if desc.start_time else None,
        "closed_at": desc.close_time.isoformat() if desc.close_time else None,
        "ui_url": ui_url(handle.id),
    }
    try:
        live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT)
        usage = live.usage.model_dump()
        usage["total_tokens"] = live.usage.total_tokens
        out["cost_usd"] = live.usage.cost_usd
        out.update(
            agent=live.agent,
            phase=live.phase,
            turn=live.turn,
            max_turns=live.max_turns,
            usage=usage,
            last_step=live.last_step,
        )
        if live.error:
            out["error"] = {"type": live.error_type or "RunFailed", "message": live.error}
        out["handoffs"] = [h.model_dump(mode="json") for h in live.handoffs]
        if out["status"] == "running" and live.pending_approvals:
            out["status"] = "awaiting_approval"
        out["usage_by_agent"] = {name: u.model_dump() for name, u in live.usage_by_agent.items()}
        # Only a running run has calls waiting: an ended one's state may predate how it ended.
        waiting = live.pending_approvals if out["status"] not in ENDED else []
        out["pending_approvals"] = [p.model_dump(mode="json") for p in waiting]
        out["decisions"] = [d.model_dump(mode="json") for d in live.decisions]
        if live.ignored_signals:
            out["ignored_signals"] = live.ignored_signals
        if live.paused is not None:
            out["paused"] = live.paused.model_dump(mode="json")
            if out["status"] == "running":
                out["status"] = "paused"
        if live.forked_from is not None:
            out["forked_from"] = live.forked_from.model_dump()
        if live.session is not None:
            out["session"] = live.session.model_dump(mode="json")
            if out["status"] == "running" and live.status == "waiting":
                out["status"] = "waiting"
    except (RPCError, WorkflowQueryFailedError):
        out["note"] = "live details unavailable (is a worker running?); showing search attributes"
    held = await stuck(client, desc) if out["status"] == "running" else None
    if held is not None:  # a worker answers, but its workflow code fails on this run
        out["status"], out["stuck"] = "stuck", held
        out.pop("note", None)
    forks = await debug.forks_of(client, handle.id)
    if forks:
        out["forks"] = forks
    retrying = [
        {"activity": p.activity_type.name, "attempt": p.attempt, "last_failure": p.last_failure.message}
        for p in desc.raw_description.pending_activities
        if p.attempt > 1 and p.HasField("last_failure")
    ]
    if retrying:
        out["retrying"] = retrying
    if out["status"] in ENDED and out.get("phase") not in (None, "completed", "failed", "cancelled"):
        out["phase"] = out["status"]  # terminated or timed out: the run could not record it itself
    if out["status"] in ENDED - {"completed"} and "error" not in out:
        try:
            await handle.result()
        except WorkflowFailureError as err:
            out["error"] = failure(err)[1]
    return out


def render_status(s: dict[str, Any]) -> str:
    usage = s["usage"]
    tokens = f"{usage['total_tokens']} total"
    if "input_tokens" in usage:
        tokens = (
            f"{usage['input_tokens']} in ({usage['cached_tokens']} cached) · "
            f"{usage['output_tokens']} out · {usage['requests']} model calls"
        )
    turn = f"{s['turn']}" + (f" of {s['max_turns']}" if s.get("max_turns") else "")
    if usage.get("unpriced"):
        tokens += f" · ${s.get('cost_usd', 0):.4f} (+ {usage['unpriced']} call(s) to models without a price)"
    elif s.get("cost_usd"):
        tokens += f" · ${s['cost_usd']:.4f}"
    lines = [
        f"run:     {s['run_id']}",
        f"agent:   {s['agent'] or '?'}",
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
    if s.get("paused"):
        p = s["paused"]
        point = "model call" if p["where"] == "before_model" else "the tool calls of turn"
        lines.append(f"paused:  before {point} {p['turn']}: {p['why']} (inspect, edit, then resume)")
    if s.get("forked_from"):
        f = s["forked_from"]
        lines.append(f"fork of: {f['run_id']} before model call {f['turn']}")
    for f in s.get("forks", []):
        lines.append(f"forked:  {f['run_id']} from model call {f['turn']} at {f['started_at'][:19]}")
    if s.get("session"):
        c = s["session"]
        queued = f", {c['queued']} queued" if c["queued"] else ""
        lines.append(f"session: {c['state']} · {c['messages']} message(s), {c['answered']} answered{queued}")
        if c.get("last"):
            last = c["last"]
            lines.append(f"  you:   [{last['message']}] {last['by']}: {last['prompt']}")
            answer = last["output"] if last["output"] is not None else last["error"] or "(answering…)"
            lines.append(f"  agent: {answer[:300]}")
        if c.get("idle_deadline"):
            lines.append(f"  ends:  {c['idle_deadline'][:19]} unless a message comes")
    for p in s.get("pending_approvals", []):
        args = json.dumps(p["arguments"], ensure_ascii=False)
        lines.append(f"waiting: {p['call_id']}  {p['tool']}({args})  since {p['since'][:19]}")
        lines.append(f"         approve: python client.py approve {s['run_id']} {p['call_id']}")
    for d in s.get("decisions", []):
        verdict = "approved" if d["approved"] else "rejected"
        extra = f": {d['reason']}" if d["reason"] else ""
        edited = " with edited arguments" if d["arguments"] is not None else ""
        lines.append(f"decided: {d['call_id']}  {d['tool']} {verdict}{edited} by {d['by']} at {d['at'][:19]}{extra}")
    for note in s.get("ignored_signals", []):
        lines.append(f"ignored: {note}")
    for r in s.get("retrying", []):
        lines.append(f"retrying: {r['activity']} attempt {r['attempt']}: {r['last_failure']}")
    for h in s.get("handoffs", []):
        lines.append(f"handoff: {h['from_agent']} → {h['to_agent']} in turn {h['turn']} at {h['at'][:19]}")
    if s.get("error"):
        lines.append(f"error:   {s['error']['type']}: {s['error']['message']}")
    if s.get("note"):
        lines.append(f"note:    {s['note']}")
    lines.append(f"ui:      {s['ui_url']}")
    return "\n".join(lines)


async def cmd_status(client: Client, args: argparse.Namespace) -> int:
    status = await gather_status(client, *await existing(client, args.run_id))
    emit(args.json, status, render_status(status))
    return 0


async def cmd_list(client: Client, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be between 1 and 1000")
    rows: list[dict[str, Any]] = []
    async for wf in client.list_workflows(f'WorkflowType="{t.WORKFLOW_NAME}"', limit=args.limit):
        sa = wf.typed_search_attributes
        rows.append(
            {
                "run_id": wf.id,
                "status": STATUS_NAMES.get(wf.status, "unknown") if wf.status else "unknown",
                "agent": sa.get(t.SA_AGENT),
                "phase": sa.get(t.SA_PHASE),
                "turn": sa.get(t.SA_TURN) or 0,
                "total_tokens": sa.get(t.SA_TOKENS) or 0,
                "started_at": wf.start_time.isoformat(),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no runs yet")
    for r in rows:
        print(f"{r['run_id']:<34} {r['status']:<10} {r['phase'] or '':<14} turn {r['turn']:<4} {r['started_at'][:19]}")
    return 0


async def cmd_decide(client: Client, args: argparse.Namespace) -> int:
    approve = args.command == "approve"
    edited = None
    if approve and args.args is not None:
        try:
            edited = json_object(args.args, "--args", "a JSON object of the tool's arguments")
        except ValueError as err:
            raise UsageError(str(err)) from None
    decision = t.ApprovalDecision(
        call_id=args.call_id,
        approve=approve,
        arguments=edited,
        always=approve and args.always,
        reason="" if approve else args.reason,
        by=args.by,
    )
    handle, desc = await existing(client, args.run_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise UsageError(f"run {args.run_id} has already finished: no call of it is pending")
    # The update id makes a repeated decision count once: Temporal answers it with the first's result.
    verdict = "approve" if approve else "reject"
    receipt: t.DecisionReceipt = await session.update(  # a refusal: "run R refused it: why", exit code 2
        handle,
        t.APPROVAL_UPDATE,
        decision,
        t.DecisionReceipt,
        "no call of it is pending",
        wait=args.worker_wait,
        update_id=f"{verdict}-{args.call_id}",
    )
    done = "approved" if receipt.approved else "rejected"
    text = f"{args.call_id} {done} by {args.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    emit(args.json, {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}, text)
    return 0


async def cmd_export(client: Client, args: argparse.Namespace) -> int:
    await existing(client, args.run_id)
    captures = CaptureStore(args.captures or Path(ClientSettings.load().capture_dir))
    lines = await export_run(client, args.run_id, captures)
    write_jsonl(lines, args.out)
    if args.out:
        calls = sum(1 for line in lines if line["type"] == "model_call")
        kept = sum(1 for line in lines if line["type"] == "model_call" and line["capture"])
        print(f"wrote {len(lines)} lines to {args.out}: {calls} model calls, {kept} with wire captures")
    return 0


async def cmd_watch(client: Client, args: argparse.Namespace) -> int:
    await existing(client, args.run_id)
    return await watch(client, args.run_id, args.since, args.json)


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


# ------------------------------------------------------------------------------------- parsing


class Parser(argparse.ArgumentParser):
    """Usage errors as one line (a JSON object on stdout with --json), exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(message, 2, "--json" in sys.argv[1:])


def fail(message: str, code: int, as_json: bool) -> NoReturn:
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}))
    else:
        print(f"client.py: error: {message}", file=sys.stderr)
    sys.stdout.flush()
    raise SystemExit(code)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="client.py", description=__doc__)
    p.add_argument("--task-queue", default=task_queue(), help="task queue of the workers (default: %(default)s)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="start a run and print its id")
    run.add_argument("prompt", nargs="*", help="what to ask the agent; '-' reads it from standard input")
    run.add_argument("--prompt-file", type=Path, metavar="F", help="read the prompt from this file")
    run.add_argument("--agent", default=t.DEFAULT_AGENT, help="agent name (default: %(default)s)")
    run.add_argument("--max-turns", type=positive_int, help="override the agent's max_turns")
    run.add_argument("--model", help="override the agent's model")
    run.add_argument("--id", help="run id to use (default: generated)")
    run.add_argument("--wait", action="store_true", help="wait and print the final answer")
    run.add_argument("--follow", action="store_true", help="print the run's steps and text as they happen")
    run.add_argument("--capture", action="store_true", help="keep each model call's raw request and response")
    run.add_argument("--json", action="store_true", help="print JSON")
    bp = run.add_argument_group("breakpoints", "pause the run (then: inspect, edit, resume)")
    bp.add_argument("--break-at", type=positive_int, action="append", metavar="N", help="before model call N")
    bp.add_argument("--break-every-turn", action="store_true", help="before every model call")
    bp.add_argument("--break-before-tools", action="store_true", help="before any tool call")
    bp.add_argument("--break-tool", action="append", metavar="TOOL", help="before calls of this tool (repeatable)")
    ms = run.add_argument_group("model settings", "the agent's, overridden for this run (a flag over --model-settings)")
    ms.add_argument("--temperature", type=float, metavar="F", help="sampling temperature, 0-2")
    ms.add_argument("--top-p", type=float, metavar="F", help="nucleus sampling, 0-1")
    ms.add_argument("--max-output-tokens", type=int, metavar="N", help="cap on the tokens of each reply")
    ms.add_argument("--tool-choice", metavar="X", help="auto, required, none, or the name of one tool")
    ms.add_argument("--parallel-tool-calls", action=argparse.BooleanOptionalAction, help="several calls per reply")
    efforts = [
        v for arg in get_args(t.ModelSettings.model_fields["reasoning_effort"].annotation) for v in get_args(arg)
    ]
    ms.add_argument("--reasoning-effort", choices=efforts, help="for reasoning models")
    ms.add_argument("--seed", type=int, metavar="N", help="ask for repeatable sampling (Chat Completions only)")
    ms.add_argument(
        "--stop", action="append", metavar="S", help="stop sequence (repeatable, at most 4; Chat Completions only)"
    )
    ms.add_argument(
        "--model-settings",
        metavar="JSON",
        help='all of the above and more as one object, e.g. \'{"temperature": 0.2, "extra_body": {"max_tokens": 50}}\'',
    )
    run.set_defaults(fn=cmd_run)

    for name, fn, helptext in [
        ("status", cmd_status, "status, turn, token usage and last step of a run"),
        ("result", cmd_result, "wait for a run's final answer and print it"),
        ("cancel", cmd_cancel, "cancel a run"),
    ]:
        cmd = sub.add_parser(name, help=helptext)
        cmd.add_argument("run_id")
        cmd.add_argument("--json", action="store_true", help="print JSON")
        if name == "result":
            cmd.add_argument("--no-wait", action="store_true", help="exit 1 at once if the run is still going")
            cmd.add_argument("--message", type=positive_int, metavar="K", help="a session's answer to message K")
        cmd.set_defaults(fn=fn)

    who = os.environ.get("USER") or os.environ.get("USERNAME") or "cli"
    approve = sub.add_parser("approve", help="approve a pending tool call (runs it)")
    approve.add_argument("run_id")
    approve.add_argument("call_id")
    approve.add_argument("--args", metavar="JSON", help="run with these edited arguments (validated first)")
    approve.add_argument("--always", action="store_true", help="also approve later calls of this tool in this run")
    approve.add_argument("--by", default=who, help="who decides (default: %(default)s)")
    approve.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(approve)
    approve.set_defaults(fn=cmd_decide)
    reject = sub.add_parser("reject", help="reject a pending tool call; the model gets the reason")
    reject.add_argument("run_id")
    reject.add_argument("call_id")
    reject.add_argument("--reason", required=True, help="what the model is told")
    reject.add_argument("--by", default=who, help="who decides (default: %(default)s)")
    reject.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(reject)
    reject.set_defaults(fn=cmd_decide)

    chat.add_parser(sub)
    codec_server.add_parser(sub)
    debug.add_parsers(sub, who)
    send = sub.add_parser("send", help="send a message to a session (see chat)")
    send.add_argument("run_id")
    send.add_argument("prompt", nargs="*", help="the message; '-' reads it from standard input")
    send.add_argument("--prompt-file", type=Path, metavar="F", help="read the message from this file")
    send.add_argument("--wait", action="store_true", help="wait for this message's answer and print it")
    send.add_argument("--by", default=who, help="who is talking (default: %(default)s)")
    send.add_argument("--message-id", metavar="ID", help="sending the same id again counts once (default: new)")
    send.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(send, answer_flag=True)
    send.set_defaults(fn=cmd_send)
    end = sub.add_parser("end", help="end a session once the messages it has taken are answered")
    end.add_argument("run_id")
    end.add_argument("--reason", default="", help="kept in the run's result")
    end.add_argument("--by", default=who, help="who ends it (default: %(default)s)")
    end.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(end)
    end.set_defaults(fn=cmd_end)

    w = sub.add_parser("watch", help="follow a run live: text as it streams, tool calls, approvals, answer")
    w.add_argument("run_id")
    w.add_argument("--since", type=int, default=0, metavar="N", help="start at event N (resume a watch)")
    w.add_argument("--json", action="store_true", help="one JSON object per line, with event numbers")
    w.set_defaults(fn=cmd_watch)

    ex = sub.add_parser(
        "export", help="write a run as JSON lines (always JSON): replies, wire captures, decisions, tool results"
    )
    ex.add_argument("run_id")
    ex.add_argument("--out", type=Path, help="file to write (default: standard output)")
    ex.add_argument("--captures", type=Path, help="capture directory (default: $LLM_CAPTURE_DIR or .state/captures)")
    ex.set_defaults(fn=cmd_export)

    ls = sub.add_parser("list", help="list recent runs")
    ls.add_argument("--limit", type=positive_int, default=20, help="at most this many (1-1000, default 20)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(fn=cmd_list)
    return p


async def dispatch(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    try:
        client = await connect()
    except PayloadStoreError as err:  # PAYLOAD_STORE* settings: fixable by the user
        fail(str(err), 2, as_json)
    except Exception as err:
        fail(f"cannot reach Temporal at {address()}: {err}", 1, as_json)
    client = traced(client)  # OpenTelemetry, when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        return int(await args.fn(client, args))
    except (UsageError, session.SessionError, debug.Refused) as err:
        fail(str(err), 2, as_json)
    except session.NoWorker as err:
        fail(str(err), session.NO_WORKER, as_json)
    except WorkflowAlreadyStartedError:
        fail(f"a run with id '{args.id}' is already running", 2, as_json)
    except RPCError as err:
        if err.status == RPCStatusCode.ALREADY_EXISTS:
            fail(f"a run with that id already exists ({err.message})", 2, as_json)
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            fail(f"Temporal refused the request: {err.message}", 2, as_json)
        if err.status in session.DEADLINE:  # no answer in time
            fail(
                f"no answer in time (Temporal said: {err.message}). Reading a run needs a worker on its task "
                "queue: is `python worker.py` running? A worker that has just stopped holds its runs' reads "
                "for about 10 s; ask again.",
                1,
                as_json,
            )
        fail(f"Temporal said: {err.message}", 1, as_json)
    except BrokenPipeError:
        raise  # the reader has gone (`client.py list | head`): main() ends quietly
    except Exception as err:  # never a traceback: one line that says what went wrong
        if encrypted(err):
            fail(
                f"the run's payloads are encrypted and this client has no keys: set {codec.ENV} to the keys its "
                "workers use (ID:BASE64KEY, comma-separated; durable_agent_runner/payloads/codec.py)",
                2,
                as_json,
            )
        fail(f"{type(err).__name__}: {err}", 1, as_json)


def encrypted(err: BaseException | None) -> bool:
    """Whether reading failed on a payload our codec encrypted, for want of its keys."""
    while err is not None:
        if codec.ENCODING.decode() in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def check_text(args: argparse.Namespace) -> None:
    """Arguments that are not valid UTF-8 (the shell passes raw bytes) cannot be sent anywhere."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise UsageError(f"{name.replace('_', '-')} is not valid UTF-8 text") from None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ClientSettings.load()  # every variable the client reads, checked before anything else
    except SettingsError as err:
        fail(str(err), 2, "--json" in (sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(argv)
    try:
        check_text(args)
        if args.command == "run":
            args.settings = model_settings(args)
        if args.command == "codec-server":  # needs only the keys, not Temporal
            return codec_server.cmd_codec_server(args)
        return asyncio.run(dispatch(args))
    except UsageError as err:
        fail(str(err), 2, bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as exit:  # fail() and argparse end this way
        code = exit.code if isinstance(exit.code, int) else 1
    except BrokenPipeError:  # whoever read our output stopped reading (`| head`): nothing left to say
        code = 0
    flush_telemetry()  # before os._exit, which skips the exporter's own exit hook
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the Temporal SDK's native runtime can abort the process while
    # its threads wind down after an early exit, turning a clean exit code into SIGABRT.
    os._exit(code)
