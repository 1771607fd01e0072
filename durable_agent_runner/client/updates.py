"""What the client sends a run (approvals, messages, the end, pauses) and how it reads a session's
answers back: Temporal updates, each bounded by `wait` and sent under an id that makes a repeat
count once.

An update no worker takes in time is not recorded. Temporal keeps an update it admitted but no
worker has accepted in the server's memory only, not in the run's history: the client giving up
does not withdraw it. A worker that polls the run before the server drops it (a server restart,
the run leaving the server's cache) applies it then; otherwise it is never applied. Either way at
most once: sent again under the same update id, it counts once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeGuard

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import checks
from durable_agent_runner.client.errors import (
    STATUS_NAMES,
    AgentRunError,
    DecisionRefused,
    IdTaken,
    NotThatKind,
    NoWorkerAnswered,
    RunNotFound,
    naming,
    noun,
)
from durable_agent_runner.client.follow import DEADLINE, gap_words
from durable_agent_runner.workflows import types as t

DEFAULT_WAIT = 10.0  # seconds a worker has to take what was sent
POLL = 0.2  # seconds between reads of an answer in progress
# A read that no worker answers in time: the run's sticky worker was killed (the server waits out
# the sticky queue's 10 s before a new worker is asked), a worker is starting, the server restarts.
READ_TIMEOUT = timedelta(seconds=20)
LOOK = timedelta(seconds=5)  # the read of what holds a taken id: its words, not worth a long wait
GAP_PAUSE = 1.0  # seconds before asking again after such a read
PASSING = (*DEADLINE, RPCStatusCode.UNAVAILABLE, RPCStatusCode.RESOURCE_EXHAUSTED)
# A query the worker gave up on because the run's thread did not get to answer within the SDK's
# deadlock bound (2 s): a starved machine, not a broken run; its next read usually answers.
SLOW_WORKER = "TMPRL1101"
LIVE = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)
NOT_TAKEN = (
    "Nothing is recorded yet; a worker that starts soon may still apply it, once (see `status`); "
    "sending the same again is safe"
)


async def start_new(
    temporal: Client, workflow: str, input: Any, *, id: str, **options: Any
) -> WorkflowHandle[Any, Any]:
    """Start a run, session, fork or eval under an id no workflow has held, running or ended
    (checks.NEW_ID: under an ended run's id a new one would shadow it in `status`, `export`,
    `diff` and the Web UI); IdTaken, which says what holds it, if one has."""
    try:
        return await temporal.start_workflow(workflow, input, id=id, id_reuse_policy=checks.NEW_ID, **options)
    except WorkflowAlreadyStartedError as err:
        try:
            desc = await temporal.get_workflow_handle(id).describe(rpc_timeout=LOOK)
        except RPCError:  # the server away, or the holder gone since
            raise IdTaken(err, "", "running or ended") from None
        raise IdTaken(
            err, desc.workflow_type, STATUS_NAMES.get(desc.status, "ended") if desc.status else "ended"
        ) from None


async def describe(
    handle: WorkflowHandle[Any, Any], of: str = t.WORKFLOW_NAME, *more: str
) -> WorkflowExecutionDescription:
    """The run's description; RunNotFound for an unknown id, NotThatKind for the id of a workflow
    of another type than `of` or `more` (an eval's id given for a run's)."""
    try:
        desc = await handle.describe(rpc_timeout=READ_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunNotFound(handle.id, of) from None
        raise
    if desc.workflow_type != of and desc.workflow_type not in more:
        raise NotThatKind(handle.id, desc.workflow_type, of)
    return desc


async def cancel(handle: WorkflowHandle[Any, Any], of: str, *more: str) -> None:
    """Ask a running workflow of type `of` (or `more`) to stop: RunNotFound, NotThatKind, or
    DecisionRefused naming it as what it is ("run", "eval") if it has ended."""
    desc = await describe(handle, of, *more)
    if (gone := how_ended(desc)) is not None:
        raise DecisionRefused(f"{noun(desc.workflow_type)} {handle.id} has already ended ({gone})")
    await handle.cancel(rpc_timeout=READ_TIMEOUT)


IN_DOUBT = "no call of it is in doubt"  # what a resolve of an ended run is told


def how_ended(desc: WorkflowExecutionDescription) -> str | None:
    """How it ended, as status names it ('cancelled', not Temporal's 'canceled'); None while it runs."""
    return None if desc.status in LIVE else (STATUS_NAMES.get(desc.status, "ended") if desc.status else "ended")


def _gone(handle: WorkflowHandle[Any, Any], of: str, how: str, after_end: str) -> DecisionRefused:
    return DecisionRefused(f"{noun(of)} {handle.id} has ended ({how}): {after_end}")


async def ended(handle: WorkflowHandle[Any, Any], of: str = t.WORKFLOW_NAME) -> str | None:
    """How the run ended ('completed', 'failed', ...), or None while it runs. Unknown id: RunNotFound."""
    return how_ended(await describe(handle, of))


async def update(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: Any,
    result_type: type[Any],
    after_end: str = "it takes no more messages",
    *,
    wait: float | None = None,
    update_id: str | None = None,
    of: str = t.WORKFLOW_NAME,
) -> Any:
    """An update to a run (a workflow of type `of`) whose refusal (its validator, or a closed run:
    `after_end` says what then) becomes DecisionRefused with the reason. With `wait`, a worker
    must take it within that many seconds, or NoWorkerAnswered (see the module docstring);
    without, until one takes it."""
    desc = await describe(handle, of)
    gone = how_ended(desc)
    if gone is not None:
        raise _gone(handle, of, gone, after_end)
    try:
        if wait is None:
            return await _until_taken(handle, name, body, result_type, update_id or uuid.uuid4().hex, after_end, of)
        return await _within(handle, name, body, result_type, wait, update_id, desc.task_queue)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        kind = (cause.type or "") if isinstance(cause, ApplicationError) else ""
        raise DecisionRefused(f"{noun(of)} {handle.id} refused it: {naming(reason, handle.id)}", kind) from None
    except RPCError as err:
        gone = await ended(handle, of)
        if gone is not None:
            raise _gone(handle, of, gone, after_end) from None
        raise AgentRunError(f"{noun(of)} {handle.id}: Temporal said: {err.message}") from None


async def _until_taken(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: Any,
    result_type: type[Any],
    update_id: str,
    after_end: str,
    of: str,
) -> Any:
    """The update with no bound (`wait=None`): the server gives up on one no worker takes within its
    own deadline (a worker killed, its sticky queue waited out, a new one starting), so it is sent
    again under the same id, which counts once, until a worker takes it or the run ends."""
    while True:
        try:
            return await handle.execute_update(name, body, id=update_id, result_type=result_type)
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            try:
                gone = await ended(handle, of)
            except RPCError as err:  # the server restarting: ask again
                if err.status not in PASSING:
                    raise
                gone = None
            if gone is not None:
                raise _gone(handle, of, gone, after_end) from None
            await asyncio.sleep(GAP_PAUSE)


async def _within(
    handle: WorkflowHandle[Any, Any],
    name: str,
    body: Any,
    result_type: type[Any],
    wait: float,
    update_id: str | None,
    queue: str,
) -> Any:
    """The update, accepted by a worker within `wait` seconds or NoWorkerAnswered. Accepted, it is
    in the run's history (durable), and its result comes with the same workflow task, so the
    second bound is only for a worker that dies in between."""
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
        raise NoWorkerAnswered(
            f"no worker answered within {wait:g}s: is a worker running for task queue {queue}? {NOT_TAKEN}"
        ) from None
    try:
        async with asyncio.timeout(wait):
            return await taken.result(rpc_timeout=bound)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise NoWorkerAnswered(
            f"the run took it (it is recorded and will be applied once) but no worker finished it within {wait:g}s"
        ) from None


async def decide(
    handle: WorkflowHandle[Any, Any], decision: t.ApprovalDecision, wait: float | None = DEFAULT_WAIT
) -> t.DecisionReceipt:
    """Approve or reject a waiting call. The update id makes a repeated decision count once:
    Temporal answers it with the first's result. An approval with edited arguments has their
    digest in its id, so other arguments for the same call are a new decision (the run refuses
    it: the call no longer waits), never the first's answer."""
    verdict = "approve" if decision.approve else "reject"
    update_id = f"{verdict}-{decision.call_id}"
    if decision.arguments is not None:
        digest = hashlib.sha256(json.dumps(decision.arguments, sort_keys=True).encode()).hexdigest()[:12]
        update_id = f"edit-{decision.call_id}-{digest}"
    receipt: t.DecisionReceipt = await update(
        handle,
        t.APPROVAL_UPDATE,
        decision,
        t.DecisionReceipt,
        "no call of it is pending",
        wait=wait,
        update_id=update_id,
    )
    return receipt


async def answer(handle: WorkflowHandle[Any, Any], body: t.AnswerQuestion, wait: float | None) -> t.AnswerReceipt:
    """Answer an `ask_person` question. The update id holds the answer's digest, so the same answer
    sent again counts once (Temporal answers it with the first's receipt), and another is refused."""
    digest = hashlib.sha256(f"{body.text}\n{body.choice}".encode()).hexdigest()[:12]
    receipt: t.AnswerReceipt = await update(
        handle, t.ANSWER_UPDATE, body, t.AnswerReceipt, "no question of it waits", wait=wait,
        update_id=f"answer-{body.call_id}-{digest}",
    )  # fmt: skip
    return receipt


async def complete(handle: WorkflowHandle[Any, Any], body: t.CompleteCall, wait: float | None) -> t.CompleteReceipt:
    """Complete a call waiting for an outside completion. The update id holds the completion's
    digest, so the same one sent again (a retried POST) counts once; another is refused."""
    digest = hashlib.sha256(f"{body.result}\n{body.fail}".encode()).hexdigest()[:12]
    receipt: t.CompleteReceipt = await update(
        handle, t.COMPLETE_UPDATE, body, t.CompleteReceipt, "no call of it waits for a completion", wait=wait,
        update_id=f"complete-{body.call_id}-{digest}",
    )  # fmt: skip
    return receipt


async def send_message(
    client: Client,
    run_id: str,
    text: str,
    *,
    by: str,
    message_id: str | None = None,
    wait: float | None = None,
) -> t.MessageReceipt:
    body = checks.body(t.SessionMessage, text=text, by=by, message_id=message_id or uuid.uuid4().hex)
    handle = client.get_workflow_handle(run_id)
    try:  # sent again with its message id, a message that arrived late counts once (the run keeps the ids)
        receipt: t.MessageReceipt = await update(handle, t.SESSION_SEND_UPDATE, body, t.MessageReceipt, wait=wait)
    except NoWorkerAnswered as err:
        raise NoWorkerAnswered(f"{err} with --message-id {body.message_id}") from None
    return receipt


async def end_session(
    client: Client, run_id: str, *, by: str, reason: str = "", wait: float | None = None
) -> t.EndReceipt:
    # A session ends once: a repeated end (one that timed out, then again) is the same update.
    receipt: t.EndReceipt = await update(
        client.get_workflow_handle(run_id),
        t.SESSION_END_UPDATE,
        checks.body(t.EndSession, by=by, reason=reason),
        t.EndReceipt,
        "nothing is left to end",
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
    try:
        answer: t.ExchangeAnswer = await handle.query(
            t.EXCHANGE_QUERY, query, result_type=t.ExchangeAnswer, rpc_timeout=rpc_timeout
        )
    except WorkflowQueryFailedError as err:
        if err.message.startswith(t.NOT_A_SESSION):
            raise AgentRunError(f"run {run_id} is not a session: it has no messages to answer") from None
        raise
    if answer.exchange is None and answer.execution:
        older = client.get_workflow_handle(run_id, run_id=answer.execution)
        answer = await older.query(t.EXCHANGE_QUERY, query, result_type=t.ExchangeAnswer, rpc_timeout=rpc_timeout)
    if answer.exchange is None and message > answer.messages:
        raise AgentRunError(f"run {run_id} has {answer.messages} message(s); there is no message {message}")
    return answer.exchange


async def wait_answer(
    client: Client, run_id: str, message: int, on_gap: Callable[[str, int], None] | None = None
) -> t.Exchange:
    """Message K's exchange once it is answered (or failed); AgentRunError if the run ends first.
    A read that times out, finds no server (a worker or the server restarting) or that a starved
    worker gave up on (SLOW_WORKER) is asked again, after `on_gap(what that means, how many in
    a row)`. Callers bound the wait with `asyncio.timeout` where they need to."""
    handle = client.get_workflow_handle(run_id)
    gaps = 0
    while True:
        try:
            exchange = await get_exchange(client, run_id, message, READ_TIMEOUT)
            gone = None if answered(exchange) else await ended(handle)
        except (RPCError, WorkflowQueryFailedError) as err:
            if isinstance(err, RPCError) and err.status not in PASSING:
                raise
            if isinstance(err, WorkflowQueryFailedError) and SLOW_WORKER not in err.message:
                raise
            said = gap_words(err) if isinstance(err, RPCError) else "its worker was too busy to answer in time"
            if await _ended_quietly(handle):  # a closed run's reads need a worker, and none answered
                raise AgentRunError(f"run {run_id} has ended and no worker answered ({said})") from None
            gaps += 1
            if on_gap is not None:
                on_gap(said, gaps)
            await asyncio.sleep(GAP_PAUSE)
            continue
        gaps = 0
        if answered(exchange):
            return exchange
        if gone is not None:
            exchange = await get_exchange(client, run_id, message, READ_TIMEOUT)  # answered just before the end?
            if exchange is not None and exchange.output is not None:
                return exchange
            raise AgentRunError(f"run {run_id} ended ({gone}) before answering message {message}")
        await asyncio.sleep(POLL)


async def _ended_quietly(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the run has closed; False when the server cannot say now (it is restarting)."""
    try:
        return await ended(handle) is not None
    except RPCError as err:
        if err.status in PASSING:
            return False
        raise


def answered(exchange: t.Exchange | None) -> TypeGuard[t.Exchange]:
    return exchange is not None and (exchange.output is not None or exchange.error is not None)


async def resolve(
    handle: WorkflowHandle[Any, Any], decision: t.ResolveCall, wait: float | None = DEFAULT_WAIT
) -> t.ResolveReceipt:
    """Decide a call in doubt. The decision is pinned to the time the call is in doubt now (read
    live when the caller did not say): the run's validator refuses it unless that doubt is still
    open, so it applies at most once. Each request has its own update id: under a shared one,
    Temporal answered a stale repeat with the first decision's receipt without asking the run."""
    if decision.doubt is None:
        gone = await ended(handle)  # before the query, which no worker may answer for an ended run
        if gone is not None:
            raise _gone(handle, t.WORKFLOW_NAME, gone, IN_DOUBT)
        read = timedelta(seconds=min(wait or 5.0, 5.0))
        try:
            live: t.RunStatus = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=read)
            decision.doubt = next((d.doubt for d in live.in_doubt if d.call_id == decision.call_id), None)
        except (RPCError, WorkflowQueryFailedError):
            pass  # no worker answers: the update below says so (NoWorkerAnswered)
    receipt: t.ResolveReceipt = await update(  # a refusal: DecisionRefused "run R refused it: why"
        handle,
        t.RESOLVE_UPDATE,
        decision,
        t.ResolveReceipt,
        IN_DOUBT,
        wait=wait,
        update_id=f"resolve-{decision.call_id}-{decision.doubt or 0}-{uuid.uuid4().hex[:12]}",
    )
    return receipt
