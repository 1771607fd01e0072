"""The client side of session runs, shared by `client.py chat`, `send`, `end` and `result --message`.

A session is one `AgentRun` with `session=True`. A message and the end are updates, so a run that
has ended, or is not a session, refuses them at once with a reason; each message's answer is
read back with the `session.exchange` query, from whichever execution of the run holds it.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeGuard

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.workflows import types as t

POLL = 0.2  # seconds between reads of an answer in progress
# A read that no worker answers in time: the run's sticky worker was killed (the server waits out
# the sticky queue's 10 s before a new worker is asked), a worker is starting, the server restarts.
READ_TIMEOUT = timedelta(seconds=20)
GAP_PAUSE = 1.0  # seconds before asking again after such a read
# A deadline that passed: the client's ("Timeout expired") or the server's.
DEADLINE = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
PASSING = (*DEADLINE, RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED)
LIVE = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


class SessionError(Exception):
    """One clear line: the run has ended, is not a session, or does not exist."""


class NoWorker(Exception):
    """No worker took an update within the bound the user gave: one line, exit code 3."""


# What becomes of an update no worker took in time. Temporal keeps an update it admitted but no
# worker has accepted in the server's memory only, not in the run's history: the client giving up
# does not withdraw it. A worker that polls the run before the server drops it (a server restart,
# the run leaving the server's cache) applies it then; otherwise it is never applied. Either way
# at most once: sent again under the same update id, it counts once.
NOT_TAKEN = (
    "Nothing is recorded yet; a worker that starts soon may still apply it, once (see `status`); "
    "sending the same again is safe"
)


def session_id(agent: str) -> str:
    return f"{agent}-chat-{uuid.uuid4().hex[:8]}"


async def start_session(
    client: Client, *, agent: str, task_queue: str, run_id: str | None = None, model: str | None = None
) -> str:
    run_id = run_id or session_id(agent)
    await client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(prompt="", agent=agent, model=model, session=True),
        id=run_id,
        task_queue=task_queue,
        result_type=t.RunResult,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(t.SA_AGENT, agent), SearchAttributePair(t.SA_PHASE, "starting")]
        ),
        static_summary=f"{agent}: a conversation (client.py chat {run_id})",
    )
    return run_id


NO_WORKER = 3  # client.py's exit code when no worker took an update in time
DEFAULT_WAIT = 10.0  # seconds


def add_wait(cmd: argparse.ArgumentParser, *, answer_flag: bool = False) -> None:
    """`--wait SECONDS` (also `--wait-worker`; `send`, whose --wait waits for the answer, has only that)."""
    names = ("--wait-worker",) if answer_flag else ("--wait", "--wait-worker")
    cmd.add_argument(
        *names,
        dest="worker_wait",
        type=wait_seconds,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help=f"give up when no worker takes it within this long: one line, exit code {NO_WORKER} "
        "(default: %(default)g). Not taken, it may still be applied once by a worker that starts soon, "
        "or never; sending it again is safe",
    )


def wait_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 3600], not {text[:40]!r}")
    return value


async def _describe(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription:
    try:
        return await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SessionError(f"no run with id '{handle.id}'") from None
        raise


def _how_ended(desc: WorkflowExecutionDescription) -> str | None:
    return None if desc.status in LIVE else (desc.status.name.lower() if desc.status else "ended")


async def _ended(handle: WorkflowHandle[Any, Any]) -> str | None:
    """How the run ended ('completed', 'failed', …), or None while it runs. Unknown id: SessionError."""
    return _how_ended(await _describe(handle))


async def update(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: Any,
    result_type: type[Any],
    after_end: str = "it takes no more messages",
    *,
    wait: float | None = None,
    update_id: str | None = None,
) -> Any:
    """An update to a run whose refusal (its validator, or a closed run: `after_end` says what then)
    becomes a SessionError with the reason: one line, exit code 2 (client.py, durable_agent_runner/cli/debug.py).
    With `wait`, a worker must take it within that many seconds, or NoWorker (see NOT_TAKEN)."""
    desc = await _describe(handle)
    ended = _how_ended(desc)
    if ended is not None:
        raise SessionError(f"run {handle.id} has ended ({ended}): {after_end}")
    try:
        if wait is None:
            return await handle.execute_update(name, body, id=update_id, result_type=result_type)
        return await _within(handle, name, body, result_type, wait, update_id, desc.task_queue)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        raise SessionError(f"run {handle.id} refused it: {reason}") from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise SessionError(f"run {handle.id} did not take it in time (is a worker running?); send it again") from None
    except RPCError as err:
        ended = await _ended(handle)
        if ended is not None:
            raise SessionError(f"run {handle.id} has ended ({ended}): {after_end}") from None
        raise SessionError(f"run {handle.id}: Temporal said: {err.message}") from None


async def _within(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: Any,
    result_type: type[Any],
    wait: float,
    update_id: str | None,
    queue: str,
) -> Any:
    """The update, accepted by a worker within `wait` seconds or NoWorker. Accepted, it is in the
    run's history (durable), and its result comes with the same workflow task, so the second
    bound is only for a worker that dies in between."""
    bound = timedelta(seconds=wait)
    try:
        async with asyncio.timeout(wait):
            taken = await handle.start_update(
                name,
                body,
                id=update_id,
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                result_type=result_type,
                rpc_timeout=bound,
            )
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise NoWorker(
            f"no worker answered within {wait:g}s: is a worker running for task queue {queue}? {NOT_TAKEN}"
        ) from None
    try:
        async with asyncio.timeout(wait):
            return await taken.result(rpc_timeout=bound)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise NoWorker(
            f"the run took it (it is recorded and will be applied once) but no worker finished it within {wait:g}s"
        ) from None


async def send_message(
    client: Client,
    run_id: str,
    text: str,
    *,
    by: str,
    message_id: str | None = None,
    wait: float | None = None,
) -> t.MessageReceipt:
    body = t.SessionMessage(text=text, by=by, message_id=message_id or uuid.uuid4().hex)
    handle = client.get_workflow_handle(run_id)
    try:  # sent again with its message id, a message that arrived late counts once (the run keeps the ids)
        receipt: t.MessageReceipt = await update(handle, t.SESSION_SEND_UPDATE, body, t.MessageReceipt, wait=wait)
    except NoWorker as err:
        raise NoWorker(f"{err} with --message-id {body.message_id}") from None
    return receipt


async def end_session(
    client: Client, run_id: str, *, by: str, reason: str = "", wait: float | None = None
) -> t.EndReceipt:
    # A session ends once: a repeated end (one that timed out, then again) is the same update.
    receipt: t.EndReceipt = await update(
        client.get_workflow_handle(run_id),
        t.SESSION_END_UPDATE,
        t.EndSession(by=by, reason=reason),
        t.EndReceipt,
        wait=wait,
        update_id=f"end-{run_id}" if wait is not None else None,
    )
    return receipt


async def get_exchange(
    client: Client, run_id: str, message: int = 0, rpc_timeout: timedelta | None = None
) -> t.Exchange | None:
    """Message K's exchange (0: the last), from the execution that holds it whole."""
    query = t.ExchangeQuery(message=message)
    handle = client.get_workflow_handle(run_id)
    answer: t.ExchangeAnswer = await handle.query(
        t.EXCHANGE_QUERY, query, result_type=t.ExchangeAnswer, rpc_timeout=rpc_timeout
    )
    if answer.exchange is None and answer.execution:
        older = client.get_workflow_handle(run_id, run_id=answer.execution)
        answer = await older.query(t.EXCHANGE_QUERY, query, result_type=t.ExchangeAnswer, rpc_timeout=rpc_timeout)
    if answer.exchange is None and message > answer.messages:
        raise SessionError(f"run {run_id} has {answer.messages} message(s); there is no message {message}")
    return answer.exchange


