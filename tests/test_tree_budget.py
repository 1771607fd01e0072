"""Budgets across a tree of runs, against a real server: children in parallel share what their
parent has left, a failed child's usage counts, a run paused on its budget goes on once raised,
and the bound of docs/what-runs-once.md holds when the worker is killed mid-call."""

from __future__ import annotations

import asyncio
import base64
import signal
import time

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agent_runner import Agent, AgentClient, Registry
from durable_agent_runner.client.errors import DecisionRefused, RunFailed
from durable_agent_runner.client.status import gather
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import RELEASE_2_PATCH
from durable_agent_runner.workflows.patches import TREE_BUDGET_PATCH as PATCH
from tests.budget_runs import (
    BUDGET,
    CHILD_CALL,
    CHILD_SPENT,
    CHILDREN,
    LEAD_CALL,
    OVERSHOOT,
    lead_with_a_napping_child,
    parallel_team,
    pausing_agent,
)
from tests.fixtures.budget_agents import LEAD_SCRIPT, SCHOLAR_SCRIPT
from tests.helpers import activity_attempts, calls, replay, script, start
from tests.test_agents import child_runs, status
from tests.test_client import cli  # noqa: F401  (a fixture)
from tests.test_durability import start_worker_process


def patched(history, patch: str = PATCH) -> bool:
    """Whether the run asked `patch` (its marker's data names it, base64-encoded)."""
    return base64.b64encode(f'{{"id":"{patch}"'.encode()).decode()[:20] in history.to_json()


async def child_inputs(client, handle) -> list[t.RunInput]:
    inputs = []
    for child_id in await child_runs(handle):
        history = await client.get_workflow_handle(child_id).fetch_history()
        first = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
        inputs.append(client.data_converter.payload_converter.from_payload(first, t.RunInput))
    return inputs


async def test_three_children_in_parallel_stay_within_their_parents_budget_and_failed_ones_count(
    client, task_queue, worker_factory, llm
):
    async with worker_factory(registry=parallel_team(llm)):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 60)
        final = await status(handle)
        shares = [i.budget for i in await child_inputs(client, handle)]
    # each child got an equal share of what the lead had left when it started
    assert len(shares) == CHILDREN and all(s is not None and s.tokens == 300 for s in shares)
    # each child overran its share by one call's overshoot, failed, and its usage counts in the lead
    scholar = final.usage_by_agent["scholar"]
    assert scholar.total_tokens == CHILDREN * CHILD_SPENT and scholar.requests == 2 * CHILDREN
    total = final.usage.total_tokens
    assert total == LEAD_CALL["usage"]["prompt_tokens"] + CHILDREN * CHILD_SPENT
    assert total <= BUDGET + CHILDREN * OVERSHOOT  # the documented bound (the lead's own call overshot nothing)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "TokenBudgetExceeded"
    assert "before model call 2" in cause.message  # the lead made no call after its children spent it
    assert final.budget is not None and final.budget.tokens is not None
    assert final.budget.tokens.left <= 0 and final.budget.children == []
    # each call asked for at most what its run had left: the lead 1,000, a child 300, then 100
    asked = sorted(r["body"].get("max_completion_tokens") for r in llm.requests())
    assert asked == [100] * CHILDREN + [300] * CHILDREN + [BUDGET]
    await replay(handle)
    for child_id in await child_runs(handle):  # a 2.0 child handed a share keeps a ledger, with no marker of it
        child = client.get_workflow_handle(child_id)
        recorded = await child.fetch_history()
        assert patched(recorded, RELEASE_2_PATCH) and not patched(recorded)
        await replay(child)


async def test_a_run_paused_on_its_budget_goes_on_once_raised(client, task_queue, worker_factory, llm):
    async with worker_factory(registry=pausing_agent(llm)):
        handle = await start(client, task_queue, "Explain tides", agent="careful")
        deadline = time.monotonic() + 30
        while (now := await status(handle)).paused is None:
            assert time.monotonic() < deadline, f"never paused: {now.phase} {now.last_step}"
            await asyncio.sleep(0.1)
        assert now.paused.reason == "budget" and now.paused.where == "before_tools"
        assert "token budget spent: 150 of 100" in now.paused.why
        view = (await gather(client, handle, await handle.describe(), "http://ui")).as_dict()
        assert view["budget"]["run"]["tokens"] == {"limit": 100, "spent": 150, "reserved": 0, "left": -50}
        assert view["budget"]["tree"]["tokens"]["spent"] == 150
        # a resume that raises nothing is refused; a raise of a kind the run has not, too
        for request in (t.ResumeRequest(by="ann"), t.ResumeRequest(by="ann", add_usd=1.0)):
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(t.RESUME_UPDATE, request, result_type=t.RunStatus)
            assert isinstance(refused.value.cause, ApplicationError)
            assert refused.value.cause.type in ("BudgetNotRaised", "NoBudget")
        await handle.execute_update(
            t.RESUME_UPDATE, t.ResumeRequest(by="ann", add_tokens=1_000), result_type=t.RunStatus
        )
        result = await asyncio.wait_for(handle.result(), 30)
        final = await status(handle)
    assert result.output == "Tides follow the moon." and result.usage.total_tokens == 200
    assert final.budget is not None and final.budget.tokens == t.BudgetLine(
        limit=1_100, spent=200, reserved=0, left=900
    )
    await replay(handle)


