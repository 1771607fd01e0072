"""The calls of one turn, pure: which run, how each runs, how each is approved, how results merge.

    plan_calls(agent, calls)   → a PlannedCall each: run a tool, run a child, hand off, or answer at once
    runs(planned, …)           → how a planned call runs: with the reply, local, routed, once, as a child run
    attempt_ended(…)           → a tool activity that ended without a result: the model's error, or in doubt
    resolved(planned, r)       → a person's resolution of a call in doubt: run it again, or its message
    asks_first(planned, …)     → a live fork's once call: a person decides before it runs again
    checked(planned, hook)     → run it, ask a person, or answer (invalid arguments)
    with_reply / cheap_calls / taken → which cheap calls a model call may run with its reply, which
                                       the worker runs, and which results the turn takes
    after_tools(step, results) → the tool messages in the order the model asked for the calls
    budget_spent(…)            → the one budget rule, for the workflow and for the worker

No Temporal, no I/O, no clocks, no randomness (tests/test_turn.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Literal, get_args

from pydantic import BaseModel

from durable_agent_runner.machine.bounds import parse_json
from durable_agent_runner.workflows.types import (
    AgentSpec,
    Breakpoints,
    CallResolution,
    HookResult,
    ModelCallInput,
    ModelReply,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    WithReply,
)

# How one planned call runs, read in one place (`runs`): its result came with the model's reply,
# a local activity in the workflow task (`@tool(local=True)`), a routed tool activity, a routed
# activity with one attempt whose loss goes to a person (`@tool(once=True)`), a child run.
Runs = Literal["with_reply", "local", "activity", "once", "child"]

# How a tool activity ended without a result, as the workflow saw it: a timeout of any kind (the
# worker died or hung, or its heartbeat stopped), its worker shut down before it finished (a deploy:
# the SDK's `WorkerShutdown` failure after the grace period), called off, or the tool's own error.
AttemptEnd = Literal["timeout", "shutdown", "cancelled", "error"]
LOST: frozenset[AttemptEnd] = frozenset({"timeout", "shutdown"})  # it may or may not have happened
# The end of what the model is told of a call a person dropped while the run was paused.
DROPPED = "dropped this call before it ran"


class PlannedCall(BaseModel):
    """What the run does with one call the model asked for.

    action: `tool` runs the tool; `child` runs the agent behind the tool as a child run;
    `handoff` transfers the run to `target`; `answer` tells the model `answer` at once (an
    unknown tool, a second handoff, a call a person dropped); `ask` waits for a person's answer
    (`ask_person`: nothing runs, the answer is the result). approval: `check` asks the agent's
    policy (the hook activity validates the arguments first); `auto` is approved by an earlier
    "always". `ran`: the result the model call brought back for it (WithReply), with the
    arguments it ran with; it is used only while the call still has those arguments."""

    call: ToolCall
    action: Literal["tool", "child", "handoff", "answer", "ask"]
    approval: Literal["none", "check", "auto"] = "none"
    target: str = ""
    answer: str = ""
    ran: ToolResult | None = None
    ran_arguments: str = ""
    again: bool = False  # a recorded call a --live-tools fork runs again (machine/rerun.py)


class RunTools(BaseModel):
    """Step: run these calls (siblings in parallel, each asked about as its approval says)."""

    kind: Literal["run_tools"] = "run_tools"
    calls: list[PlannedCall]
    # The next model call, for the plan's one routed call to make once it has run (machine/requests.py).
    ahead: ModelCallInput | None = None

    @property
    def handoff(self) -> PlannedCall | None:
        return next((c for c in self.calls if c.action == "handoff"), None)


BudgetSpent = Literal["TokenBudgetExceeded", "CostBudgetExceeded"]  # how a run or an answer stops on its budget
BUDGET_SPENT: tuple[BudgetSpent, ...] = get_args(BudgetSpent)


def budget_spent(
    tokens_budget: int | None, tokens_used: int, cost_budget: float | None, cost_used: float
) -> BudgetSpent | None:
    """The budget rule, for the run (its budget, what it used) and for the worker that runs cheap
    calls with a reply (what the run has left, what the reply used): spent once used reaches it."""
    if tokens_budget is not None and tokens_used >= tokens_budget:
        return "TokenBudgetExceeded"
    if cost_budget is not None and cost_used >= cost_budget:
        return "CostBudgetExceeded"
    return None


def plan_calls(agent: AgentSpec, calls: Sequence[ToolCall], always: Collection[str]) -> RunTools:
    return RunTools(calls=[_plan(agent, call, always, calls) for call in calls])


def _plan(agent: AgentSpec, call: ToolCall, always: Collection[str], calls: Sequence[ToolCall]) -> PlannedCall:
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
    if spec.ask is not None:  # a person answers it: no approval, no activity
        return PlannedCall(call=call, action="ask")
    approval: Literal["none", "check", "auto"] = "none"
    if spec.approval != "never":
        approval = "auto" if call.name in always else "check"
    if spec.agent is not None:
        return PlannedCall(call=call, action="child", approval=approval, target=spec.agent)
    return PlannedCall(call=call, action="tool", approval=approval)


def with_ran(step: RunTools, ran: Mapping[str, tuple[str, ToolResult]]) -> RunTools:
    """The plan with the results the model call brought back (`taken`) beside their calls."""
    return RunTools(
        calls=[
            p.model_copy(update={"ran": ran[p.call.call_id][1], "ran_arguments": ran[p.call.call_id][0]})
            if p.call.call_id in ran and p.action == "tool"
            else p
            for p in step.calls
        ]
    )


def runs(planned: PlannedCall, agent: AgentSpec, arguments: str) -> Runs:
    """How a planned call runs with `arguments` (as approved or edited): the one place that reads
    the per-tool settings. A result brought back with the reply counts only for the arguments it
    ran with; a local tool runs local only on a worker pinned to the agent's version."""
    if planned.action == "child":
        return "child"
    if planned.ran is not None and planned.ran_arguments == arguments:
        return "with_reply"
    spec = agent.tool(planned.call.name)
    if spec is not None and spec.once:
        return "once"
    return "local" if spec is not None and spec.local and agent.version else "activity"