async def wait_answer(
    client: Client, run_id: str, message: int, on_gap: Callable[[str, int], None] | None = None
) -> t.Exchange:
    """Message K's exchange once it is answered (or failed); SessionError if the run ends first.
    A read that times out or finds no server (a worker or the server restarting) is asked again,
    after `on_gap(what Temporal said, how many in a row)`. Callers bound the wait with
    `asyncio.timeout` where they need to."""
    handle = client.get_workflow_handle(run_id)
    gaps = 0
    while True:
        try:
            exchange = await get_exchange(client, run_id, message, READ_TIMEOUT)
            ended = None if _answered(exchange) else await _ended(handle)
        except RPCError as err:
            if err.status not in PASSING:
                raise
            if await _ended_quietly(handle):  # a closed run's reads need a worker, and none answered
                raise SessionError(f"run {run_id} has ended and no worker answered ({err.message})") from None
            gaps += 1
            if on_gap is not None:
                on_gap(err.message, gaps)
            await asyncio.sleep(GAP_PAUSE)
            continue
        gaps = 0
        if _answered(exchange):
            return exchange
        if ended is not None:
            exchange = await get_exchange(client, run_id, message, READ_TIMEOUT)  # answered just before the end?
            if exchange is not None and exchange.output is not None:
                return exchange
            raise SessionError(f"run {run_id} ended ({ended}) before answering message {message}")
        await asyncio.sleep(POLL)


async def _ended_quietly(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the run has closed; False when the server cannot say now (it is restarting)."""
    try:
        return await _ended(handle) is not None
    except RPCError as err:
        if err.status in PASSING:
            return False
        raise


def _answered(exchange: t.Exchange | None) -> TypeGuard[t.Exchange]:
    return exchange is not None and (exchange.output is not None or exchange.error is not None)
