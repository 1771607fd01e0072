"""An update sent with no bound (`wait=None`, the Python client's default for a session's
message) is sent again under the same id when the server gives up on it before a worker takes it
(its deadline passed while a killed worker's sticky queue was waited out): it is taken once a
worker is back, never doubled, and refused once the run has ended."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateRPCTimeoutOrCancelledError

from durable_agent_runner.client import updates
from durable_agent_runner.client.errors import DecisionRefused
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

pytestmark = pytest.mark.pure


class Handle:
    """A run's handle as the server answers it: `gives_up` deadlines, then the worker's receipt
    (or the run ends meanwhile)."""

    id = "chat-1"

    def __init__(self, gives_up: int, ends: bool = False) -> None:
        self.gives_up, self.ends = gives_up, ends
        self.ids: list[str | None] = []
        self.status = WorkflowExecutionStatus.RUNNING

    async def describe(self, rpc_timeout: Any) -> Any:
        return SimpleNamespace(status=self.status, task_queue="q", workflow_type=t.WORKFLOW_NAME)

    async def execute_update(self, name: str, body: Any, *, id: str | None, result_type: Any) -> str:
        self.ids.append(id)
        if len(self.ids) <= self.gives_up:
            if self.ends:
                self.status = WorkflowExecutionStatus.COMPLETED
            raise WorkflowUpdateRPCTimeoutOrCancelledError()
        return f"taken: {body}"


async def test_an_unbounded_update_is_sent_again_under_one_id_until_a_worker_takes_it(monkeypatch):
    monkeypatch.setattr(updates, "GAP_PAUSE", 0.0)
    handle = Handle(gives_up=2)
    assert await updates.update(handle, "session.send", "second", str) == "taken: second"  # type: ignore[arg-type]
    assert len(handle.ids) == 3 and len(set(handle.ids)) == 1 and handle.ids[0]  # one id: counted once
    given = Handle(gives_up=1)
    await updates.update(given, "session.send", "x", str, update_id="msg-m-2")  # type: ignore[arg-type]
    assert given.ids == ["msg-m-2", "msg-m-2"]


async def test_an_unbounded_update_to_a_run_that_ended_meanwhile_is_refused(monkeypatch):
    monkeypatch.setattr(updates, "GAP_PAUSE", 0.0)
    handle = Handle(gives_up=5, ends=True)
    with pytest.raises(DecisionRefused, match="has ended \\(completed\\): it takes no more messages"):
        await updates.update(handle, "session.send", "late", str)  # type: ignore[arg-type]
    assert len(handle.ids) == 1


@pytest.mark.parametrize(
    ("workflow_type", "status", "after_end", "words"),
    [
        (t.WORKFLOW_NAME, WorkflowExecutionStatus.CANCELED, "x", "run chat-1 has ended (cancelled): x"),
        (t.WORKFLOW_NAME, WorkflowExecutionStatus.TERMINATED, "x", "run chat-1 has ended (terminated): x"),
        (te.EVAL_WORKFLOW, WorkflowExecutionStatus.COMPLETED, "y", "eval chat-1 has ended (completed): y"),
    ],
)
async def test_an_update_to_an_ended_workflow_names_it_and_its_end_as_status_does(
    workflow_type, status, after_end, words
):
    """Before, an eval's refusal called it a run, and a cancelled run's said Temporal's 'canceled'
    where status, list and cancel say 'cancelled'."""
    handle = Handle(gives_up=0)
    handle.status = status
    handle.describe = lambda rpc_timeout: _described(status, workflow_type)  # type: ignore[method-assign]
    with pytest.raises(DecisionRefused) as refused:
        await updates.update(handle, "u", "b", str, after_end, of=workflow_type)  # type: ignore[arg-type]
    assert str(refused.value) == words and handle.ids == []


async def _described(status: WorkflowExecutionStatus, workflow_type: str) -> Any:
    return SimpleNamespace(status=status, task_queue="q", workflow_type=workflow_type)
