"""`client.py pause | resume | inspect | edit | fork`: a debugger for agent runs (`diff`: diff.py).

A run pauses at a safe point (before a model call, or before the tool calls a reply asked for),
holds still durably, and can be inspected and edited (each edit validated by the run, refused
with a reason and nothing recorded when invalid) before it resumes. `fork` starts a new run from
the state just before model call N of any run, finished or not: it reuses the results of the
turns before N from the transcript (nothing runs again), unless `--live-tools` asks it to run
their tool calls and child runs again first (workflows/rerun.py).
"""

from __future__ import annotations

import argparse
import json
import re
import uuid
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.budget import budget_raise
from durable_agent_runner.cli.session import READ_TIMEOUT, SessionError, add_read_wait, add_wait, update
from durable_agent_runner.workflows import types as t

Refused = SessionError  # the run refused, or there is no such run: one line, exit code 2


async def _update(
    client: Client, run_id: str, name: str, body: Any, result_type: type[Any], wait: float | None = None
) -> Any:
    after_end = f"fork it to go on: client.py fork {run_id} --at-turn N"
    return await update(client.get_workflow_handle(run_id), name, body, result_type, after_end, wait=wait)


async def query_run(
    client: Client, run_id: str, name: str, *args: Any, result_type: type[Any], wait: timedelta = READ_TIMEOUT
) -> Any:
    handle = client.get_workflow_handle(run_id)
    try:
        return await handle.query(name, *args, result_type=result_type, rpc_timeout=wait)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Refused(f"no run with id '{run_id}'") from None
        raise
    except WorkflowQueryFailedError as err:
        raise Refused(str(err.message)) from None


# -------------------------------------------------------------------------------- commands


async def cmd_pause(client: Client, args: argparse.Namespace) -> int:
    status = await pause_run(client, args.run_id, by=args.by, reason=args.reason, wait=args.worker_wait)
    text = f"{args.run_id} pauses at its next safe point (now: {status.phase}, turn {status.turn})"
    _emit(args, {"run_id": args.run_id, "pausing": True, "phase": status.phase, "turn": status.turn}, text)
    return 0


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str) if args.json else text)


async def cmd_resume(client: Client, args: argparse.Namespace) -> int:
    raised = budget_raise(args)
    status = await resume_run(client, args.run_id, by=args.by, wait=args.worker_wait, raised=raised)
    added = " and ".join(
        x for x in (f"+{raised.add_tokens} tokens" if raised.add_tokens else "",
                    f"+${raised.add_usd:g}" if raised.add_usd else "") if x
    )  # fmt: skip
    _emit(
        args,
        {"run_id": args.run_id, "resumed_by": args.by, "phase": status.phase, **raised.model_dump(exclude_none=True)},
        f"{args.run_id} resumed by {args.by}" + (f" (budget raised {added})" if added else ""),
    )
    return 0


