"""What the run asks of an activity, decided here: a model call's request and the words the Web
UI shows for it, and one run of a tool (its input, whether its activity makes the next model
call too, its bounds). Pure; the workflow schedules what these return.

The model call a routed tool's activity makes once its tool has run (CallAhead): a turn whose
tool is a regular activity costs two dispatches and two workflow tasks, the tool's activity, then
the model's. When the tool is the turn's only call and nothing can come between its result and
the next model call, its activity makes that call itself and brings the reply back with the
result: one activity and one workflow task a turn (6 history events, not 12).

    plan_ahead(…)  → the request the turn would make next, for the tool's activity (None: not now)
    same_call(…)   → whether a reply made ahead answers exactly the call the turn makes now

The turn decides, as ever: it takes the reply only for the very request it makes (same agent,
model, turn, transcript length and hash, cheap calls, output cap). Anything that changed while
the tool ran (a pause, a steer, an edit, a suggested continue-as-new) drops it; its tokens count
(tests/test_ahead.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from durable_agent_runner.machine import edits
from durable_agent_runner.machine.call_types import Call, RunTool
from durable_agent_runner.machine.calls import PlannedCall, RunTools, describe_call, runs, with_reply
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

# The activity ends an attempt itself at the agent's model timeout, with a clear error; Temporal's
# own start-to-close is a backstop a little later (a worker stuck in a way the activity can't see).
MODEL_TIMEOUT_MARGIN = timedelta(seconds=15)
# The model activity heartbeats every 2 s (more often while streaming): a worker that dies
# mid-call is noticed within 10 s and the call moves to another worker.
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)


def who(s: RunState, agent: t.AgentSpec) -> str:
    """`refunds · ` in a summary when the run has a team, so the UI says which agent acts."""
    return f"{agent.name} · " if s.agent is not None and s.agent.team else ""


def model_call(
    s: RunState, agent: t.AgentSpec, capture: bool, with_reply: t.WithReply | None, cap: int | None
) -> tuple[t.ModelCallInput, str]:
    """The turn's model call (`with_reply`: the cheap calls it may run with its reply; `cap`: the
    max output tokens the budget has left room for) and its summary in the Web UI."""
    n = len(s.messages)
    request = t.ModelCallInput(
        agent=agent.name,
        model=agent.model,
        turn=s.turn,
        transcript_len=n,
        capture=capture,
        digest=s.digest(),
        with_reply=with_reply,
        max_output_tokens=cap,
    )
    model = agent.model or "the worker's default model"
    summary = f"turn {s.turn} · {who(s, agent)}model {model} · {n} message{'' if n == 1 else 's'}"
    return request, summary + (" · local tools with the reply" if with_reply is not None else "")


@dataclass(frozen=True)
class ToolRun:
    """One run of a tool as its activity is scheduled."""

    request: t.ToolCallInput
    summary: str
    timeout: timedelta  # start to close
    heartbeat: timedelta
    ahead: bool  # its activity makes the next model call too, once the tool has run


def tool_run(
    s: RunState, agent: t.AgentSpec, c: Call, step: RunTool, ahead: tuple[str, t.ModelCallInput] | None
) -> ToolRun:
    """The tool's activity input and bounds. `ahead`: the call whose activity is to make the next
    model call (machine/calls.py `call_ahead`), taken only by a routed run of that very call with
    the arguments the model asked for (no person changed them); its bounds then hold the model
    call too, and it beats at the model call's pace."""
    spec = agent.tool(c.tool)
    assert spec is not None  # the plan answers unknown tools itself
    then = None
    if ahead is not None and ahead[0] == c.call_id and step.how == "activity":
        if step.arguments == c.planned.call.arguments:
            then = t.CallAhead(upto=len(s.messages), call=ahead[1], tool_timeout_seconds=spec.timeout_seconds)
    args = step.args
    request = t.ToolCallInput(
        call_id=c.call_id,
        tool=c.tool,
        arguments="" if args is not None else step.arguments,
        args=args,
        idempotency_key=step.idempotency_key,
        turn=s.turn,
        agent=agent.name,
        agent_version=agent.version or None,
        then=then,
    )
    summary = f"turn {s.turn} · tool: {describe_call(c.planned.call)}"
    timeout, beat = timedelta(seconds=spec.timeout_seconds), timedelta(seconds=spec.heartbeat_seconds)
    if then is not None:  # the tool keeps its own bound inside; the model call beats every 2 s
        timeout += timedelta(seconds=agent.model_timeout_seconds) + MODEL_TIMEOUT_MARGIN
        beat = max(beat, MODEL_HEARTBEAT_TIMEOUT)
        summary += f" · then model {agent.model or 'default'}"
    return ToolRun(request, summary, timeout, beat, then is not None)


# ------------------------------------------------------------------ the model call made ahead


def ahead_of(step: RunTools, agent: t.AgentSpec) -> PlannedCall | None:
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
    step: RunTools, s: RunState, first: t.AgentSpec, limits: t.AgentSpec, number: int, *, planned: bool
) -> t.ModelCallInput | None:
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
    return t.ModelCallInput(
        agent=agent.name, model=agent.model, turn=s.turn + 1, transcript_len=len(s.messages) + 1, with_reply=cheap
    )


def same_call(
    made: t.ModelCallInput, s: RunState, guard: str | None, cheap: t.WithReply | None, cap: int | None
) -> bool:
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
