"""`client.py approve` and `reject`: decide a tool call that waits for a person; `resolve`: decide a
call in doubt (a `once` tool's attempt that ended without a result). Each goes through the run's
validated update (a repeat of the same decision counts once)."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pydantic
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.common import UsageError, emit, existing
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.updates import update
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
    emit(args.json, {"run_id": args.run_id, "call_id": args.call_id, **receipt.model_dump(mode="json")}, text)
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
    call in doubt. Refused (exit 2) unless the call is in doubt now."""
    action = "rerun" if args.rerun else "result" if args.result is not None else "fail"
    if args.result is not None:
        try:
            parse_json(args.result)
        except OutsideDataError as err:
            raise UsageError(
                f"--result is not valid JSON: {err}" if err.bound is None else f"--result is {err}"
            ) from None
    try:
        decision = t.ResolveCall(
            call_id=args.call_id, action=action, result=args.result, reason=args.fail or "", by=args.by
        )
    except pydantic.ValidationError as err:
        raise UsageError(f"resolve: {err.errors(include_url=False)[0]['msg']}") from None
    handle, desc = await existing(client, args.run_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise UsageError(f"run {args.run_id} has already finished: no call of it is in doubt")
    # The update id makes a repeat count once; a call in doubt again after a rerun is a new decision.
    doubt = None
    try:
        live: t.RunStatus = await handle.query(
            t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=timedelta(seconds=min(args.worker_wait, 5))
        )
        doubt = next((d.doubt for d in live.in_doubt if d.call_id == args.call_id), None)
    except (RPCError, WorkflowQueryFailedError):
        pass  # no worker answers: the update below says so (NoWorker)
    if doubt is not None:
        decision.doubt = doubt
    receipt: t.ResolveReceipt = await update(  # a refusal: "run R refused it: why", exit code 2
        handle,
        t.RESOLVE_UPDATE,
        decision,
        t.ResolveReceipt,
        "no call of it is in doubt",
        wait=args.worker_wait,
        update_id=f"resolve-{args.call_id}-{doubt or 0}",
    )
    words = {"rerun": "runs again", "result": "has the given result", "fail": "is told the model as failed"}
    text = (
        f"{args.call_id} {words[receipt.action]}: resolved by {receipt.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    )
    emit(args.json, {"run_id": args.run_id, **receipt.model_dump(mode="json")}, text)
    return 0
