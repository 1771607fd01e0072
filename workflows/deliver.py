"""DeliverMessage: one message carried to a session by a schedule or a webhook (workflows/types/
deliver.py says why it is a run of its own). One activity, then done: its history is a start, an
activity and a result, so it replays as long as that activity's name and input stay.

Determinism rules for this module: no I/O, no clocks, no randomness; the message id is the run's
own workflow id, so an activity retried, or the whole run replayed, sends the same message."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from durable_agent_runner.workflows import types as t

# One attempt sends one update: a session takes it within seconds when a worker serves it.
ATTEMPT = timedelta(seconds=30)
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=[t.SESSION_REFUSED],
)


# Outside temporalio's sandbox, as AgentRun (workflows/agent.py says why); tests replay it inside.
# In it, every Worker built checked it by importing workflows.types afresh: ~0.4 s of CPU each.
@workflow.defn(name=t.DELIVER_WORKFLOW, sandboxed=False)
class DeliverMessage:
    @workflow.run
    async def run(self, delivery: t.Delivery) -> t.Delivered:
        call = t.DeliverCall(delivery=delivery, message_id=workflow.info().workflow_id[:200])
        delivered: t.Delivered = await workflow.execute_activity(
            t.DELIVER_ACTIVITY,
            call,
            result_type=t.Delivered,
            start_to_close_timeout=ATTEMPT,
            schedule_to_close_timeout=timedelta(seconds=t.DELIVER_SECONDS),
            retry_policy=RETRY,
            summary=f"send to session {delivery.session[:80]} (from {delivery.by[:60]})",
        )
        return delivered
