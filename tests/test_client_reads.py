"""How the client's reads ride out a worker that did not answer in time (pure: the reads are faked)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import updates
from durable_agent_runner.workflows import types as t

ANSWER = t.Exchange(message=3, prompt="hi", output="hello", first_turn=1, started=datetime(2026, 12, 2, tzinfo=UTC))


class _Client:
    def get_workflow_handle(self, run_id: str) -> object:
        return object()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each read of message 3 does, in order: an exception to raise or an exchange to return."""
    script: list[Any] = []

    async def get_exchange(client: Any, run_id: str, message: int, rpc_timeout: Any = None) -> t.Exchange | None:
        step = script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step  # type: ignore[no-any-return]

    async def still_running(handle: Any) -> None:
        return None

    monkeypatch.setattr(updates, "get_exchange", get_exchange)
    monkeypatch.setattr(updates, "ended", still_running)
    monkeypatch.setattr(updates, "GAP_PAUSE", 0.0)
    return script


async def test_a_query_a_starved_worker_gave_up_on_is_asked_again(reads: list[Any]):
    """CI saw a 500-message session's read fail with the SDK's "[TMPRL1101] Potential deadlock
    detected" on a loaded machine: the run was fine and the next read answered."""
    slow = WorkflowQueryFailedError(
        "[TMPRL1101] Potential deadlock detected: workflow didn't yield within 2 second(s)."
    )
    reads.extend([slow, None, ANSWER])
    gaps: list[str] = []
    exchange = await updates.wait_answer(_Client(), "run-1", 3, on_gap=lambda said, n: gaps.append(said))  # type: ignore[arg-type]
    assert exchange.output == "hello" and gaps == ["its worker was too busy to answer in time"]


async def test_a_read_that_timed_out_is_said_in_a_persons_words(reads: list[Any]):
    """Not the transport's "Timeout expired": what it means, as `send --wait` prints it."""
    reads.extend([RPCError("Timeout expired", RPCStatusCode.CANCELLED, b""), ANSWER])
    gaps: list[str] = []
    exchange = await updates.wait_answer(_Client(), "run-1", 3, on_gap=lambda said, n: gaps.append(said))  # type: ignore[arg-type]
    assert exchange.output == "hello"
    assert gaps == ["no answer in time (the run's worker busy or restarting, or the server)"]


async def test_a_query_the_run_itself_refused_is_not_asked_again(reads: list[Any]):
    refused = WorkflowQueryFailedError("unknown query type agent.exchange")
    reads.append(refused)
    with pytest.raises(WorkflowQueryFailedError, match="unknown query"):
        await updates.wait_answer(_Client(), "run-1", 3)  # type: ignore[arg-type]
