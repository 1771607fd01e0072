"""A debugger for runs, in the client (`RunHandle.pause / resume / inspect / edit / fork`, and the
CLI's and the console's verbs of the same names).

A run pauses at a safe point (before a model call, or before the tool calls a reply asked for),
holds still durably, and can be inspected and edited (each edit validated by the run, refused
with a reason and nothing recorded when invalid) before it resumes. A fork starts a new run from
the state just before model call N of any run, finished or not: it reuses the results of the
turns before N from the transcript (nothing runs again), unless `live_tools` asks it to run
their tool calls and child runs again first (machine/rerun.py).
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import checks
from durable_agent_runner.client.errors import DecisionRefused, RunNotFound, cli
from durable_agent_runner.client.updates import LIVE, READ_TIMEOUT, describe, start_new, update
from durable_agent_runner.workflows import types as t


class Forked(BaseModel):
    """A run started by `fork`: its id, where it came from, how many messages it starts with."""

    run_id: str
    forked_from: t.ForkLink
    messages: int


async def query_run(
    client: Client, run_id: str, name: str, *args: Any, result_type: type[Any], wait: timedelta = READ_TIMEOUT
) -> Any:
    """A query of the run: RunNotFound for an unknown id, DecisionRefused when the run refuses it."""
    handle = client.get_workflow_handle(run_id)
    try:
        return await handle.query(name, *args, result_type=result_type, rpc_timeout=wait)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunNotFound(run_id) from None
        raise
    except WorkflowQueryFailedError as err:
        await describe(handle)  # a workflow of another kind has no such query: NotThatKind
        raise DecisionRefused(str(err.message)) from None


async def _update(
    client: Client, run_id: str, name: str, body: Any, result_type: type[Any], wait: float | None = None
) -> Any:
    after_end = f"fork it to go on: {cli()} fork {run_id} --at-turn N"
    return await update(client.get_workflow_handle(run_id), name, body, result_type, after_end, wait=wait)


async def pause(client: Client, run_id: str, *, by: str, reason: str = "", wait: float | None = None) -> t.RunStatus:
    status: t.RunStatus = await _update(
        client, run_id, t.PAUSE_UPDATE, checks.body(t.PauseRequest, by=by, reason=reason), t.RunStatus, wait
    )
    return status


async def resume(
    client: Client, run_id: str, *, by: str, wait: float | None = None, raised: t.BudgetRaise | None = None
) -> t.RunStatus:
    """Resume a paused run; `raised`: what a run paused on its budget may spend more."""
    request = t.ResumeRequest(by=by, **(raised or t.BudgetRaise()).model_dump())
    status: t.RunStatus = await _update(client, run_id, t.RESUME_UPDATE, request, t.RunStatus, wait)
    return status


async def edit(client: Client, run_id: str, change: t.Edit, wait: float | None = None) -> t.EditReceipt:
    """One edit of a paused run, validated by the run (refused: DecisionRefused with its reason)."""
    receipt: t.EditReceipt = await _update(client, run_id, t.EDIT_UPDATE, change, t.EditReceipt, wait)
    return receipt


def item_index(value: object) -> int:
    """A transcript item's index (as `inspect` numbers them): a whole number from 0."""
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]{1,9}", value):  # ASCII only: \d takes any script's digits
            raise checks.BadArgument("index", f"an item index is a whole number from 0, not {value[:40]!r}")
        return int(value)
    return checks.whole(value, "index", 0, 10**9)