async def test_a_run_without_a_budget_records_no_patch_marker(client, task_queue, worker_factory, llm):
    plain = Agent(name="plain", model=script(llm, {"content": "hi"}))
    async with worker_factory(registry=Registry(agents=[plain])):
        handle = await start(client, task_queue, "hello", agent="plain")
        await asyncio.wait_for(handle.result(), 30)
        assert (await status(handle)).budget is None
    assert not patched(await handle.fetch_history())


async def test_a_run_started_with_a_cap_stops_at_it_and_its_status_shows_the_cap(
    client, task_queue, worker_factory, llm
):
    """`run --budget-tokens N` / `start(budget_tokens=N)`: one run's cap, for an agent that has no
    budget of its own (before, only a schedule, an eval or a parent workflow could hand one)."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        run = await agents.start("scripted", "go", model="loop:50:400", budget_tokens=1000)
        with pytest.raises(RunFailed) as failed:
            await run.result(wait=60)
        info = await run.status()
        forked = await run.fork(1, budget_tokens=2000)  # a fork takes a cap of its own (`fork --budget-tokens`)
        with pytest.raises(RunFailed) as fork_failed:
            await agents.get(forked.run_id).result(wait=60)
        fork_info = await agents.get(forked.run_id).status()
    assert "of 2000 tokens" in fork_failed.value.message and fork_info.budget is not None
    assert fork_info.budget["run"]["tokens"]["limit"] == 2000 and 2000 <= fork_info.usage.total_tokens < 4000
    assert failed.value.error_type == "TokenBudgetExceeded" and "of 1000 tokens" in failed.value.message
    assert info.budget is not None and info.budget["run"]["tokens"]["limit"] == 1000, info.budget
    assert 1000 <= info.usage.total_tokens < 3000  # stopped at its cap, within one call of it


async def test_a_session_started_with_a_cap_counts_every_answer_against_it(client, task_queue, worker_factory, llm):
    """`chat --budget-tokens N` / `start_session(budget_tokens=N)`: a cap on all a session spends."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        chat = await agents.start_session("chatter", model=script(llm, {"content": "one"}, {"content": "two"}),
                                          budget_tokens=50_000)  # fmt: skip
        assert await chat.ask("first", wait=30) == "one" and await chat.ask("second", wait=30) == "two"
        info = await chat.status()
        await chat.end()
    tokens = info.budget["run"]["tokens"] if info.budget else {}
    assert tokens.get("limit") == 50_000 and tokens.get("spent") == info.usage.total_tokens > 0, info.budget


