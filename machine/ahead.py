"""The model call a routed tool's activity makes once its tool has run (CallAhead), pure.

A turn whose tool is a regular activity costs two dispatches and two workflow tasks: the tool's
activity, then the model's. When the tool is the turn's only call and nothing can come between
its result and the next model call, its activity makes that call itself and brings the reply
back with the result: one activity and one workflow task a turn (6 history events, not 12).

    plan_ahead(…)  → the request the turn would make next, for the tool's activity (None: not now)
    same_call(…)   → whether a reply made ahead answers exactly the call the turn makes now

The turn decides, as ever: it takes the reply only for the very request it makes (same agent,
model, turn, transcript length and hash, cheap calls, output cap). Anything that changed while
the tool ran (a pause, a steer, an edit, a suggested continue-as-new) drops it; its tokens count.
No Temporal, no I/O, no clocks, no randomness (tests/test_ahead.py).
"""

from __future__ import annotations

from durable_agent_runner.machine import edits
from durable_agent_runner.machine.calls import PlannedCall, RunTools, runs, with_reply
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.types import AgentSpec, ModelCallInput, WithReply


def ahead_of(step: RunTools, agent: AgentSpec) -> PlannedCall | None:
    """The call whose activity may make the next model call itself: the turn's only call, a
    routed tool activity asked about by no one (not `once`: its attempt's end is a person's to
    judge; not local, run with the reply, or a child run), of an agent whose model calls are
    activities (a local model call brings no streamed text and no heartbeats to carry it)."""
    if len(step.calls) != 1 or agent.local_model_call:
        return None
    planned = step.calls[0]
    if planned.action != "tool" or planned.approval != "none":
        return None
    return planned if runs(planned, agent, planned.call.arguments) == "activity" else None


def plan_ahead(
    step: RunTools, s: RunState, first: AgentSpec, limits: AgentSpec, number: int, *, planned: bool
) -> ModelCallInput | None:
    """The next model call (number `number + 1` of this answer) as the turn would make it once
    the lone call's result is in, when nothing else is due before it: no budget to check or
    reserve (`planned`: the run keeps no ledger and reruns no fork's calls), no breakpoint,
    asked-for pause or continue-as-new."""
    agent = s.agent_now
    if not planned or ahead_of(step, agent) is None or s.live_tools:
        return None
    if first.token_budget is not None or first.cost_budget_usd is not None:
        return None
    if s.turns_here >= first.continue_as_new_after or agent.breakpoint or s.pause_reason() is not None:
        return None
    if edits.before_model(s.breakpoints, s.turn + 1) is not None:
        return None
    cheap = with_reply(
        agent,
        number + 1,
        limits=limits,
        tokens_used=s.usage.total_tokens,
        cost_used=s.usage.cost_usd,
        breakpoints=s.breakpoints,
    )
    return ModelCallInput(
        agent=agent.name, model=agent.model, turn=s.turn + 1, transcript_len=len(s.messages) + 1, with_reply=cheap
    )


def same_call(made: ModelCallInput, s: RunState, guard: str | None, cheap: WithReply | None, cap: int | None) -> bool:
    """Whether a call made ahead is the very call the turn makes now: same agent, model and
    turn, the transcript it read (length and hash), the cheap calls and the output cap."""
    agent = s.agent_now
    return (
        guard is None
        and (made.agent, made.model, made.turn, made.transcript_len)
        == (agent.name, agent.model, s.turn, len(s.messages))
        and made.digest == s.digest()
        and made.with_reply == cheap
        and made.max_output_tokens == cap
    )
