"""One turn of an agent run, as a pure state machine; the workflow only carries out its steps.

    decide(reply)            → Final | RunTools(planned calls) | Stop
    with_reply(agent, …)     → which cheap calls the model call may run with its reply
    taken(asked, reply)      → the results of those the turn may use, by call id
    checked(call, approval)  → the call runs, waits for a person, or is answered at once
    after_tools(results)     → the tool messages, in the order the model asked for the calls
    after_output(check)      → Done | Retry(feedback for the model) | Stop
    tripwire(guardrails)     → Stop | None

No Temporal, no I/O, no clocks, no randomness: each function is unit-tested on its own
(tests/test_turn.py), and `cli/export.py` re-runs `decide` on captured replies offline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from workflows.types import (
    AgentSpec,
    AssistantMessage,
    Breakpoints,
    HookResult,
    Message,
    ModelReply,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    WithReply,
)

StopKind = Literal[
    "MaxTurnsExceeded",
    "TokenBudgetExceeded",
    "CostBudgetExceeded",
    "ModelBehaviorError",
    "InputGuardrailTripwireTriggered",
    "OutputGuardrailTripwireTriggered",
]


class Final(BaseModel):
    """The model answered without asking for tools: the candidate final output."""

    kind: Literal["final"] = "final"
    output: str


class PlannedCall(BaseModel):
    """What the run does with one call the model asked for.

    action: `tool` runs the tool activity; `child` runs the agent behind the tool as a child
    run; `handoff` transfers the run to `target`; `answer` tells the model `answer` at once
    (an unknown tool, a second handoff). approval: `check` asks the agent's policy (the hook
    activity validates the arguments first); `auto` is approved by an earlier "always"."""

    call: ToolCall
    action: Literal["tool", "child", "handoff", "answer"]
    approval: Literal["none", "check", "auto"] = "none"
    target: str = ""
    answer: str = ""


class RunTools(BaseModel):
    kind: Literal["run_tools"] = "run_tools"
    calls: list[PlannedCall]

    @property
    def handoff(self) -> PlannedCall | None:
        return next((c for c in self.calls if c.action == "handoff"), None)


class Stop(BaseModel):
    """The run ends as failed, with `error` as the failure's type."""

    kind: Literal["stop"] = "stop"
    error: StopKind
    message: str


class Done(BaseModel):
    kind: Literal["done"] = "done"
    output: str
    output_object: Any = None


class Retry(BaseModel):
    """The final output was refused: the model gets `feedback` and another turn."""

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
    budget = limits.token_budget
    if budget is not None and tokens_used >= budget:
        message = (
            f"token budget spent: {tokens_used} of {budget} tokens used by turn {turn}, "
            f"which still asked for tools ({names})"
        )
        return Stop(error="TokenBudgetExceeded", message=message)
    dollars = limits.cost_budget_usd
    if dollars is not None and cost_used >= dollars:
        message = (
            f"cost budget spent: ${cost_used:.4f} of ${dollars:.4f} used by turn {turn}, "
            f"which still asked for tools ({names})"
        )
        return Stop(error="CostBudgetExceeded", message=message)
    return RunTools(calls=[_plan(agent, call, always, i, calls) for i, call in enumerate(calls)])


def _plan(
    agent: AgentSpec, call: ToolCall, always: Collection[str], index: int, calls: Sequence[ToolCall]
) -> PlannedCall:
    handoff = next((h for h in agent.handoffs if h.tool_name == call.name), None)
    if handoff is not None:
        first = next(c for c in calls if any(h.tool_name == c.name for h in agent.handoffs))
        if first is not call:
            answer = f"error: only one handoff per turn; the run already went to '{_target(agent, first)}'"
            return PlannedCall(call=call, action="answer", answer=answer)
        return PlannedCall(call=call, action="handoff", target=handoff.agent)
    spec = agent.tool(call.name)
    if spec is None:
        known = [*(t.name for t in agent.tools), *(h.tool_name for h in agent.handoffs)]
        return PlannedCall(call=call, action="answer", answer=unknown_tool(call.name, known))
    approval: Literal["none", "check", "auto"] = "none"
    if spec.approval != "never":
        approval = "auto" if call.name in always else "check"
    if spec.agent is not None:
        return PlannedCall(call=call, action="child", approval=approval, target=spec.agent)
    return PlannedCall(call=call, action="tool", approval=approval)


