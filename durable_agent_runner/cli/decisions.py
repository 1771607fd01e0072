"""`client.py approve` and `reject`: decide a tool call that waits for a person; `resolve`: decide a
call in doubt (a `once` tool's attempt that ended without a result). Each goes through the run's
validated update (a repeat of the same decision counts once)."""

from __future__ import annotations

import argparse
from typing import Literal

from temporalio.client import Client

from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.stuck import unserved_soon
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.bounds import OutsideDataError, parse_json


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
    receipt = await decide(client, args.run_id, decision, args.worker_wait)
    done = "approved" if receipt.approved else "rejected"
    text = f"{args.call_id} {done} by {args.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    # An approved call that no worker takes (none serves its agent's version) is said now, not sat on.
    waits = await unserved_soon(client, client.get_workflow_handle(args.run_id)) if receipt.approved else []
    text += "".join(f"\nstalled: {wait['message']}" for wait in waits)
    body = {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}
    emit(args.json, body | ({"unserved": waits} if waits else {}), text)
    return 0


async def decide(client: Client, run_id: str, decision: t.ApprovalDecision, wait: float) -> t.DecisionReceipt:
    """Record a person's decision on a waiting call (the CLI's and the console's), through the
    Python client: RunNotFound, DecisionRefused (the run's reason), NoWorkerAnswered within `wait`."""
    run = AgentClient(client).get(run_id)
    if decision.approve:
        return await run.approve(
            decision.call_id, decision.arguments, by=decision.by, always=decision.always, wait=wait
        )
    return await run.reject(decision.call_id, decision.reason, by=decision.by, wait=wait)


async def cmd_resolve(client: Client, args: argparse.Namespace) -> int:
    """`resolve RUN_ID CALL_ID --rerun | --result JSON | --fail REASON`: a person's decision on a
    call in doubt, through the Python client (`RunHandle.resolve`, as the console's). Refused
    (exit 2) unless the call is in doubt now."""
    action: Literal["rerun", "result", "fail"] = (
        "rerun" if args.rerun else "result" if args.result is not None else "fail"
    )
    if args.result is not None:
        try:
            parse_json(args.result)
        except OutsideDataError as err:
            raise UsageError(
                f"--result is not valid JSON: {err}" if err.bound is None else f"--result is {err}"
            ) from None
    run = AgentClient(client).get(args.run_id)
    try:
        receipt = await run.resolve(
            args.call_id, action, args.result, args.fail or "", by=args.by, wait=args.worker_wait
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    words = {"rerun": "runs again", "result": "has the given result", "fail": "is told the model as failed"}
    text = (
        f"{args.call_id} {words[receipt.action]}: resolved by {receipt.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    )
    emit(args.json, {"run_id": args.run_id, **receipt.model_dump(mode="json")}, text)
    return 0
