"""Agents inside a team's own workflow (`durable_agent_runner.workflow.run_agent`): each call a
child AgentRun with a readable id, chained or gathered in parallel, typed output, approvals by the
child's id, budgets and cancellation as from the CLI, errors as typed exceptions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from durable_agent_runner import AgentPlugin, Registry
from durable_agent_runner.config.connection import DATA_CONVERTER
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import AgentRun
from durable_agent_runner.workflows import types as t
from tests.conftest import TEST_MODULES
from tests.fixtures.code_agents import Verdict
from tests.fixtures.code_workflows import ChainAndGather, Misuse, Misused, OneAgent, Plan, Report
from tests.helpers import calls, replay, script

pytestmark = pytest.mark.asyncio
WORKFLOWS = [ChainAndGather, OneAgent, Misused]


@pytest.fixture
async def team_worker(client: Client, task_queue: str, settings: LLMSettings) -> AsyncIterator[Worker]:
    """The team's worker: its own workflows plus the AgentPlugin, as the docs show."""
    plugin = AgentPlugin(Registry.from_modules([*TEST_MODULES, "tests.fixtures.code_agents"]), settings=settings)
    async with Worker(client, task_queue=task_queue, workflows=WORKFLOWS, plugins=[plugin]) as worker:
        yield worker


def parent_id() -> str:
    return f"team-{uuid.uuid4().hex[:10]}"


async def test_two_agents_chained_then_three_gathered_in_parallel_typed(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    verdict = {"json": {"passed": True, "note": "clear"}}
    models = [script(llm, {"content": "1. intro 2. body"}), script(llm, {"content": "An essay."}),
              *(script(llm, verdict) for _ in range(3))]  # fmt: skip
    wid = parent_id()
    handle = await client.start_workflow(
        ChainAndGather.run, Plan(prompt="rivers", models=models), id=wid, task_queue=task_queue, result_type=Report
    )
    report = await asyncio.wait_for(handle.result(), 60)
    assert report.chain == "An essay." and report.tokens > 0
    assert report.verdicts == [Verdict(passed=True, note="clear")] * 2  # typed: from the Agent, by output_type=
    assert report.verdict_by_name == {"passed": True, "note": "clear"}  # by name alone: JSON data
    # The writer saw the outline: the chain passed one agent's answer to the next.
    asked = [r["body"] for r in llm.requests() if r["body"] and r["body"].get("model") == models[1]]
    assert "1. intro 2. body" in str(asked[0]["messages"])
    history = await handle.fetch_history()
    started = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id for e in history.events
               if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]  # fmt: skip
    assert started == [f"{wid}/scripted-1", f"{wid}/scripted-2", f"{wid}/judge-1", f"{wid}/judge-2", f"{wid}/judge-3"]
    # The three judges all started before any of them finished: in parallel, not one by one.
    at = {kind: [i for i, e in enumerate(history.events) if e.event_type == kind] for kind in (
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
    )}  # fmt: skip
    judges_started = at[EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED][2:]
    judges_done = at[EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED][2:]
    assert len(judges_done) == 3 and max(judges_started) < min(judges_done)
    for child in started:  # each an ordinary AgentRun, whose own history replays
        await replay(client.get_workflow_handle(child))
    replayer = Replayer(workflows=[*WORKFLOWS, AgentRun], data_converter=DATA_CONVERTER)
    await replayer.replay_workflow(history)  # the team's workflow replays, in the sandbox


async def test_an_approval_reaches_the_child_by_its_readable_id(
    client: Client, task_queue: str, llm: Any, team_worker: Worker, counter_file: Any
) -> None:
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    wid = parent_id()
    plan = Plan(prompt="send the report", models=[model], agent="guarded")
    handle = await client.start_workflow(OneAgent.run, plan, id=wid, task_queue=task_queue, result_type=str)
    child = client.get_workflow_handle(f"{wid}/guarded-1")

    async def waiting() -> t.RunStatus:
        while True:
            try:
                status = await child.query(t.STATUS_QUERY, result_type=t.RunStatus)
                if status.pending_approvals:
                    return status
            except Exception:  # not started yet
                pass
            await asyncio.sleep(0.2)

    status = await asyncio.wait_for(waiting(), 30)
    assert status.phase == "awaiting_approval" and status.pending_approvals[0].tool == "send"
    decision = t.ApprovalDecision(call_id=status.pending_approvals[0].call_id, approve=True, by="alice")
    await child.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
    assert await asyncio.wait_for(handle.result(), 30) == "sent it"
    assert counter_file.read_text().count("send:report") == 1