def with_reply(
    agent: AgentSpec,
    turn: int,
    *,
    limits: AgentSpec | None = None,
    tokens_used: int = 0,
    cost_used: float = 0.0,
    breakpoints: Breakpoints | None = None,
) -> WithReply | None:
    """Which calls the reply to model call number `turn` (as `decide` counts) may bring back
    already run: the agent's cheap ones (`@tool(local=True)`, no approval, not a child run,
    not named like a handoff), on a worker holding its version. None when the turn could not
    run them: the run's last turn, or a breakpoint before every tool call. `tokens_used` and
    `cost_used` count the replies so far; the worker checks the reply's own against the rest."""
    limits = limits or agent
    if not agent.version or turn >= limits.max_turns or (breakpoints is not None and breakpoints.before_tools):
        return None
    handoffs = {h.tool_name for h in agent.handoffs}
    tools = [
        s.name for s in agent.tools if s.local and s.approval == "never" and s.agent is None and s.name not in handoffs
    ]
    if not tools:
        return None
    tokens, dollars = limits.token_budget, limits.cost_budget_usd
    return WithReply(
        version=agent.version,
        tools=tools,
        pause_on=sorted(breakpoints.tools) if breakpoints is not None else [],
        tokens_left=tokens - tokens_used if tokens is not None else None,
        cost_left=dollars - cost_used if dollars is not None else None,
    )


def taken(asked: Sequence[str], reply: ModelReply) -> dict[str, tuple[str, ToolResult]]:
    """The calls run with `reply` whose results the turn may use, by call id, with the
    arguments they ran with: those whose call kept the id the model gave it (`asked`, the ids
    before the run made them unique), the id the worker built the call's idempotency key from."""
    ran = {r.call_id: r for r in reply.tool_results}
    return {
        call.call_id: (call.arguments, ran[call.call_id])
        for before, call in zip(asked, reply.message.tool_calls, strict=True)
        if before == call.call_id and call.call_id in ran and ran[call.call_id].tool == call.name
    }


def _target(agent: AgentSpec, call: ToolCall) -> str:
    return next(h.agent for h in agent.handoffs if h.tool_name == call.name)


def unknown_tool(name: str, available: Sequence[str]) -> str:
    """What the model is told about a tool it named that does not exist (workflow and worker alike)."""
    shown = name if len(name) <= 64 else name[:63] + "…"
    return f"error: unknown tool '{shown}'; available tools: {', '.join(available) or 'none'}"


def checked(planned: PlannedCall, result: HookResult) -> Literal["run", "ask"] | ToolMessage:
    """After the hook checked a call's arguments and the approval policy: run it, ask a
    person, or tell the model its arguments are invalid (no person is asked about those)."""
    if result.invalid is not None:
        call = planned.call
        return ToolMessage(call_id=call.call_id, name=call.name, content=result.invalid, is_error=True)
    return "ask" if result.needs_approval else "run"


def answered(planned: PlannedCall) -> ToolMessage:
    """The tool message of a call that runs nothing: an error answer, or a handoff's receipt."""
    call = planned.call
    if planned.action == "handoff":
        return ToolMessage(call_id=call.call_id, name=call.name, content=json.dumps({"assistant": planned.target}))
    return ToolMessage(call_id=call.call_id, name=call.name, content=planned.answer, is_error=True)


def without_dropped(step: RunTools, dropped: Mapping[str, str]) -> RunTools:
    """The plan with each call a person dropped (while the run was paused) answered instead of run."""
    return RunTools(
        calls=[
            PlannedCall(
                call=p.call, action="answer", answer=f"error: {dropped[p.call.call_id]} dropped this call before it ran"
            )
            if p.call.call_id in dropped
            else p
            for p in step.calls
        ]
    )


def after_tools(step: RunTools, results: dict[str, ToolMessage]) -> list[ToolMessage]:
    """Every call's message, in the order the model asked for the calls, whatever order they
    finished in; calls that ran nothing are answered here."""
    return [results[p.call.call_id] if p.call.call_id in results else answered(p) for p in step.calls]


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


# ---------------------------------------------------------------------------- handoff filters


def _remove_tools(messages: list[Message]) -> list[Message]:
    kept: list[Message] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            continue
        if isinstance(m, AssistantMessage) and m.tool_calls:
            if not m.content:
                continue
            m = AssistantMessage(content=m.content)
        kept.append(m)
    return kept


def _last_user_message(messages: list[Message]) -> list[Message]:
    users: list[Message] = [m for m in messages if isinstance(m, UserMessage)]
    return users[-1:]


# Built-in filters a handoff may name: what the next agent sees of the conversation so far.
HANDOFF_FILTERS: dict[str, Callable[[list[Message]], list[Message]]] = {
    "remove_tools": _remove_tools,
    "last_user_message": _last_user_message,
}


# ------------------------------------------------------------------------------------ helpers


def json_object(text: str) -> dict[str, object] | None:
    """`text` as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def describe_call(call: ToolCall, limit: int = 100) -> str:
    """A one-line, human-readable rendering of a call for the UI: `get_weather(city=Tokyo)`."""
    args = json_object(call.arguments)
    if args is not None:
        parts = [f"{k}={_short(v)}" for k, v in args.items()]
        text = f"{call.name}({', '.join(parts)})"
    else:
        text = f"{call.name}({call.arguments[:limit]})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"
