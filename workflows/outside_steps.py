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
from durable_agent_runner.workflows import types as t
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

    def _took_outside(self, agent: t.AgentSpec, moved: machine.Transition, before: machine.Stage | None) -> None:
        """The run's book of outside waits, kept with the call: a wait that starts, one the run
        ended itself (its timeout, told to the model), one that went to a person."""
        s, c = self._s, moved.call
        if c.stage is machine.Stage.OUTSIDE and before is not machine.Stage.OUTSIDE:
            spec = agent.tool(c.tool)
            wait = next(step for step in moved.steps if isinstance(step, machine.AwaitOutside))
            assert spec is not None and spec.outside is not None
            now = workflow.now()
            pending = t.PendingOutside(
                call_id=c.call_id, tool=c.tool, turn=c.turn, since=now, deadline=now + wait.timeout,
                started=c.started[:2000], on_timeout=spec.outside.on_timeout,
            )  # fmt: skip
            s.outside.wait(pending, spec.outside)
        elif before is machine.Stage.OUTSIDE:
            record = c.completion
            if record is not None and record.automatic:
                s.outside.settle(record)
            elif record is None:
                s.outside.expire(c.call_id)  # to a person: in doubt
