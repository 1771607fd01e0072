"""A message delivered to a session by someone who cannot wait for it to be taken: a schedule (whose
action can only start a workflow) or a webhook (which answers before any worker acts). Each
delivery is one small `DeliverMessage` run (workflows/deliver.py) that sends the session's
`session.send` update from an activity, under the delivery's own id, so it counts once however
often it is retried. Pure data, safe inside the workflow sandbox."""

from __future__ import annotations

from pydantic import Field

from durable_agent_runner.workflows.types.control import MAX_MESSAGE_CHARS
from durable_agent_runner.workflows.types.transcript import Contract

DELIVER_WORKFLOW = "DeliverMessage"
DELIVER_ACTIVITY = "agent.deliver_message"
# How long a delivery keeps trying to reach its session (no worker, a session between tasks);
# past it the delivery fails and says so, and the session never sees the message.
DELIVER_SECONDS = 3600
# A session that refuses the message (ended, not a session, the message refused) is told once:
# retrying would not change its answer.
SESSION_REFUSED = "SessionRefused"


class Delivery(Contract):
    """The input of a DeliverMessage run: what to send, to which session, from whom."""

    session: str = Field(min_length=1, max_length=1000)  # the session's run id
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    by: str = Field(default="someone", max_length=200)  # "schedule nightly", "hook github"


class DeliverCall(Contract):
    """The activity's input: the delivery and the id that makes a resend count once."""

    delivery: Delivery
    message_id: str = Field(min_length=1, max_length=200)


class Delivered(Contract):
    """What the session answered: the message's number K in it, and whether it was a repeat."""

    session: str
    message: int
    duplicate: bool = False
