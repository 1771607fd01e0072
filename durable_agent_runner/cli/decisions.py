"""`client.py approve` and `reject`: decide a tool call that waits for a person, through the
run's validated update (a repeat of the same decision counts once)."""

from __future__ import annotations

import argparse

from temporalio.client import Client, WorkflowExecutionStatus

from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import UsageError, emit, existing
from durable_agent_runner.workflows import types as t


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
    emit(args.json, {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}, text)
    return 0


async def decide(client: Client, run_id: str, decision: t.ApprovalDecision, wait: float) -> t.DecisionReceipt:
    """Record a person's decision on a waiting call through the run's validated update (also the
    console's). Unknown run: UsageError; a refusal (no such call waiting, arguments the tool's
    schema refuses): SessionError with the run's reason; no worker within `wait`: NoWorker."""
    handle, desc = await existing(client, run_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise UsageError(f"run {run_id} has already finished: no call of it is pending")
    # The update id makes a repeated decision count once: Temporal answers it with the first's result.
    verdict = "approve" if decision.approve else "reject"
    receipt: t.DecisionReceipt = await session.update(  # a refusal: "run R refused it: why", exit code 2
        handle,
        t.APPROVAL_UPDATE,
        decision,
        t.DecisionReceipt,
        "no call of it is pending",
        wait=wait,
        update_id=f"{verdict}-{decision.call_id}",
    )
    return receipt
