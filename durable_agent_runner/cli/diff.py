"""`client.py diff RUN_A RUN_B [--json]`: where two runs diverge (a fork and its origin, or any two).

Each run's transcript is read by query (a worker answers it, for finished runs too) and cut into
turns: turn k is what model call k read that the call before it had not (the prompt, tool
results, a message added by a fork or an edit) and the reply it gave. The first turn whose
messages differ is printed, then both sides' messages from there, one line each. Messages are
compared by what the model reads (role, text, each call's tool and arguments, each result),
not by call ids, which a fork numbers on its own.
"""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli.debug import Refused, item_line, query_run
from durable_agent_runner.cli.session import add_read_wait
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.bounds import json_object

SHOWN = 40  # messages printed per side from the first difference (--json has them all)


def turns(messages: list[t.Message]) -> list[list[t.Message]]:
    """The transcript cut after each reply; a last part without one is what the next call reads."""
    out: list[list[t.Message]] = [[]]
    for m in messages:
        out[-1].append(m)
        if isinstance(m, t.AssistantMessage):
            out.append([])
    return out if out[-1] else out[:-1]


def key(m: t.Message) -> tuple[object, ...]:
    """What the model reads of a message: equal keys, same message."""
    if isinstance(m, t.AssistantMessage):
        return ("assistant", m.content or "", tuple((c.name, _arguments(c.arguments)) for c in m.tool_calls))
    if isinstance(m, t.ToolMessage):
        return ("tool", m.name, m.content, m.is_error)
    return ("user", m.content)


def _arguments(raw: str) -> str:
    parsed = json_object(raw)
    return raw if parsed is None else json.dumps(parsed, sort_keys=True, ensure_ascii=False)


def first_difference(a: list[list[t.Message]], b: list[list[t.Message]]) -> int | None:
    """The number of the first turn that differs (from 1); None when the transcripts are the same."""
    for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if [key(m) for m in x] != [key(m) for m in y]:
            return number
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def compare(a_id: str, a: list[t.Message], b_id: str, b: list[t.Message]) -> dict[str, Any]:
    """The diff as data (what --json prints)."""
    ta, tb = turns(a), turns(b)
    first = first_difference(ta, tb)
    same = (first - 1) if first is not None else len(ta)

    def side(run_id: str, parts: list[list[t.Message]], messages: list[t.Message]) -> dict[str, Any]:
        rest = [
            {"turn": n, "messages": [m.model_dump(mode="json", exclude={"approval"}) for m in part]}
            for n, part in enumerate(parts, start=1)
            if first is not None and n >= first
        ]
        replies = sum(isinstance(m, t.AssistantMessage) for m in messages)
        return {"run_id": run_id, "messages": len(messages), "model_calls": replies, "from_difference": rest}

    return {
        "a": side(a_id, ta, a),
        "b": side(b_id, tb, b),
        "same_turns": same,
        "same_messages": sum(len(part) for part in ta[:same]),
        "first_difference": first,
    }


def render(diff: dict[str, Any], a: list[t.Message], b: list[t.Message], links: dict[str, str]) -> str:
    first = diff["first_difference"]
    lines = []
    for name, side in (("A", diff["a"]), ("B", diff["b"])):
        link = f"; {links[side['run_id']]}" if side["run_id"] in links else ""
        size = f"{side['messages']} messages, {side['model_calls']} model calls"
        lines.append(f"{name}  {side['run_id']}  ({size}{link})")
    if first is None:
        return "\n".join([*lines, f"same: {diff['same_turns']} turn(s), {diff['same_messages']} messages"])
    lines.append(f"same through turn {diff['same_turns']} ({diff['same_messages']} messages)")
    lines.append(f"first difference: turn {first}")
    for name, messages in (("A", a), ("B", b)):
        lines += ["", f"{name} from turn {first}:"]
        parts = turns(messages)[first - 1 :]
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


async def _transcript(client: Client, run_id: str, wait: timedelta) -> tuple[list[t.Message], str | None]:
    """The run's transcript, and what it was forked from (its memo); an unknown id is refused."""
    handle = client.get_workflow_handle(run_id)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Refused(f"no run with id '{run_id}'") from None
        raise
    link = (await desc.memo()).get("forked_from")
    fork = None
    if isinstance(link, dict) and "run_id" in link:
        fork = f"fork of {link['run_id']} before model call {link.get('turn')}"
        fork += ", its earlier calls run again" if link.get("live_tools") else ""
    read: t.Transcript = await query_run(
        client, run_id, t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript, wait=wait
    )
    return read.messages, fork


async def cmd_diff(client: Client, args: argparse.Namespace) -> int:
    wait = timedelta(seconds=args.worker_wait)
    a, a_link = await _transcript(client, args.run_a, wait)
    b, b_link = await _transcript(client, args.run_b, wait)
    diff = compare(args.run_a, a, args.run_b, b)
    if args.json:
        print(json.dumps(diff, indent=2, ensure_ascii=False))
    else:
        links = {run: link for run, link in ((args.run_a, a_link), (args.run_b, b_link)) if link}
        print(render(diff, a, b, links))
    return 0


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    diff = sub.add_parser("diff", help="where two runs diverge (a fork and its origin): the first differing turn on")
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    diff.add_argument("--json", action="store_true", help="print JSON: both sides' messages from the difference")
    add_read_wait(diff)
    diff.set_defaults(fn=cmd_diff)