def asks_first(planned: PlannedCall, how: Runs, approved: bool) -> bool:
    """Whether a call goes to a person before it runs: a `once` call a --live-tools fork would run
    again (it ran in the run the fork was taken from, so running it again is a person's call, as
    for a call in doubt), unless a person approved it in this fork just now."""
    return planned.again and how == "once" and not approved


def attempts(how: Runs, spec: ToolSpec) -> int:
    """How many attempts a tool activity gets: a `once` tool's one, never retried."""
    return 1 if how == "once" else spec.max_attempts


def attempt_ended(planned: PlannedCall, how: Runs, end: AttemptEnd, why: str, tries: int) -> ToolMessage | None:
    """A tool activity that ended without a result, after `tries` attempts. The tool's own error
    is told to the model, as is a lost attempt of a tool that may run again; a `once` tool's
    attempt that ended without a result (it may or may not have happened) puts the call in doubt
    (None): a person decides, and nothing runs it again meanwhile. (One the run itself called off
    is no result to wait for: the workflow stops there.)"""
    if how == "once" and end in LOST:
        return None
    call = planned.call
    content = f"error: tool '{call.name}' failed after {tries} attempt(s): {why}"
    return ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True)


def resolved(planned: PlannedCall, resolution: CallResolution) -> Literal["rerun"] | ToolMessage:
    """What a person's resolution of a call in doubt becomes: run it again (one attempt, in doubt
    again if it is lost again), the result they say it returned, or the failure they report."""
    call = planned.call
    if resolution.action == "rerun":
        return "rerun"
    if resolution.action == "result":
        value = parse_json(resolution.result or "null")  # checked at the door (ResolveCall)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return ToolMessage(call_id=call.call_id, name=call.name, content=text, resolution=resolution)
    content = f"error: tool '{call.name}' failed: {resolution.reason} (reported by {resolution.by})"
    return ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True, resolution=resolution)


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
    `cost_used` count the replies so far; the worker checks the reply's own against the rest
    (`budget_spent`)."""
    limits = limits or agent
    if not agent.version or turn >= limits.max_turns or (breakpoints is not None and breakpoints.before_tools):
        return None
    handoffs = {h.tool_name for h in agent.handoffs}
    tools = [
        s.name
        for s in agent.tools
        if s.local and not s.once and s.approval == "never" and s.agent is None and s.name not in handoffs
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


def cheap_calls(within: WithReply, reply: ModelReply, earlier: Collection[str]) -> list[ToolCall]:
    """The calls of `reply` a worker holding the agent's version runs with it (`within`): none
    when the reply also calls a tool a breakpoint pauses before, gives two calls one id (the run
    renames them, and their idempotency keys with them) or spends what the run's budget has
    left; else its calls of the cheap tools whose ids no `earlier` reply of the run used. The
    worker's rule (activities/tool_activities.py), here so the pure tests run it too."""
    calls, usage = reply.message.tool_calls, reply.usage
    if (
        any(c.name in within.pause_on for c in calls)
        or len({c.call_id for c in calls}) != len(calls)
        or budget_spent(within.tokens_left, usage.total_tokens, within.cost_left, usage.cost_usd) is not None
    ):
        return []
    return [c for c in calls if c.name in within.tools and c.call_id not in earlier]


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
            PlannedCall(call=p.call, action="answer", answer=f"error: {dropped[p.call.call_id]} {DROPPED}")
            if p.call.call_id in dropped
            else p
            for p in step.calls
        ]
    )


def after_tools(step: RunTools, results: dict[str, ToolMessage]) -> list[ToolMessage]:
    """Every call's message, in the order the model asked for the calls, whatever order they
    finished in; calls that ran nothing are answered here."""
    return [results[p.call.call_id] if p.call.call_id in results else answered(p) for p in step.calls]


# ------------------------------------------------------------------------------------ helpers


def describe_call(call: ToolCall, limit: int = 100) -> str:
    """A one-line, human-readable rendering of a call for the UI: `get_weather(city=Tokyo)`, its
    arguments cut to fit `limit` inside their parentheses (`research(input=Look up order 1…)`)."""
    args = call.args
    inner = ", ".join(f"{k}={_short(v)}" for k, v in args.items()) if args is not None else call.arguments
    room = max(limit - len(call.name) - 2, 1)
    if len(inner) > room:
        inner = inner[: room - 1] + "…"
    text = f"{call.name}({inner})"
    return text if len(text) <= limit else text[: limit - 1] + "…"  # a name longer than the line


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"
