"""`client.py send` and `end`: talk to a session run through the Python client's `SessionHandle`,
and print one message's answer (also for `result --message K`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from durable_agent_runner.cli.budget import raise_hint
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import StillRunning
from durable_agent_runner.workflows import types as t


def gap_note(run_id: str) -> Callable[[str, int], None]:
    """While an answer is awaited, one line on stderr when reads start going unanswered."""

    def note(said: str, in_a_row: int) -> None:
        if in_a_row == 1:
            print(f"run {run_id}: {said}; waiting on (is a worker running?)", file=sys.stderr)

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
        hint = raise_hint(ex.error.partition(":")[0], run_id)
        emit(as_json, obj, f"message {message} failed: {ex.error}" + (f"\n{hint}" if hint else ""), error=True)
        return 1
    text = json.dumps(ex.output_object, indent=2, ensure_ascii=False) if ex.output_object is not None else ex.output
    emit(as_json, obj, text or "")
    return 0


async def cmd_send(client: AgentClient, args: argparse.Namespace) -> int:
    text = args.text  # read before connecting (main)
    run = client.get_session(args.run_id)
    try:
        receipt = await run.send(text, by=args.by, message_id=args.message_id, wait=args.worker_wait)
    except ValueError as err:  # too long
        raise UsageError(str(err).removeprefix("text: ")) from None
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
    try:  # at most the client's own bound (an hour): then what the run waits for, exit 1
        exchange = await run.exchange(receipt.message, gap_note(args.run_id))
    except StillRunning as err:
        emit(args.json, {"run_id": args.run_id, "message": receipt.message, "output": None}, str(err), error=True)
        return 1
    return print_exchange(args.run_id, receipt.message, exchange, args.json)


async def cmd_end(client: AgentClient, args: argparse.Namespace) -> int:
    receipt = await client.get_session(args.run_id).end(args.reason, by=args.by, wait=args.worker_wait)
    left = f"; {receipt.unanswered} message(s) still to answer first" if receipt.unanswered else ""
    emit(
        args.json,
        {"run_id": args.run_id, **receipt.model_dump()},
        f"ending {args.run_id} after {receipt.messages} message(s){left}",
    )
    return 0