async def cmd_inspect(client: Client, args: argparse.Namespace) -> int:
    wait = timedelta(seconds=args.worker_wait)
    view: t.Inspection = await query_run(client, args.run_id, t.INSPECT_QUERY, result_type=t.Inspection, wait=wait)
    if args.json:
        print(json.dumps(view.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    print(render(view))
    return 0


def render(view: t.Inspection) -> str:
    where = "not paused"
    if view.paused is not None:
        point = "model call" if view.paused.where == "before_model" else "the tool calls of turn"
        where = (
            f"paused before {point} {view.paused.turn}: {view.paused.why} (since {view.paused.at:%Y-%m-%d %H:%M:%S})"
        )
    lines = [f"run:     {view.run_id}", f"agent:   {view.agent} (may switch to: {', '.join(view.agents)})"]
    lines += [f"turn:    {view.turn} · {view.phase}", f"state:   {where}", "", "transcript:"]
    for item in view.items:
        lines.append(f"  [{item.index}] {item_line(item.message)}")
    if view.pending_calls:
        lines += ["", "pending calls (run when resumed):"]
        for call in view.pending_calls:
            args = (
                json.dumps(call.arguments, ensure_ascii=False)
                if not isinstance(call.arguments, str)
                else call.arguments
            )
            dropped = f"  (dropped by {call.dropped_by})" if call.dropped_by else ""
            lines.append(f"  {call.call_id}  {call.tool}({args}){dropped}")
    if view.edits:
        lines += ["", "edits:"]
        lines += [f"  {e.at:%Y-%m-%d %H:%M:%S} turn {e.turn}: {e.summary}" for e in view.edits]
    lines += ["", "edit: client.py edit RUN_ID --text I TEXT | --drop I | --insert I ROLE TEXT | --args CALL_ID JSON |"]
    lines += ["      --drop-call CALL_ID | --agent NAME        then: client.py resume RUN_ID"]
    return "\n".join(lines)


def item_line(m: t.Message) -> str:
    def cut(text: str | None, limit: int = 200) -> str:
        text = (text or "").replace("\n", " ")
        return text if len(text) <= limit else text[: limit - 1] + "…"

    if isinstance(m, t.ToolMessage):
        return f"tool      {m.name} ({m.call_id}){' error' if m.is_error else ''}: {cut(m.content)}"
    if isinstance(m, t.AssistantMessage):
        calls = ", ".join(f"{c.name}({cut(c.arguments, 80)}) [{c.call_id}]" for c in m.tool_calls)
        return f"assistant {cut(m.content)}" + (f"  → {calls}" if calls else "")
    note = f" (summary of {m.summary_of} messages)" if m.summary_of else ""
    return f"user{note}      {cut(m.content)}"


def edit_of(args: argparse.Namespace) -> t.Edit:
    """The one edit the flags ask for; several, or none, is a usage error."""
    chosen = [
        name
        for name in ("text", "drop", "insert", "args", "drop_call", "agent")
        if getattr(args, name) not in (None, [])
    ]
    if len(chosen) != 1:
        raise Refused("give exactly one edit: --text, --drop, --insert, --args, --drop-call or --agent")
    op = chosen[0]
    if op == "text":
        index, text = args.text
        return t.Edit(op="text", index=_index(index), text=text, by=args.by)
    if op == "drop":
        return t.Edit(op="drop", index=args.drop, by=args.by)
    if op == "insert":
        index, role, text = args.insert
        if role not in ("user", "assistant"):
            raise Refused(f"--insert ROLE must be user or assistant, not {role!r}")
        return t.Edit(op="insert", index=_index(index), role=role, text=text, by=args.by)
    if op == "args":
        call_id, raw = args.args
        try:
            arguments = json_object(raw, "--args", "a JSON object of the call's arguments")
        except ValueError as err:
            raise Refused(str(err)) from None
        return t.Edit(op="args", call_id=call_id, arguments=arguments, by=args.by)
    if op == "drop_call":
        return t.Edit(op="drop_call", call_id=args.drop_call, by=args.by)
    return t.Edit(op="agent", agent=args.agent, by=args.by)


def _index(text: str) -> int:
    if not re.fullmatch(r"\d{1,9}", text):
        raise Refused(f"an item index is a whole number from 0, not {text!r}")
    return int(text)


async def cmd_edit(client: Client, args: argparse.Namespace) -> int:
    receipt = await edit_run(client, args.run_id, edit_of(args))
    _emit(
        args,
        {"run_id": args.run_id, **receipt.model_dump(mode="json")},
        f"{receipt.summary} ({receipt.items} items now)",
    )
    return 0


async def cmd_fork(client: Client, args: argparse.Namespace) -> int:
    live = bool(getattr(args, "live_tools", False))
    new_id, link, messages = await fork_run(
        client, args.run_id, args.at_turn, args.prompt, args.id, args.task_queue, live_tools=live
    )
    if args.json:
        print(json.dumps({"run_id": new_id, "forked_from": link.model_dump(), "messages": messages}))
    else:
        print(new_id)
    return 0


# ------------------------------------------------- the calls behind them (also the console's)


async def pause_run(
    client: Client, run_id: str, *, by: str, reason: str = "", wait: float | None = None
) -> t.RunStatus:
    status: t.RunStatus = await _update(
        client, run_id, t.PAUSE_UPDATE, t.PauseRequest(by=by, reason=reason), t.RunStatus, wait
    )
    return status


async def resume_run(
    client: Client, run_id: str, *, by: str, wait: float | None = None, raised: t.BudgetRaise | None = None
) -> t.RunStatus:
    """Resume a paused run; `raised`: what a run paused on its budget may spend more (--add-usd/--add-tokens)."""
    request = t.ResumeRequest(by=by, **(raised or t.BudgetRaise()).model_dump())
    status: t.RunStatus = await _update(client, run_id, t.RESUME_UPDATE, request, t.RunStatus, wait)
    return status


async def edit_run(client: Client, run_id: str, edit: t.Edit) -> t.EditReceipt:
    """One edit of a paused run, validated by the run (refused: Refused with its reason)."""
    receipt: t.EditReceipt = await _update(client, run_id, t.EDIT_UPDATE, edit, t.EditReceipt)
    return receipt


async def fork_run(
    client: Client,
    run_id: str,
    at_turn: int,
    prompt: str | None,
    new_id: str | None,
    task_queue: str,
    live_tools: bool = False,
) -> tuple[str, t.ForkLink, int]:
    """Start a new run from the state just before model call `at_turn` of `run_id` (with `prompt`
    added as a user message, when given): its id, its link back, and how many messages it starts with.
    `live_tools`: the calls before the fork point run again (side effects) instead of being reused."""
    if at_turn < 1:
        raise Refused("--at-turn N: model calls are numbered from 1")
    made = await model_calls_made(client, run_id)
    if at_turn > made + 1:  # made + 1: the call a paused run is about to make (the run checks the rest)
        where = f"fork before one of them (1-{made}), or {made + 1} while it waits before that call"
        raise Refused(f"cannot fork before model call {at_turn}: run {run_id} has made {made} model call(s); {where}")
    point: t.ForkPoint = await query_run(
        client, run_id, t.FORK_POINT_QUERY, t.ForkQuery(turn=at_turn), result_type=t.ForkPoint
    )
    messages = list(point.messages)
    if prompt:
        messages.append(t.UserMessage(content=prompt))
    link = t.ForkLink(run_id=run_id, turn=at_turn, live_tools=live_tools)
    carry = t.Carry(
        agent=point.agent,
        current=point.current,
        handoffs=point.handoffs,
        messages=messages,
        turn=point.turn,
        usage=t.Usage(),
        forked_from=link,
        answer_base=point.answer_base,  # a session's answer: its turns count from its start
        live_tools=live_tools,
    )
    new_id = new_id or f"{run_id[:200]}-fork{at_turn}-{uuid.uuid4().hex[:6]}"
    await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(prompt="", agent=point.agent.name, carry=carry),
        id=new_id,
        task_queue=task_queue,
        result_type=t.RunResult,
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(t.SA_AGENT, point.current or point.agent.name),
                SearchAttributePair(t.SA_PHASE, "starting"),
                SearchAttributePair(t.SA_FORKED_FROM, run_id),
            ]
        ),
        memo={"forked_from": link.model_dump()},
        static_summary=f"fork of {run_id} before model call {at_turn}"
        + (", its earlier tool calls run again" if live_tools else ""),
    )
    return new_id, link, len(messages)