async def test_a_session_whose_cap_is_spent_goes_on_once_raised_between_messages(
    client, task_queue, worker_factory, llm, cli
):
    """Before: once a session's cap was spent every later message failed, and `resume
    --add-tokens` was refused (`the run is not paused`). A session waiting for its next message
    takes a raise alone (session-raise-2.0.4), and its next message is answered."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        chat = await agents.start_session("chatter", model=script(llm, {"content": "one"}, {"content": "two"}),
                                          budget_tokens=1)  # fmt: skip
        assert await chat.ask("first", wait=30) == "one"  # its first call spends the cap (a last call's overshoot)
        with pytest.raises(RunFailed, match="TokenBudgetExceeded: message 2: token budget spent") as failed:
            await chat.ask("second", wait=30)
        assert failed.value.error_type == "TokenBudgetExceeded"  # the failure's kind (it said MessageFailed)
        with pytest.raises(DecisionRefused, match="the run is not paused: a session waiting for a message takes a"):
            await chat.resume()  # a resume alone has nothing to resume
        raised = await chat.resume(add_tokens=100_000, by="alice")
        assert raised.phase == "waiting_for_message"  # it waits on, its budget raised
        assert await chat.ask("third", wait=30) == "two"
        said = await cli("resume", chat.id, "--add-tokens", "5", "--by", "bob")  # and from the CLI
        assert said.code == 0 and said.out.strip() == (
            f"{chat.id}: budget raised +5 tokens by bob; the session waits for its next message"
        ), str(said)
        info = await chat.status()
        await chat.end()
    assert info.budget is not None and info.budget["run"]["tokens"]["limit"] == 100_006, info.budget


async def test_the_bound_holds_when_the_worker_is_killed_mid_call(client, temporal_server, llm, task_queue, tmp_path):
    """The worker dies while a child's model call is in flight; a new worker rebuilds every ledger
    from history, the call is retried, and the tree still spends at most the documented bound."""
    asks = calls(*[("ask", {"input": f"tides, part {i}"}) for i in range(CHILDREN)]) | LEAD_CALL
    llm.add_script(LEAD_SCRIPT, [asks, {"content": "never asked"}])
    llm.add_script(SCHOLAR_SCRIPT, [calls(("fact", {"topic": "tides"})) | CHILD_CALL] * 5)
    llm.add_faults([{"kind": "delay", "ms": 8_000, "model": f"script:{SCHOLAR_SCRIPT}"}])  # one child's first call
    log = tmp_path / "worker.log"
    first = start_worker_process(temporal_server, llm, task_queue, log, tools="tests/fixtures/budget_agents.py")
    handle = await start(client, task_queue, "Explain tides", agent="budget_lead")
    deadline = time.monotonic() + 30
    while len(llm.requests()) < 2:  # the lead's call answered; a child's call is held for 8 s
        assert time.monotonic() < deadline, "no child called its model"
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = start_worker_process(temporal_server, llm, task_queue, log, tools="tests/fixtures/budget_agents.py")
    try:
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 90)
        final = await status(handle)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "TokenBudgetExceeded"
    assert final.usage.total_tokens <= BUDGET + CHILDREN * OVERSHOOT
    assert final.usage_by_agent["scholar"].total_tokens == CHILDREN * CHILD_SPENT
    assert [i.budget.tokens for i in await child_inputs(client, handle) if i.budget] == [300] * CHILDREN
    asked = {r["body"].get("max_completion_tokens") for r in llm.requests()}
    assert asked <= {BUDGET, 300, 100}  # every call asked for at most what its run had left
    attempts = [
        await activity_attempts(client.get_workflow_handle(c), t.MODEL_CALL_ACTIVITY) for c in await child_runs(handle)
    ]
    assert any(2 in a for a in attempts), attempts  # the killed call ran again on the new worker
    await replay(handle)


async def test_a_raise_on_a_paused_child_is_refused_past_what_its_parent_granted(
    client, task_queue, worker_factory, llm
):
    """A person pauses a child run and resumes it with a huge raise: refused (the raise would come
    from nowhere: its parent holds only the share it granted); a raise within the share goes on."""
    released = asyncio.Event()
    lead = lead_with_a_napping_child(llm, released)
    async with worker_factory(registry=Registry(agents=[lead])):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        deadline = time.monotonic() + 30
        while not (children := await child_runs(handle)):
            assert time.monotonic() < deadline, "the child never started"
            await asyncio.sleep(0.1)
        child = client.get_workflow_handle(children[0])
        while (await status(child)).phase != "running_tools":
            assert time.monotonic() < deadline, "the child never ran its tool"
            await asyncio.sleep(0.1)
        await child.execute_update(t.PAUSE_UPDATE, t.PauseRequest(by="ann"), result_type=t.RunStatus)
        released.set()  # the tool ends; the child pauses before its next model call
        while (await status(child)).paused is None:
            assert time.monotonic() < deadline, "the child never paused"
            await asyncio.sleep(0.1)
        huge = t.ResumeRequest(by="ann", add_tokens=1_000_000_000)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await child.execute_update(t.RESUME_UPDATE, huge, result_type=t.RunStatus)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "BeyondParentGrant"
        assert "its parent granted it 19900 tokens and it has 500: it may be raised by at most 19400" in cause.message
        assert (await status(child)).paused is not None  # nothing was recorded: still paused
        within = t.ResumeRequest(by="ann", add_tokens=1_000)
        await child.execute_update(t.RESUME_UPDATE, within, result_type=t.RunStatus)
        result = await asyncio.wait_for(handle.result(), 30)
        final = await status(child)
    assert result.output == "done"
    assert final.budget is not None and final.budget.tokens is not None and final.budget.tokens.limit == 1_500
    await replay(handle)
    await replay(child)
