"""A handoff, decided here: which frozen member of the run takes over, what it sees of the
conversation (a built-in filter, or the agent's own filter function, a hook the workflow calls),
and the record the run keeps. Pure; the workflow calls the hook, if any, and reports its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durable_agent_runner.machine import memory
from durable_agent_runner.machine.calls import PlannedCall
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t


@dataclass(frozen=True)
class Handoff:
    """A planned handoff: to `target`, through the agent's filter function `hook` (its name), if any."""

    call: PlannedCall
    target: t.AgentSpec
    hook: str | None


def plan(s: RunState, agent: t.AgentSpec, call: PlannedCall) -> Handoff | Stop:
    """The handoff `call` asks for. A built-in filter is applied here, at once; an unknown target
    is a Stop (impossible by construction: the resolve froze every agent the run can reach)."""
    assert s.agent is not None
    target = s.agent.member(call.target)
    spec = next((h for h in agent.handoffs if h.agent == call.target), None)
    if target is None or spec is None:
        return Stop(message=f"cannot hand off to '{call.target}': not part of this run", error="UnknownAgent")
    if spec.input_filter in memory.HANDOFF_FILTERS:
        s.replace_messages(memory.HANDOFF_FILTERS[spec.input_filter](s.messages))
        return Handoff(call, target, None)
    return Handoff(call, target, spec.input_filter.removeprefix("hook:") if spec.input_filter else None)


def handed_off(
    s: RunState, agent: t.AgentSpec, h: Handoff, filtered: list[t.Message] | None, now: datetime
) -> t.HandoffRecord | Stop:
    """The handoff done: the filter function's messages (`filtered`, when it has one) are the
    conversation from now on, the target is in charge, and the record is kept."""
    if h.hook is not None:
        if filtered is None:
            return Stop(message=f"handoff filter '{h.hook}' returned no messages", error="AgentHookFailed")
        s.replace_messages(filtered)
    record = t.HandoffRecord(
        from_agent=agent.name, to_agent=h.target.name, turn=s.turn, at=now, call_id=h.call.call.call_id
    )
    s.handoffs.append(record)
    s.current = h.target.name
    return record
