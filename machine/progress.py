"""What the interpreter feeds back about the run's progress, written into its state here: how it
began (its breakpoints and session, the agent the resolve froze, its prompt), what status says it
does (its phase and step), and how it ended. With these, no module of workflows/ changes the run's
state itself: it carries out steps and reports what happened (tests/test_layout.py holds that).

Pure: the workflow passes in what only it knows (a patch asked, the time).
"""

from __future__ import annotations

from durable_agent_runner.machine.approvals import decision_words
from durable_agent_runner.machine.doubts import resolution_words
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

# ------------------------------------------------------------------------------------ the start


def begin(s: RunState, input: t.RunInput) -> None:
    """A run's first execution (not one continued as new: `RunState.from_carry`)."""
    s.breakpoints = input.breakpoints
    s.session = SessionState() if input.session else None


def resolved(s: RunState, agent: t.AgentSpec) -> t.AgentSpec:
    """The agent the run answers with, its team frozen (by the resolve, or given by a parent)."""
    s.agent = agent
    return agent


def prompted(s: RunState, prompt: str) -> None:
    """A single run's prompt: the transcript's first message."""
    s.messages.append(t.UserMessage(content=prompt))


def live_tools(s: RunState, knows_how: bool) -> None:
    """A --live-tools fork runs its carried calls again first only on code that knows how (its
    patch); a history recorded before it ran none."""
    s.live_tools = s.live_tools and knows_how


# -------------------------------------------------------------------------- what status says


def set_phase(s: RunState, phase: t.Phase, step: str) -> t.Phase:
    """The run's phase and step; returns the phase before (machine/phase.py: whether the search
    attributes are due)."""
    before, s.phase = s.phase, phase
    s.last_step = step
    return before


def say(s: RunState, step: str) -> None:
    """What the run does now, within its phase."""
    s.last_step = step


def decided(s: RunState, record: t.ApprovalRecord) -> None:
    say(s, f"turn {s.turn}: {record.tool} {record.call_id} {decision_words(record)}")


def resolved_doubt(s: RunState, record: t.CallResolution) -> None:
    say(s, f"turn {s.turn}: {record.tool} {record.call_id} in doubt: {resolution_words(record)}")


# -------------------------------------------------------------------------------------- the end


def failed(s: RunState, message: str, kind: str) -> bool:
    """The run (or, in a session, the answer in progress) failed with `message`; whether the run
    itself ends with it (a session's answer fails alone)."""
    s.error, s.error_type = message, kind
    return s.session is None or s.session.current is None


def answered(s: RunState, output: str) -> None:
    """A single run's final answer."""
    s.output = output


def result(s: RunState, run_id: str, output: str, output_object: object, **session: object) -> t.RunResult:
    """What the run returns: its answer (or, for a session, its last), its usage and handoffs."""
    return t.RunResult.model_validate(
        {
            "run_id": run_id,
            "agent": s.agent_now.name,
            "output": output,
            "output_object": output_object,
            "turns": s.turn,
            "usage": s.usage,
            "usage_by_agent": s.usage_by_agent,
            "usage_by_model": s.usage_by_model,
            "handoffs": s.handoffs,
            **session,
        }
    )