async def model_calls_made(client: Client, run_id: str) -> int:
    """How many model calls the run has recorded, from what Temporal holds (its turn search
    attribute and its history's model activities), not from the workflow's own answer: forking
    past the last one would hand the model a reply's tool calls without their results. Both are
    lower bounds (the attribute is written at most once a turn; the history is this execution's),
    so a fork is never let past a call the run made."""
    handle = client.get_workflow_handle(run_id)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Refused(f"no run with id '{run_id}'") from None
        raise
    counted = 0
    name = t.MODEL_CALL_ACTIVITY.encode()
    tools: set[int] = set()  # tool activities asked to bring the next model call's reply (workflows/ahead.py)
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            kind = event.activity_task_scheduled_event_attributes.activity_type.name
            counted += kind == t.MODEL_CALL_ACTIVITY
            payloads = event.activity_task_scheduled_event_attributes.input.payloads
            if kind == t.TOOL_CALL_ACTIVITY and payloads:  # asked to make the next call (small: no result)
                (asked,) = await client.data_converter.decode(payloads, [t.ToolCallInput])
                if isinstance(asked, t.ToolCallInput) and asked.then is not None:
                    tools.add(event.event_id)
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            if done.scheduled_event_id in tools and done.result.payloads:
                result = (await client.data_converter.decode(done.result.payloads, [t.ToolResult]))[0]
                counted += isinstance(result, t.ToolResult) and result.ahead is not None
        elif event.HasField("marker_recorded_event_attributes"):  # a local activity's record names its type
            data = event.marker_recorded_event_attributes.details.get("data")
            counted += bool(data and any(name in p.data for p in data.payloads))
    return max(counted, desc.typed_search_attributes.get(t.SA_TURN) or 0)


