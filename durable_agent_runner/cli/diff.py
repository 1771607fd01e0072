"""`client.py diff RUN_A RUN_B [--json]`: where two runs diverge (a fork and its origin, or any
two), as the Python client's `AgentClient.diff` finds it (durable_agent_runner/client/diff.py),
printed from the first differing turn on, one line a message."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import TypeAdapter

from durable_agent_runner.cli.args import RUN_ID, run_id
from durable_agent_runner.cli.common import for_terminal
from durable_agent_runner.cli.debug import item_line
from durable_agent_runner.cli.session import add_read_wait
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.diff import RunDiff
from durable_agent_runner.workflows import types as t

SHOWN = 40  # messages printed per side from the first difference (--json has them all)
MESSAGE: TypeAdapter[t.Message] = TypeAdapter(t.Message)


def render(diff: RunDiff) -> str:
    first = diff.first_difference
    lines = []
    for name, side in (("A", diff.a), ("B", diff.b)):
        link = f"; {side.forked_from}" if side.forked_from else ""
        size = f"{side.messages} messages, {side.model_calls} model calls"
        lines.append(f"{name}  {side.run_id}  ({size}{link})")
    if first is None:
        return "\n".join([*lines, f"same: {diff.same_turns} turn(s), {diff.same_messages} messages"])
    if diff.same_turns or diff.same_messages:
        lines.append(f"same through turn {diff.same_turns} ({diff.same_messages} messages)")
    else:
        lines.append("nothing the same: they differ from their first turn")
    lines.append(f"first difference: turn {first}")
    for name, side in (("A", diff.a), ("B", diff.b)):
        lines += ["", f"{name} from turn {first}:"]
        parts = [[MESSAGE.validate_python(m) for m in part["messages"]] for part in side.from_difference]
        if not parts:
            lines.append("  (nothing: this run ends before it)")
        shown, rest = 0, sum(len(part) for part in parts)
        for number, part in enumerate(parts, start=first):
            if shown >= SHOWN:
                break
            lines.append(f"  turn {number}")
            for m in part[: SHOWN - shown]:
                lines.append(f"    {item_line(m)}")
                shown += 1
        if rest > shown:
            lines.append(f"  … {rest - shown} more message(s) (--json has them all)")
    return "\n".join(lines)


async def cmd_diff(client: AgentClient, args: argparse.Namespace) -> int:
    diff = await client.diff(args.run_a, args.run_b, wait=args.worker_wait)
    if args.json:
        print(
            json.dumps(
                diff.model_dump(mode="json", exclude={"a": {"forked_from"}, "b": {"forked_from"}}),
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        print(for_terminal(render(diff), sys.stdout))
    return 0


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    diff = sub.add_parser("diff", help="where two runs diverge (a fork and its origin): the first differing turn on")
    diff.add_argument("run_a", type=run_id, help=f"one run: {RUN_ID} (a fork's origin, say)")
    diff.add_argument("run_b", type=run_id, help="the other run (the fork, say)")
    diff.add_argument("--json", action="store_true", help="print JSON: both sides' messages from the difference")
    add_read_wait(diff)
    diff.set_defaults(fn=cmd_diff)
