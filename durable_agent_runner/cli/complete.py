"""`client.py complete RUN_ID CALL_ID --result JSON | --fail REASON`: an outside system's completion
of a call waiting for one (`@tool(completes="outside")`), through the Python client
(`RunHandle.complete_call`, as the completion URL's ingress). The run refuses (exit 2, nothing
recorded) a result that is not JSON or not of the tool's result type, a call not waiting for a
completion and one already completed; the same completion sent again counts once."""

from __future__ import annotations

import argparse
from typing import Any

from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import add_ids, by_flag, json_result
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.machine import bounds


def add_parser(sub: argparse._SubParsersAction[Any], who: str) -> None:
    cmd = sub.add_parser("complete", help="complete a call that waits for an outside completion")
    add_ids(cmd, call="the call waiting for an outside system")
    how = cmd.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--result", type=json_result, metavar="JSON", help="what the work came to: JSON of the tool's result type"
    )
    how.add_argument("--fail", metavar="REASON", help="the work failed: the model is told this reason")
    cmd.add_argument("--by", type=by_flag, default=who, help="who completes it (default: %(default)s)")
    cmd.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(cmd)
    cmd.set_defaults(fn=cmd_complete)


async def cmd_complete(client: AgentClient, args: argparse.Namespace) -> int:
    result = None
    if args.result is not None:
        result = bounds.parse_json(args.result)  # checked before connecting (cli/args.json_result)
        if result is None:
            raise UsageError("--result is null: give a value, or --fail REASON")
    try:
        receipt = await client.get(args.run_id).complete_call(
            args.call_id, result, fail=args.fail, by=args.by, wait=args.worker_wait
        )
    except checks.BadArgument as err:
        raise UsageError(str(err)) from None
    what = "completed" if receipt.outcome == "result" else "failed"
    text = f"{args.call_id} {what} by {receipt.by} at {receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    emit(args.json, {"run_id": args.run_id, **receipt.model_dump(mode="json")}, text)
    return 0
