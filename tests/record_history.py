"""Record a run's history into tests/histories/ for the replay test:
`python -m tests.record_history NAME "PROMPT" [--approve] [--tools MODULE --agent A --model M]`,
or a session: `... NAME "" --session "MESSAGE" --session "MESSAGE" …` (each answered in turn, then ended),
or a pause: `... NAME "PROMPT" --break-at N --edit '{"op": "text", …}' …` (edited, then resumed;
`--break-tool NAME` pauses before that tool's calls instead),
and `--fork-at N` records a fork of the run, started before model call N, as NAME.fork.json
(with `--live-tools`, a fork that runs the calls of the turns before N again first).
`--script JSON` gives fake_llm's steps (a list, one per model call) instead of a named model, and
`--resolve rerun|result:JSON|fail:REASON` (repeated) resolves each call in doubt as it comes, in order,
and `--fork-resolve` (the same) those of the fork (a --live-tools fork's `once` calls ask first).
`--budget-tokens N` hands the run a budget in its RunInput (a caller's cap), and with a session,
`--raise-tokens N` raises it by N after each message whose answer failed, before the next.
`--suggest-continue-at N` has the server suggest continue-as-new once a history holds N events
(Temporal's `limit.historyCount.suggestContinueAsNew`); the file then holds the first execution.
With --approve, every call that waits for a person is approved as it comes. The run's id is NAME
(the replay test replays each file under its name), so its child runs (agents used as tools) are
recorded beside it under theirs, NAME.CALL_ID.json. Re-record only on purpose: a
history that no longer replays means runs in flight would break."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from durable_agent_runner.cli.session import end_session, send_message, wait_answer
from durable_agent_runner.workflows import types as t
from tests.recording import recording, write


async def approve_all(handle: WorkflowHandle[Any, Any]) -> None:
    """Approve each call as it comes to wait, until the run ends."""
    done: set[str] = set()
    while True:
        status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        if status.phase in t.FINAL_PHASES:
            return
        for p in status.pending_approvals:
            if p.call_id not in done:
                done.add(p.call_id)
                decision = t.ApprovalDecision(call_id=p.call_id, approve=True, by="recorder")
                await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
        await asyncio.sleep(0.2)


async def resolve_each(handle: WorkflowHandle[Any, Any], resolutions: list[str]) -> None:
    """Resolves each call as it comes to be in doubt with the next of `resolutions`, until the run ends."""
    left = list(resolutions)
    while left:
        status: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        if status.phase in t.FINAL_PHASES:
            return
        for d in status.in_doubt:
            action, _, value = left.pop(0).partition(":")
            fields = {"result": value} if action == "result" else {"reason": value} if action == "fail" else {}
            body = {"call_id": d.call_id, "action": action, "by": "recorder", **fields}
            decision = t.ResolveCall.model_validate(body)
            await handle.execute_update(t.RESOLVE_UPDATE, decision, result_type=t.ResolveReceipt)
            if not left:
                return
        await asyncio.sleep(0.2)


async def edit_and_resume(handle: WorkflowHandle[Any, Any], edits: list[str]) -> None:
    """Waits for the pause, applies each edit (JSON of `Edit`), resumes."""
    while (await handle.query(t.INSPECT_QUERY, result_type=t.Inspection)).paused is None:
        await asyncio.sleep(0.2)
    for raw in edits:
        edit = t.Edit.model_validate_json(raw).model_copy(update={"by": "recorder"})
        await handle.execute_update(t.EDIT_UPDATE, edit, result_type=t.EditReceipt)
    await handle.execute_update(t.RESUME_UPDATE, t.ResumeRequest(by="recorder"), result_type=t.RunStatus)


async def record(
    name: str,
    prompt: str,
    approve: bool = False,
    tools: str = "examples.demo_agent",
    agent: str = "demo",
    model: str | None = None,
    session: list[str] | None = None,
    break_at: int | None = None,
    edits: list[str] | None = None,
    fork_at: int | None = None,
    live_tools: bool = False,
    script: str | None = None,
    resolutions: list[str] | None = None,
    fork_resolutions: list[str] | None = None,
    budget_tokens: int | None = None,
    suggest_continue_at: int | None = None,
    break_tools: list[str] | None = None,
    raise_tokens: int | None = None,
) -> list[Path]:
    config = (f"limit.historyCount.suggestContinueAsNew={suggest_continue_at}",) if suggest_continue_at else ()
    async with recording((tools,), config) as r:
        client, queue = r.client, r.queue
        if script is not None:
            r.llm.add_script(name, json.loads(script))
            model = f"script:{name}"
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(
                prompt=prompt,
                agent=agent,
                model=model,
                session=bool(session),
                breakpoints=t.Breakpoints(at_turns=[break_at] if break_at else [], tools=break_tools or [])
                if break_at or break_tools
                else None,
                budget=t.Budget(tokens=budget_tokens) if budget_tokens is not None else None,
            ),
            id=name,
            task_queue=queue,
            result_type=t.RunResult,
        )
        if break_at or break_tools:
            await asyncio.wait_for(edit_and_resume(handle, edits or []), timeout=60)
        if approve:
            await asyncio.wait_for(approve_all(handle), timeout=60)
        if resolutions:
            await asyncio.wait_for(resolve_each(handle, resolutions), timeout=120)
        for text in session or []:
            receipt = await send_message(client, name, text, by="recorder")
            exchange = await asyncio.wait_for(wait_answer(client, name, receipt.message), 60)
            if exchange.error is not None and raise_tokens:
                raised = t.ResumeRequest(add_tokens=raise_tokens, by="recorder")
                await handle.execute_update(t.RESUME_UPDATE, raised, result_type=t.RunStatus)
        if session:
            await end_session(client, name, by="recorder")
        await handle.result()
        forks = []
        if fork_at:
            fork_id = f"{name}.fork"
            point = await handle.query(t.FORK_POINT_QUERY, t.ForkQuery(turn=fork_at), result_type=t.ForkPoint)
            carry = t.Carry.for_fork(point, t.ForkLink(run_id=name, turn=fork_at, live_tools=live_tools), None)
            forked = await client.start_workflow(
                t.WORKFLOW_NAME,
                t.RunInput(prompt="", agent=point.agent.name, carry=carry),
                id=fork_id,
                task_queue=queue,
                result_type=t.RunResult,
            )
            if fork_resolutions:
                await asyncio.wait_for(resolve_each(forked, fork_resolutions), timeout=120)
            await forked.result()
            forks.append(await forked.fetch_history())
        first = handle.first_execution_run_id if suggest_continue_at else None  # the run that continued as new
        history = await client.get_workflow_handle(name, run_id=first).fetch_history()
        children = [
            await client.get_workflow_handle(child).fetch_history()
            for parent in [history, *forks]
            for child in (
                e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                for e in parent.events
                if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
            )
        ]
    return [write(recorded.workflow_id, recorded) for recorded in [history, *children, *forks]]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.record_history")
    parser.add_argument("name")
    parser.add_argument("prompt")
    parser.add_argument("--approve", action="store_true")
    parser.add_argument("--tools", default="examples.demo_agent")
    parser.add_argument("--agent", default="demo")
    parser.add_argument("--model")
    parser.add_argument("--session", action="append", metavar="MESSAGE", help="record a session with these messages")
    parser.add_argument("--break-at", type=int, metavar="N", help="pause before model call N, edit, resume")
    parser.add_argument("--edit", action="append", metavar="JSON", help="an edit to make while paused")
    parser.add_argument("--break-tool", action="append", metavar="TOOL", help="pause before its calls, then resume")
    parser.add_argument("--fork-at", type=int, metavar="N", help="then fork it before model call N (NAME.fork)")
    parser.add_argument("--live-tools", action="store_true", help="the fork runs the earlier turns' calls again")
    parser.add_argument("--script", metavar="JSON", help="fake_llm's steps, one per model call")
    parser.add_argument("--resolve", action="append", metavar="ACTION", help="rerun, result:JSON or fail:REASON")
    parser.add_argument("--fork-resolve", action="append", metavar="ACTION", help="as --resolve, in the fork")
    parser.add_argument("--budget-tokens", type=int, metavar="N", help="the run is handed a budget of N tokens")
    parser.add_argument("--suggest-continue-at", type=int, metavar="N", help="the server suggests continue-as-new at N")
    parser.add_argument("--raise-tokens", type=int, metavar="N", help="a session's budget raised after a failed answer")
    args = parser.parse_args()
    paths = asyncio.run(
        record(
            args.name,
            args.prompt,
            args.approve,
            args.tools,
            args.agent,
            args.model,
            args.session,
            args.break_at,
            args.edit,
            args.fork_at,
            args.live_tools,
            args.script,
            args.resolve,
            args.fork_resolve,
            args.budget_tokens,
            args.suggest_continue_at,
            args.break_tool,
            args.raise_tokens,
        )
    )
    print("\n".join(map(str, paths)))


if __name__ == "__main__":
    main()
