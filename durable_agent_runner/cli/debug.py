"""`client.py pause | resume | inspect | edit | fork`: a debugger for agent runs (`diff`: diff.py),
over the Python client's `RunHandle` (durable_agent_runner/client/control.py says what each does).

A run pauses at a safe point (before a model call, or before the tool calls a reply asked for),
holds still durably, and can be inspected and edited (each edit validated by the run, refused
with a reason and nothing recorded when invalid) before it resumes. `fork` starts a new run from
the state just before model call N of any run, finished or not: it reuses the results of the
turns before N from the transcript (nothing runs again), unless `--live-tools` asks it to run
their tool calls and child runs again first (machine/rerun.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from durable_agent_runner.cli.args import add_ids, agent_name, bounded, by_flag, integer, new_id, reason_of
from durable_agent_runner.cli.budget import budget_raise, raised_words
from durable_agent_runner.cli.common import UsageError, add_budget_flags, for_terminal
from durable_agent_runner.cli.session import add_read_wait, add_wait
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.control import make_edit
from durable_agent_runner.client.errors import cli
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types.budget import MAX_RAISE_TOKENS, MAX_RAISE_USD

# -------------------------------------------------------------------------------- commands


async def cmd_pause(client: AgentClient, args: argparse.Namespace) -> int:
    status = await client.get(args.run_id).pause(args.reason, by=args.by, wait=args.worker_wait)
    text = f"{args.run_id} pauses at its next safe point (now: {status.phase}, turn {status.turn})"
    _emit(args, {"run_id": args.run_id, "pausing": True, "phase": status.phase, "turn": status.turn}, text)
    return 0


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str) if args.json else for_terminal(text, sys.stdout))


async def cmd_resume(client: AgentClient, args: argparse.Namespace) -> int:
    raised = budget_raise(args)
    status = await client.get(args.run_id).resume(
        by=args.by, add_tokens=raised.add_tokens, add_usd=raised.add_usd, wait=args.worker_wait
    )
    added = raised_words(raised)
    _emit(
        args,
        {"run_id": args.run_id, "resumed_by": args.by, "phase": status.phase, **raised.model_dump(exclude_none=True)},
        f"{args.run_id} resumed by {args.by}" + (f" (budget raised {added})" if added else "")
        if not added or status.phase != t.Phase.WAITING_FOR_MESSAGE
        else f"{args.run_id}: budget raised {added} by {args.by}; the session waits for its next message",
    )
    return 0


async def cmd_inspect(client: AgentClient, args: argparse.Namespace) -> int:
    view = await client.get(args.run_id).inspect(wait=args.worker_wait)
    if args.json:
        print(json.dumps(view.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    print(for_terminal(render(view), sys.stdout))
    return 0


def render(view: t.Inspection) -> str:
    where = "not paused"
    if view.paused is not None:
        point = "model call" if view.paused.where == "before_model" else "the tool calls of turn"
        where = (
            f"paused before {point} {view.paused.turn}: {view.paused.why} (since {view.paused.at:%Y-%m-%d %H:%M:%S})"
        )
    others = [a for a in view.agents if a != view.agent]  # `edit --agent` hands the run to one of them
    switch = f" (may switch to: {', '.join(others)})" if others else ""
    lines = [f"run:     {view.run_id}", f"agent:   {view.agent}{switch}"]
    lines += [f"turn:    {view.turn} · {view.phase}", f"state:   {where}", "", "transcript:"]
    for item in view.items:
        lines.append(f"  [{item.index}] {item_line(item.message)}")
    if view.pending_calls:
        lines += ["", "pending calls (when resumed, each goes on as any call: approved first, if its tool asks):"]
        for call in view.pending_calls:
            args = (
                json.dumps(call.arguments, ensure_ascii=False)
                if not isinstance(call.arguments, str)
                else call.arguments
            )
            dropped = f"  (dropped by {call.dropped_by})" if call.dropped_by else ""
            lines.append(f"  {call.call_id}  {call.tool}({args}){dropped}")
    run = view.run_id
    if view.edits:
        lines += ["", "edits:"]
        lines += [f"  {e.at:%Y-%m-%d %H:%M:%S} turn {e.turn}: {e.summary}" for e in view.edits]
    if view.paused is not None:
        lines += ["", f"edit: {cli(f'edit {run}')} --text I TEXT | --drop I | --insert I ROLE TEXT |"]
        lines += [f"      --args CALL_ID JSON | --drop-call CALL_ID | --agent NAME   then: {cli(f'resume {run}')}"]
    elif view.phase in t.ENDED_STATUSES:
        lines += ["", f"ended: it takes no edits; {cli(f'fork {run}')} --at-turn N starts a run before model call N"]
    else:  # the run refuses an edit until it is paused
        lines += ["", f"to edit: {cli(f'pause {run}')} (it pauses at its next safe point), then edit, then resume"]
    return "\n".join(lines)


def item_line(m: t.Message) -> str:
    def cut(text: str | None, limit: int = 200) -> str:
        text = (text or "").replace("\n", " ")
        return text if len(text) <= limit else text[: limit - 1] + "…"

    if isinstance(m, t.ToolMessage):  # an error the run wrote says so itself ("error: tool 'x' failed …")
        flag = " error" if m.is_error and not m.content.startswith("error:") else ""
        return f"tool      {m.name} ({m.call_id}){flag}: {cut(m.content)}"
    if isinstance(m, t.AssistantMessage):
        calls = ", ".join(f"{c.name}({cut(c.arguments, 80)}) [{c.call_id}]" for c in m.tool_calls)
        return f"assistant {cut(m.content)}" + (f"  → {calls}" if calls else "")
    note = f" (summary of {m.summary_of} messages)" if m.summary_of else ""
    return f"user{note}      {cut(m.content)}"


def edit_of(args: argparse.Namespace) -> t.Edit:
    """The one edit the flags ask for (the client's `make_edit`); several, or none, is a usage error."""
    try:
        return make_edit(
            text=tuple(args.text) if args.text else None,
            drop=args.drop,
            insert=tuple(args.insert) if args.insert else None,
            args=tuple(args.args) if args.args else None,
            drop_call=args.drop_call,
            agent=args.agent,
            by=args.by,
        )
    except checks.BadArgument as err:
        if not err.field:
            flags = "--text, --drop, --insert, --args, --drop-call or --agent"
            raise UsageError(f"give exactly one edit: {flags}") from None
        if err.field == "index":  # the item of --text, --drop or --insert
            given = next(flag for flag in ("text", "drop", "insert") if getattr(args, flag) is not None)
            raise UsageError(f"--{given} INDEX: {err.reason}") from None
        flag = {"agent": "--agent", "call_id": "--args CALL_ID" if args.args else "--drop-call"}.get(err.field)
        if flag is not None:  # the client's field, said as the flag it came from
            raise UsageError(f"{flag}: {err.reason}") from None
        raise UsageError(f"--{err.field} {err.reason}" if err.field == "insert" else str(err)) from None


async def cmd_edit(client: AgentClient, args: argparse.Namespace) -> int:
    receipt = await client.get(args.run_id).edit(args.edit)  # made before connecting (main: edit_of)
    _emit(
        args,
        {"run_id": args.run_id, **receipt.model_dump(mode="json")},
        f"{receipt.summary} ({receipt.items} items now)",
    )
    return 0


async def cmd_fork(client: AgentClient, args: argparse.Namespace) -> int:
    live = bool(getattr(args, "live_tools", False))
    try:
        forked = await client.get(args.run_id).fork(
            args.at_turn, args.prompt, id=args.id, live_tools=live, task_queue=args.task_queue,
            budget_usd=getattr(args, "budget_usd", None), budget_tokens=getattr(args, "budget_tokens", None),
        )  # fmt: skip
    except checks.BadArgument as err:
        raise UsageError.of_flag(err) from None
    if args.json:
        print(json.dumps(forked.model_dump()))
    else:
        print(forked.run_id)
    return 0


def add_parsers(sub: argparse._SubParsersAction[Any], who: str) -> None:
    pause = sub.add_parser("pause", help="pause a run at its next safe point (before a model or tool call)")
    add_ids(pause)
    pause.add_argument("--reason", type=reason_of(t.PauseRequest), default="", help="shown in status and inspect")
    pause.add_argument("--by", type=by_flag, default=who, help="who pauses it (default: %(default)s)")
    pause.add_argument("--json", action="store_true", help="print JSON")
    add_wait(pause)
    pause.set_defaults(fn=cmd_pause)
    resume = sub.add_parser(
        "resume", help="resume a paused run, with any edits; or raise a session's budget between its messages"
    )
    add_ids(resume)
    resume.add_argument("--by", type=by_flag, default=who, help="who resumes it (default: %(default)s)")
    usd, tokens = bounded(float, 1e-9, MAX_RAISE_USD), bounded(int, 1, MAX_RAISE_TOKENS)  # the run's own bounds
    resume.add_argument("--add-usd", type=usd, metavar="X", help="raise a cost budget by X US dollars, then go on")
    resume.add_argument("--add-tokens", type=tokens, metavar="N", help="raise a token budget by N tokens, then go on")
    resume.add_argument("--json", action="store_true", help="print JSON")
    add_wait(resume)
    resume.set_defaults(fn=cmd_resume)
    inspect = sub.add_parser(
        "inspect", help="a paused run's state: transcript items with indexes, pending calls, edits"
    )
    add_ids(inspect)
    inspect.add_argument("--json", action="store_true", help="print JSON")
    add_read_wait(inspect)
    inspect.set_defaults(fn=cmd_inspect)
    edit = sub.add_parser("edit", help="edit a paused run (one edit; validated, recorded with who and when)")
    add_ids(edit)
    edit.add_argument("--text", nargs=2, metavar=("INDEX", "TEXT"), help="replace an item's text")
    edit.add_argument("--drop", type=integer, metavar="INDEX", help="drop an item (a call's message takes its results)")
    edit.add_argument("--insert", nargs=3, metavar=("INDEX", "ROLE", "TEXT"), help="insert a user or assistant message")
    edit.add_argument("--args", nargs=2, metavar=("CALL_ID", "JSON"), help="change a pending call's arguments")
    edit.add_argument("--drop-call", metavar="CALL_ID", help="drop a pending call (the model is told)")
    edit.add_argument(
        "--agent", type=agent_name, metavar="NAME", help="switch the agent in charge to one the run froze"
    )
    edit.add_argument("--by", type=by_flag, default=who, help="who edits (default: %(default)s)")
    edit.add_argument("--json", action="store_true", help="print JSON")
    edit.set_defaults(fn=cmd_edit)
    fork = sub.add_parser("fork", help="start a new run from the state just before model call N of a run")
    add_ids(fork)
    fork.add_argument(
        "--at-turn", type=bounded(int, 1, 10**6), required=True, metavar="N", help="fork just before model call N"
    )
    fork.add_argument("--prompt", help="add this user message at the fork point")
    fork.add_argument("--id", type=new_id, help="the new run's id (default: generated)")
    add_budget_flags(fork, "the new run")
    fork.add_argument(
        "--live-tools",
        action="store_true",
        help="run the tool calls and child runs of turns 1..N-1 again (their SIDE EFFECTS happen again) "
        "and use the fresh results; default: reuse the recorded ones",
    )
    fork.add_argument("--json", action="store_true", help="print JSON")
    fork.set_defaults(fn=cmd_fork)
