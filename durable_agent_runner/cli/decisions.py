"""`client.py approve` and `reject`: decide a tool call that waits for a person, through the
Python client's `RunHandle.approve` / `reject` (a repeat of the same decision counts once)."""

from __future__ import annotations

import argparse

from temporalio.client import Client

from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client.agent_client import AgentClient


async def cmd_decide(client: Client, args: argparse.Namespace) -> int:
    approve = args.command == "approve"
    edited = None
    if approve and args.args is not None:
        try:
            edited = json_object(args.args, "--args", "a JSON object of the tool's arguments")
        except ValueError as err:
            raise UsageError(str(err)) from None
    run = AgentClient(client).get(args.run_id)
    if approve:  # a refusal: "run R refused it: why", exit code 2; no worker in time: exit code 3
        receipt = await run.approve(args.call_id, edited, by=args.by, always=args.always, wait=args.worker_wait)
    else:
        receipt = await run.reject(args.call_id, args.reason, by=args.by, wait=args.worker_wait)
    done = "approved" if receipt.approved else "rejected"
    text = f"{args.call_id} {done} by {args.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    emit(args.json, {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}, text)
    return 0
