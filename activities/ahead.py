"""The model call a routed tool's activity makes once its tool has run (machine/requests.py says
when the turn asks for it): the next request, built from the worker's cache or the run's query,
sent as the model activity sends it. The turn takes the reply only for exactly the request it
would make itself; this side never decides anything.

What it keeps of the activity's contract: the tool runs within its own timeout; once it has run,
its result rides in every heartbeat, so an attempt lost during the model call (a worker killed)
returns it on retry without running the tool again; and a model call that fails in any way is
no failure of the activity: the result comes back alone and the turn calls the model as ever,
with its retries. Streamed text reaches watchers as the model activity's does (heartbeat details).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from temporalio import activity

from durable_agent_runner import telemetry
from durable_agent_runner.activities.context_cache import digest_of, tool_message
from durable_agent_runner.activities.model import BEAT_WITH, ModelActivities, beat
from durable_agent_runner.workflows.types import AheadReply, ModelProgress, ToolCallInput, ToolResult

log = logging.getLogger(__name__)


async def call_ahead(model: ModelActivities, input: ToolCallInput, result: ToolResult) -> AheadReply | None:
    """The call `input.then` asks for, with `result` added to the run's messages; None when it
    failed (logged), so the turn makes it itself."""
    then = input.then
    assert then is not None
    began, began_at = time.monotonic(), datetime.now(UTC)
    run = activity.info().workflow_id or ""
    tool = tool_message(result)
    token = BEAT_WITH.set((result.model_dump(mode="json"),))
    try:  # the result goes out now (throttled by the SDK: a call over within its beat costs none)
        beat(ModelProgress(turn=then.call.turn, attempt=activity.info().attempt))
        found = model.cache.after_tool(run, then.upto, tool) if model.cache is not None else None
        if found is None:
            agent, messages = await model.read_context(then.upto)
            messages.append(tool)
            found = agent, messages, digest_of(messages)
        agent, messages, digest = found
        request = then.call.model_copy(update={"digest": digest, "transcript_len": len(messages)})
        with telemetry.model_call_ahead(request) as traced:
            reply = await model.call(request, agent, messages, began)
            traced(reply)
        return AheadReply(request=request, reply=reply, began_at=began_at)
    except Exception as err:  # any failure: the turn calls the model itself, with its retries
        log.info("model call ahead of turn %d not made: %s", then.call.turn, type(err).__name__)
        return None
    finally:
        BEAT_WITH.reset(token)
