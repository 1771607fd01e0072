"""The DeliverMessage run's one activity (workflows/deliver.py): send a session its message, as
`client.py send` sends one (the `session.send` update), under the delivery's id so a retried
attempt counts once. A session that refuses it (gone, ended, not a session, the message refused
by its validator) fails the delivery at once and says why; anything else (no worker yet, the
server restarting) is retried by Temporal within the delivery's bound."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.workflows import types as t

# Below the attempt's 30 s (workflows/deliver.py): the attempt ends with our error, not a timeout.
UPDATE_TIMEOUT = timedelta(seconds=25)
LIVE = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


def refused(session: str, why: str) -> ApplicationError:
    return ApplicationError(f"session {session} refused the message: {why}", type=t.SESSION_REFUSED, non_retryable=True)


class DeliverActivities:
    """The deliver activity, bound to the worker's Temporal client (to reach the session)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name=t.DELIVER_ACTIVITY)
    async def deliver(self, call: t.DeliverCall) -> t.Delivered:
        session = call.delivery.session
        handle = self.client.get_workflow_handle(session)
        try:
            desc = await handle.describe(rpc_timeout=UPDATE_TIMEOUT)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise refused(session, "no such run") from None
            raise
        if desc.status not in LIVE:
            raise refused(session, f"it has ended ({desc.status.name.lower() if desc.status else 'ended'})")
        body = t.SessionMessage(text=call.delivery.text, by=call.delivery.by, message_id=call.message_id)
        try:
            receipt: t.MessageReceipt = await handle.execute_update(
                t.SESSION_SEND_UPDATE,
                body,
                id=call.message_id,
                result_type=t.MessageReceipt,
                rpc_timeout=UPDATE_TIMEOUT,
            )
        except WorkflowUpdateFailedError as err:  # the session's validator said no: it will say no again
            cause = err.cause
            raise refused(
                session, cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            ) from None
        return t.Delivered(session=session, message=receipt.message, duplicate=receipt.duplicate)
