"""A fork made with `--live-tools`, pure: before its first model call it runs the calls of its
carried replies again, each reply's calls as that turn's model asked for them (no model call),
and takes their fresh results in place of the recorded ones. By default a fork does none of this:
the carried transcript already holds every result, so nothing before the fork point runs again.

    Reruns.of(state).next(state) → RerunRecorded (the calls of one recorded turn), the rest … then None
    merged(messages, results) → the transcript with the fresh results in place of the recorded

What runs again: each call that ran (a tool, or an agent used as a tool: a new child run), as the
agent in charge at that turn. What does not: a handoff (the run is already with its target), a
call that was answered without running (an unknown tool, a second handoff), one a person rejected
or dropped. A call that needs approval asks for it again, and a call of a `once` tool goes to a
person as a call in doubt does (`calls.asks_first`): a fork never re-runs either without a person.

No Temporal, no I/O, no clocks, no randomness (tests/test_fork_reuse.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from durable_agent_runner.machine.calls import DROPPED, RunTools, plan_calls
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.types import AgentSpec, AssistantMessage, Message, ToolMessage


@dataclass(frozen=True)
class RerunRecorded:
    """Step: run again the calls model call `turn` asked for (its reply as recorded), as `agent`."""

    turn: int
    agent: AgentSpec
    plan: RunTools


@dataclass(frozen=True)
class Reran:
    """Outcome: the fresh results, by call id."""

    results: dict[str, ToolMessage]


def recorded(state: RunState) -> list[RerunRecorded]:
    """The calls to run again, a step per recorded reply that has any, oldest first. The replies
    are numbered back from the fork point (the last is model call `state.turn`: a handoff's
    input filter may have dropped earlier ones), each run by the agent in charge at its turn."""
    replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
    results = {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}
    steps = []
    for turn, reply in enumerate(replies, start=max(state.turn - len(replies) + 1, 1)):
        agent = in_charge(state, turn)
        plan = plan_calls(agent, reply.tool_calls, ())
        again = [
            p.model_copy(update={"again": True})
            for p in plan.calls
            if p.action in ("tool", "child") and _ran(results.get(p.call.call_id))
        ]
        if again:
            steps.append(RerunRecorded(turn=turn, agent=agent, plan=RunTools(calls=again)))
    return steps


def in_charge(state: RunState, turn: int) -> AgentSpec:
    """The agent that made model call `turn`: the run's first, or the last one handed to before it."""
    assert state.agent is not None
    to = [h.to_agent for h in state.handoffs if h.turn < turn]
    return (state.agent.member(to[-1]) if to else None) or state.agent


def _ran(result: ToolMessage | None) -> bool:
    """Whether the recorded result is of a call that ran (or was at least let run)."""
    if result is None:
        return False
    if result.approval is not None and not result.approval.approved:
        return False
    return not (result.is_error and result.content.endswith(DROPPED))


def merged(messages: list[Message], results: dict[str, ToolMessage]) -> list[Message]:
    """The transcript with each fresh result in place of the recorded one of its call."""
    return [results.get(m.call_id, m) if isinstance(m, ToolMessage) else m for m in messages]


@dataclass(frozen=True)
class Reruns:
    """The steps still to carry out (a value: `next` returns the rest); the run's turn is each
    step's while it runs, then back to the fork point."""

    steps: tuple[RerunRecorded, ...]
    back_to: int

    @classmethod
    def of(cls, state: RunState) -> Reruns:
        return cls(tuple(recorded(state)), state.turn)

    def next(self, state: RunState) -> tuple[RerunRecorded | None, Reruns | None]:
        """The next step and the steps after it; (None, None) once all ran (the turn is back)."""
        if self.steps:
            state.turn = self.steps[0].turn
            return self.steps[0], Reruns(self.steps[1:], self.back_to)
        state.turn = self.back_to
        return None, None
