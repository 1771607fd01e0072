"""A message delivered to a session by a DeliverMessage run (what a schedule or a webhook with a
`session` starts): given once however often it is started, its history replays, and a session
that refuses it (ended) fails the delivery at once with the session's reason."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.deliveries import NoSession, delivery_run_id, send_once
from durable_agent_runner.workflows import types as t
from tests.helpers import replay


async def test_a_delivery_gives_its_session_one_message_however_often_it_is_started(client, task_queue, worker_factory):
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        session = await agents.start_session("demo")
        run_id = delivery_run_id("hook-test", "delivery-1")
        first = await send_once(client, task_queue, run_id, session.id, "Weather in Tokyo?", by="hook test")
        again = await send_once(client, task_queue, run_id, session.id, "Weather in Tokyo?", by="hook test")
        assert (first.started, again.started, first.run_id, again.run_id) == (True, False, run_id, run_id)
        handle = client.get_workflow_handle(run_id, result_type=t.Delivered)
        delivered = await handle.result()
        assert (delivered.session, delivered.message, delivered.duplicate) == (session.id, 1, False)
        exchange = await session.exchange(1, wait=60)
        assert exchange.prompt == "Weather in Tokyo?" and exchange.by == "hook test" and exchange.output
        await replay(handle)
        status = await agents.get(run_id).status()
        assert status.status == "completed" and status.note and status.note.startswith("a delivery: it gives a session")
        await session.end("done")
        await client.get_workflow_handle(session.id).result()
        # Ended, the session takes no message: send_once starts nothing and says why.
        with pytest.raises(NoSession, match=r"is not a running session \(completed\): the message was not sent"):
            await send_once(client, task_queue, f"{run_id}-late", session.id, "anyone?", by="hook test")
        # A delivery that starts all the same (the session ended after the check) fails at once with
        # the session's reason, never retried; status says that reason, not "Activity task failed".
        late = await client.start_workflow(
            t.DELIVER_WORKFLOW,
            t.Delivery(session=session.id, text="anyone?", by="hook test"),
            id=f"{run_id}-late",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await late.result()
        shown = await agents.get(late.id).status()
    cause = failed.value.cause
    assert "refused the message: it has ended (completed)" in str(cause.cause if cause.cause else cause)
    assert shown.error is not None and shown.error.type == t.SESSION_REFUSED, shown.error
    assert shown.error.message.endswith("refused the message: it has ended (completed)"), shown.error
