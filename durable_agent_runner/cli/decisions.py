"""`client.py approve` and `reject`: decide a tool call that waits for a person; `resolve`: decide a
call in doubt (a `once` tool's attempt that ended without a result). Each goes through the Python
client's `RunHandle` (the run's validated update: a repeat of the same decision counts once)."""

from __future__ import annotations

import argparse
from typing import Literal

from temporalio.service import RPCError

from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.handles import RunHandle


async def cmd_decide(client: AgentClient, args: argparse.Namespace) -> int:
    approve = args.command == "approve"
    run = client.get(args.run_id)
    try:
        if approve:
            edited = args.args  # a JSON object, read before connecting (cli/args.call_arguments)
            receipt = await run.approve(args.call_id, edited, by=args.by, always=args.always, wait=args.worker_wait)
        else:
            receipt = await run.reject(args.call_id, args.reason, by=args.by, wait=args.worker_wait)
    except checks.BadArgument as err:
        raise UsageError(f"--{err}" if err.field == "reason" else str(err)) from None
    done = "approved" if receipt.approved else "rejected"
    text = f"{args.call_id} {done} by {args.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    # An approved call that no worker takes (none serves its agent's version) is said now, not sat on.
    waits = await unserved(run) if receipt.approved else []
    text += "".join(f"\nstalled: {wait['message']}" for wait in waits)
    body = {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}
    emit(args.json, body | ({"unserved": waits} if waits else {}), text)
    return 0


async def unserved(run: RunHandle) -> list[dict[str, str]]:
    """`RunHandle.unserved` after an approval; a look the server did not answer in time says nothing
    (the approval stands: `status` looks again)."""
    try:
        return await run.unserved()
    except (RPCError, TimeoutError):
        return []


async def cmd_resolve(client: AgentClient, args: argparse.Namespace) -> int:
    """`resolve RUN_ID CALL_ID --rerun | --result JSON | --fail REASON`: a person's decision on a
    call in doubt, through the Python client (`RunHandle.resolve`, as the console's). Refused
    (exit 2) unless the call is in doubt now."""
    action: Literal["rerun", "result", "fail"] = (
        "rerun" if args.rerun else "result" if args.result is not None else "fail"
    )
    try:
        receipt = await client.get(args.run_id).resolve(
            args.call_id, action, args.result, args.fail or "", by=args.by, wait=args.worker_wait
        )
    except checks.BadArgument as err:
        raise UsageError(f"--fail: {err.reason}" if err.field == "reason" else str(err)) from None
    words = {"rerun": "runs again", "result": "has the given result", "fail": "is told the model as failed"}
    text = (
        f"{args.call_id} {words[receipt.action]}: resolved by {receipt.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    )
    emit(args.json, {"run_id": args.run_id, **receipt.model_dump(mode="json")}, text)
    return 0