def make_edit(
    *,
    text: tuple[object, str] | None = None,
    drop: object = None,
    insert: tuple[object, str, str] | None = None,
    args: tuple[str, dict[str, Any] | str] | None = None,
    drop_call: str | None = None,
    agent: str | None = None,
    by: str = "someone",
) -> t.Edit:
    """Exactly one edit, from the one argument given: `text=(index, text)`, `drop=index`,
    `insert=(index, "user" | "assistant", text)`, `args=(call_id, arguments as a dict or JSON
    text)`, `drop_call=call_id` or `agent=name`. BadArgument if none or several are given."""
    chosen = [
        name
        for name, value in (("text", text), ("drop", drop), ("insert", insert), ("args", args),
                            ("drop_call", drop_call), ("agent", agent))
        if value not in (None, [])
    ]  # fmt: skip
    if len(chosen) != 1:
        raise checks.BadArgument("", "give exactly one edit: text, drop, insert, args, drop_call or agent")
    who = checks.by(by)
    if text is not None:
        index, new = text
        return checks.body(t.Edit, op="text", index=item_index(index), text=checks.string(new, "text"), by=who)
    if drop is not None:
        return checks.body(t.Edit, op="drop", index=item_index(drop), by=who)
    if insert is not None:
        index, role, new = insert
        if role not in ("user", "assistant"):
            raise checks.BadArgument("insert", f"ROLE must be user or assistant, not {role!r}")
        written = checks.string(new, "text")
        return checks.body(t.Edit, op="insert", index=item_index(index), role=role, text=written, by=who)
    if args is not None:
        call, raw = args
        arguments = (
            checks.json_object(raw, "--args", "a JSON object of the call's arguments") if isinstance(raw, str) else raw
        )
        checked = checks.arguments(arguments)
        return checks.body(t.Edit, op="args", call_id=checks.call_id(call), arguments=checked, by=who)
    if drop_call is not None:
        return checks.body(t.Edit, op="drop_call", call_id=checks.call_id(drop_call), by=who)
    return checks.body(t.Edit, op="agent", agent=checks.agent(agent), by=who)


async def fork(
    client: Client,
    run_id: str,
    at_turn: int,
    prompt: str | None,
    new_id: str | None,
    task_queue: str,
    live_tools: bool = False,
    budget: t.Budget | None = None,
) -> Forked:
    """Start a new run from the state just before model call `at_turn` of `run_id` (with `prompt`
    added as a user message, when given). `live_tools`: the calls before the fork point run again
    (side effects) instead of being reused. `budget`: the fork's own cap (its origin's is not
    carried: a fork spends from nothing, under its frozen agent's budgets and this cap)."""
    if at_turn < 1:
        raise checks.BadArgument("at_turn", "model calls are numbered from 1")
    made = await model_calls_made(client, run_id)
    if at_turn > made + 1:  # made + 1: the call a paused run is about to make (the run checks the rest)
        live = (await describe(client.get_workflow_handle(run_id))).status in LIVE
        where = f"fork before one of them (1-{made})" + (f", or {made + 1} while it waits before it" if live else "")
        raise DecisionRefused(
            f"cannot fork before model call {at_turn}: run {run_id} has made {made} model call(s); {where}"
        )
    point: t.ForkPoint = await query_run(
        client, run_id, t.FORK_POINT_QUERY, t.ForkQuery(turn=at_turn), result_type=t.ForkPoint
    )
    link = t.ForkLink(run_id=run_id, turn=at_turn, live_tools=live_tools)
    carry = t.Carry.for_fork(point, link, prompt)
    new_id = new_id or f"{run_id[:200]}-fork{at_turn}-{uuid.uuid4().hex[:6]}"
    await start_new(
        client,
        t.WORKFLOW_NAME,
        t.RunInput(prompt="", agent=point.agent.name, carry=carry, budget=budget),
        id=new_id,
        task_queue=task_queue,
        result_type=t.RunResult,
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(t.SA_AGENT, point.current or point.agent.name),
                SearchAttributePair(t.SA_PHASE, t.Phase.STARTING),
                SearchAttributePair(t.SA_FORKED_FROM, run_id),
            ]
        ),
        memo={"forked_from": link.model_dump()},
        static_summary=f"fork of {run_id} before model call {at_turn}"
        + (", its earlier tool calls run again" if live_tools else ""),
    )
    return Forked(run_id=new_id, forked_from=link, messages=len(carry.messages))


async def model_calls_made(client: Client, run_id: str) -> int:
    """How many model calls the run has recorded, from what Temporal holds (its turn search
    attribute and its history's model activities), not from the workflow's own answer: forking
    past the last one would hand the model a reply's tool calls without their results. Both are
    lower bounds (the attribute is written at most once a turn; the history is this execution's),
    so a fork is never let past a call the run made."""
    handle = client.get_workflow_handle(run_id)
    desc = await describe(handle)  # RunNotFound for an unknown id
    counted = 0
    name = t.MODEL_CALL_ACTIVITY.encode()
    tools: set[int] = set()  # tool activities asked to bring the next model call's reply (machine/requests.py)
    async for event in handle.fetch_history_events(rpc_timeout=READ_TIMEOUT):
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