def add_parsers(sub: argparse._SubParsersAction[Any], who: str) -> None:
    pause = sub.add_parser("pause", help="pause a run at its next safe point (before a model or tool call)")
    pause.add_argument("run_id")
    pause.add_argument("--reason", default="", help="shown in status and inspect")
    pause.add_argument("--by", default=who, help="who pauses it (default: %(default)s)")
    pause.add_argument("--json", action="store_true", help="print JSON")
    add_wait(pause)
    pause.set_defaults(fn=cmd_pause)
    resume = sub.add_parser("resume", help="resume a paused run, with any edits")
    resume.add_argument("run_id")
    resume.add_argument("--by", default=who, help="who resumes it (default: %(default)s)")
    resume.add_argument("--add-usd", type=float, metavar="X", help="raise a cost budget by X US dollars, then go on")
    resume.add_argument("--add-tokens", type=int, metavar="N", help="raise a token budget by N tokens, then go on")
    resume.add_argument("--json", action="store_true", help="print JSON")
    add_wait(resume)
    resume.set_defaults(fn=cmd_resume)
    inspect = sub.add_parser(
        "inspect", help="a paused run's state: transcript items with indexes, pending calls, edits"
    )
    inspect.add_argument("run_id")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    add_read_wait(inspect)
    inspect.set_defaults(fn=cmd_inspect)
    edit = sub.add_parser("edit", help="edit a paused run (one edit; validated, recorded with who and when)")
    edit.add_argument("run_id")
    edit.add_argument("--text", nargs=2, metavar=("INDEX", "TEXT"), help="replace an item's text")
    edit.add_argument("--drop", type=int, metavar="INDEX", help="drop an item (a call's message takes its results)")
    edit.add_argument("--insert", nargs=3, metavar=("INDEX", "ROLE", "TEXT"), help="insert a user or assistant message")
    edit.add_argument("--args", nargs=2, metavar=("CALL_ID", "JSON"), help="change a pending call's arguments")
    edit.add_argument("--drop-call", metavar="CALL_ID", help="drop a pending call (the model is told)")
    edit.add_argument("--agent", metavar="NAME", help="switch the agent in charge to one the run froze")
    edit.add_argument("--by", default=who, help="who edits (default: %(default)s)")
    edit.add_argument("--json", action="store_true", help="print JSON")
    edit.set_defaults(fn=cmd_edit)
    fork = sub.add_parser("fork", help="start a new run from the state just before model call N of a run")
    fork.add_argument("run_id")
    fork.add_argument("--at-turn", type=int, required=True, metavar="N", help="fork just before model call N")
    fork.add_argument("--prompt", help="add this user message at the fork point")
    fork.add_argument("--id", help="the new run's id (default: generated)")
    fork.add_argument(
        "--live-tools",
        action="store_true",
        help="run the tool calls and child runs of turns 1..N-1 again (their SIDE EFFECTS happen again) "
        "and use the fresh results; default: reuse the recorded ones",
    )
    fork.add_argument("--json", action="store_true", help="print JSON")
    fork.set_defaults(fn=cmd_fork)
