"""The rules a turn applies, pure: what a reply means (`decide`: the final output, the calls to run,
or a stop at the turn or budget limit), what a checked output becomes (`after_output`: the answer,
a retry with feedback, or a stop), and which guardrail trips (`tripwire`). The turn machine
(`workflows.turn`) applies them; `client.py export` re-runs `decide` offline on captured replies.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from durable_agent_runner.machine.calls import RunTools, budget_spent, plan_calls
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.types import AgentSpec, EventKind, HookResult, ModelReply

StopKind = Literal[
    "MaxTurnsExceeded",
    "TokenBudgetExceeded",
    "CostBudgetExceeded",
    "ModelBehaviorError",
    "InputGuardrailTripwireTriggered",
    "OutputGuardrailTripwireTriggered",
    "UnknownAgent",  # a handoff to an agent the run did not freeze (machine/handoff.py)
    "AgentHookFailed",  # a handoff's filter function that returned no messages
    "PausedTooLong",  # a pause nobody resumed within its limit (machine/control.py PAUSE_LIMIT)
    "BreakpointInvalid",  # a breakpoint before a tool no agent of the run has (machine/edits.py)
]


class Done(BaseModel):
    """Step: the answer (its output checked and its guardrails passed, if any)."""

    kind: Literal["done"] = "done"
    output: str
    output_object: Any = None


class Stop(BaseModel):
    """Step: the run (in a session: the answer) ends as failed, with `error` as the failure's type."""

    kind: Literal["stop"] = "stop"
    error: StopKind
    message: str


class Final(BaseModel):
    """`decide`: the model answered without asking for tools: the candidate final output."""

    kind: Literal["final"] = "final"
    output: str


class Retry(BaseModel):
    """`after_output`: the final output was refused: the model gets `feedback` and another turn."""

    kind: Literal["retry"] = "retry"
    feedback: str


def decide(
    agent: AgentSpec,
    turn: int,
    reply: ModelReply,
    *,
    limits: AgentSpec | None = None,
    max_turns: int | None = None,
    tokens_used: int = 0,
    always: Collection[str] = (),
    cost_used: float = 0.0,
) -> Final | RunTools | Stop:
    """What to do after model call number `turn` (1-based) of `agent` answered with `reply`.

    A reply without tool calls is the final output (its tokens are spent either way). A reply
    with tool calls runs them, unless this was the last turn allowed or the run has used its
    token or cost budget (`tokens_used`, `cost_used` count this reply): answering would need
    another model call.
    The run's turn limit and budget are those of `limits` (its first agent; default `agent`).
    `always` names the tools a person approved for the rest of the run.
    """
    limits = limits or agent
    limit = max_turns if max_turns is not None else limits.max_turns
    calls = reply.message.tool_calls
    if not calls:
        return Final(output=reply.message.content or "")
    names = ", ".join(c.name[:64] for c in calls)
    if turn >= limit:
        message = f"max_turns ({limit}) exceeded: turn {turn} still asked for tools ({names})"
        return Stop(error="MaxTurnsExceeded", message=message)
    spent = budget_spent(limits.token_budget, tokens_used, limits.cost_budget_usd, cost_used)
    if spent == "TokenBudgetExceeded":
        message = (
            f"token budget spent: {tokens_used} of {limits.token_budget} tokens used by turn {turn}, "
            f"which still asked for tools ({names})"
        )
        return Stop(error=spent, message=message)
    if spent == "CostBudgetExceeded":
        message = (
            f"cost budget spent: ${cost_used:.4f} of ${limits.cost_budget_usd or 0:.4f} used by turn {turn}, "
            f"which still asked for tools ({names})"
        )
        return Stop(error=spent, message=message)
    return plan_calls(agent, calls, always)


def after_output(agent: AgentSpec, output: str, check: HookResult | None, refusals: int) -> Done | Retry | Stop:
    """After the agent's output type checked a final output (`check` is None for plain text).
    `refusals` counts this agent's refused outputs in this run, this one included."""
    if check is None:
        return Done(output=output)
    if check.invalid is None:
        return Done(output=output, output_object=check.output)
    if refusals > agent.output_retries:
        message = (
            f"{agent.name} gave no valid {agent.output_name or 'output'} after {refusals} tries; "
            f"last problem: {check.invalid}"
        )
        return Stop(error="ModelBehaviorError", message=message)
    feedback = (
        f"Your final answer is not a valid {agent.output_name or 'output'}: {check.invalid}\n"
        "Answer again with only JSON that matches the required schema."
    )
    return Retry(feedback=feedback)


def guardrails_ran(
    s: RunState, kind: Literal["input", "output"], results: Sequence[tuple[str, HookResult]], now: datetime
) -> Stop | None:
    """The agent's guardrails of `kind` answered: each verdict told in the story, in the agent's
    order, and the one that trips the run, if any (`tripwire`)."""
    for name, result in results:
        verdict = "tripped" if result.tripwire else "passed"
        s.event(now, EventKind.GUARDRAIL, detail=f"{kind} guardrail {name}: {verdict}")
    return tripwire(kind, results)


def tripwire(kind: Literal["input", "output"], results: Sequence[tuple[str, HookResult]]) -> Stop | None:
    """The first guardrail (in the agent's order) whose tripwire fired ends the run."""
    fired = next(((name, r) for name, r in results if r.tripwire), None)
    if fired is None:
        return None
    name, result = fired
    info = json.dumps(result.info, ensure_ascii=False, default=str)
    info = info if len(info) <= 500 else info[:499] + "…"
    error: StopKind = "InputGuardrailTripwireTriggered" if kind == "input" else "OutputGuardrailTripwireTriggered"
    return Stop(error=error, message=f"{kind} guardrail '{name}' tripped: {info}")