async def test_a_childs_budget_raises_a_typed_error_the_workflow_can_catch(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    wid = parent_id()
    plan = Plan(prompt="go", models=["loop:50:400"], agent="budgeted")
    answer = await client.execute_workflow(OneAgent.run, plan, id=wid, task_queue=task_queue, result_type=str)
    kind, run_id, spent = answer.split("|")
    assert (kind, run_id) == ("TokenBudgetExceeded", f"{wid}/budgeted-1") and int(spent) >= 3000
    # Uncaught, it fails the team's workflow with that one line.
    uncaught = plan.model_copy(update={"catch": False})
    with pytest.raises(WorkflowFailureError) as failed:
        await client.execute_workflow(OneAgent.run, uncaught, id=parent_id(), task_queue=task_queue, result_type=str)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "TokenBudgetExceeded"
    assert "agent 'budgeted'" in cause.message and "of 3000 tokens" in cause.message


async def test_a_budget_given_by_the_workflow_caps_an_agent_that_has_none(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    wid = parent_id()
    plan = Plan(prompt="go", models=["loop:50:400"], agent="scripted", budget_tokens=1000)
    answer = await client.execute_workflow(OneAgent.run, plan, id=wid, task_queue=task_queue, result_type=str)
    kind, run_id, spent = answer.split("|")
    assert (kind, run_id) == ("TokenBudgetExceeded", f"{wid}/scripted-1")
    assert 1000 <= int(spent) < 3000  # stopped at its cap, within one call of it


async def test_cancelling_the_workflow_cancels_the_agent_it_waits_on(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    model = script(llm, calls(("send", {"label": "never"})), {"content": "unreachable"})
    wid = parent_id()
    plan = Plan(prompt="send", models=[model], agent="guarded")
    handle = await client.start_workflow(OneAgent.run, plan, id=wid, task_queue=task_queue, result_type=str)
    child = client.get_workflow_handle(f"{wid}/guarded-1")

    async def awaiting_approval() -> None:
        while True:
            try:
                if (await child.query(t.STATUS_QUERY, result_type=t.RunStatus)).pending_approvals:
                    return
            except Exception:
                pass
            await asyncio.sleep(0.2)

    await asyncio.wait_for(awaiting_approval(), 30)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), 30)
    assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    status = await child.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert status.phase == "cancelled" and not status.pending_approvals


async def test_an_empty_input_fails_the_workflow_with_one_line(
    client: Client, task_queue: str, team_worker: Worker
) -> None:
    with pytest.raises(WorkflowFailureError) as failed:
        await client.execute_workflow(
            OneAgent.run, Plan(prompt="  ", catch=False), id=parent_id(), task_queue=task_queue, result_type=str
        )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidAgentInput"
    assert "must be a non-empty string" in cause.message


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("wait", "agent_wait_seconds: Input should be greater than 0"),
        ("temperature", "model_settings.temperature: Input should be less than or equal to 2"),
        ("unknown_setting", "model_settings: unknown setting(s) temprature"),
        ("max_turns", "max_turns: must be a whole number of at least 1, not 0"),
    ],
)
async def test_a_bad_option_is_agent_failed_in_the_callers_workflow_never_a_wedge(
    client: Client, task_queue: str, llm: Any, team_worker: Worker, kind: str, said: str
) -> None:
    """Before: a raw ValidationError in the caller's workflow, whose task then failed forever."""
    caught = await asyncio.wait_for(
        client.execute_workflow(Misused.run, Misuse(kind=kind), id=parent_id(), task_queue=task_queue, result_type=str),
        30,
    )
    assert caught == f"InvalidAgentOptions|run_agent('scripted'): {said}" or caught.startswith(
        f"InvalidAgentOptions|run_agent('scripted'): {said}"
    ), caught
    # Uncaught, it fails the caller's workflow at once, with that one line.
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(
            client.execute_workflow(
                Misused.run, Misuse(kind=kind, catch=False), id=parent_id(), task_queue=task_queue, result_type=str
            ),
            30,
        )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidAgentOptions" and said in cause.message


async def test_one_id_given_to_two_calls_at_once_is_agent_failed(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    """Before: the caller failed with temporalio's raw "already started" error."""
    models = [script(llm, {"content": "first"}), script(llm, {"content": "second"})]
    # The first run is still going when the second starts: on a loaded server it could otherwise
    # answer before the second start is processed, and the id would be free again by then.
    llm.add_fault("delay", ms=20_000, model=models[0])
    wid = parent_id()
    misuse = Misuse(kind="same_id_at_once", models=models)
    caught = await asyncio.wait_for(
        client.execute_workflow(Misused.run, misuse, id=wid, task_queue=task_queue, result_type=str), 60
    )
    assert caught == (
        "AgentRunIdTaken|run_agent('scripted'): a run with id 'the-one' is already running: give each call its own "
        "id= (or none: each call then gets its own, {workflow id}/{agent}-{n})"
    ), caught


async def test_one_id_given_to_two_calls_one_after_the_other(
    client: Client, task_queue: str, llm: Any, team_worker: Worker
) -> None:
    models = [script(llm, {"content": "first"}), script(llm, {"content": "second"})]
    misuse = Misuse(kind="same_id", models=models)
    answer = await asyncio.wait_for(
        client.execute_workflow(Misused.run, misuse, id=parent_id(), task_queue=task_queue, result_type=str), 60
    )
    assert answer == "first|second"  # the first had ended: the id was free again, as Temporal's ids are
