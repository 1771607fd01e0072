"""The wait of a call completed from outside (`@tool(completes="outside")`, docs/outside-completion.md):
its tool's activity started the work and returned; the run waits, durably, for the `complete_call`
update (recorded at the door by the handler once its validator passed) or for the tool's timeout.

The wait is workflow state and one timer, not an activity: a worker or server restart replays it
with nothing run again (the tool's start ran once), and no task token leaves the worker. It
notifies no one: it waits for a system; a call that times out to a person goes in doubt, which does.

Determinism rules as for all of workflows/: no I/O, no clocks, no randomness, no threads.
"""

from __future__ import annotations

from temporalio import workflow

from durable_agent_runner.machine import call as machine
from durable_agent_runner.workflows.notify_steps import NotifySteps


class OutsideSteps(NotifySteps):
    """The outside wait of a call; `CallSteps` builds on it."""

    async def _await_outside(self, c: machine.Call, step: machine.AwaitOutside) -> machine.Happened:
        s = self._s

        def completed() -> bool:
            return s.outside.completed(c.call_id) is not None

        try:
            await workflow.wait_condition(
                completed, timeout=step.timeout, timeout_summary=f"outside completion timeout for {c.tool} {c.call_id}"
            )
        except TimeoutError:
            if not completed():  # a completion taken in the same task as the timer's end counts
                return machine.TimedOut(call_id=c.call_id)
        record = s.outside.completed(c.call_id)
        assert record is not None
        return machine.Completed(record=record)
