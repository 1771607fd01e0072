"""The turn's decision, as a pure function: a model reply in, the next step out.

No Temporal, no I/O: `decide` is unit-tested on its own, and the workflow only carries out
what it returns. Deterministic by construction (no clocks, no randomness).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from workflows.types import AgentSpec, ModelReply, ToolCall, ToolMessage


class FinalAnswer(BaseModel):
    kind: Literal["final"] = "final"
    output: str


class RunTools(BaseModel):
    """Tool calls to run (in parallel) and calls already answered without running anything
    (an unknown tool). `order` is every call id in the order the model asked for them: results
    are appended to the transcript in that order, whatever order they finish in."""

    kind: Literal["run_tools"] = "run_tools"
    run: list[ToolCall]
    answered: list[ToolMessage] = Field(default_factory=list)
    order: list[str]


class TurnLimitReached(BaseModel):
    kind: Literal["max_turns"] = "max_turns"
    max_turns: int
    message: str


class BudgetSpent(BaseModel):
    kind: Literal["budget_spent"] = "budget_spent"
    budget: int
    used: int
    message: str


NextStep = Annotated[FinalAnswer | RunTools | TurnLimitReached | BudgetSpent, Field(discriminator="kind")]


def decide(
    agent: AgentSpec, turn: int, reply: ModelReply, max_turns: int | None = None, tokens_used: int = 0
) -> NextStep:
    """What to do after model call number `turn` (1-based) answered with `reply`.

    A reply without tool calls is the final answer (its tokens are spent either way). A reply
    with tool calls runs them, unless this was the last turn allowed, or the run has used its
    token budget (`tokens_used` counts this reply): answering would need another model call.
    """
    limit = max_turns if max_turns is not None else agent.max_turns
    calls = reply.message.tool_calls
    if not calls:
        return FinalAnswer(output=reply.message.content or "")
    names = ", ".join(c.name for c in calls)
    if turn >= limit:
        return TurnLimitReached(
            max_turns=limit,
            message=f"max_turns ({limit}) exceeded: turn {turn} still asked for tools ({names})",
        )
    budget = agent.token_budget
    if budget is not None and tokens_used >= budget:
        return BudgetSpent(
            budget=budget,
            used=tokens_used,
            message=f"token budget spent: {tokens_used} of {budget} tokens used by turn {turn}, "
            f"which still asked for tools ({names})",
        )
    run: list[ToolCall] = []
    answered: list[ToolMessage] = []
    known = ", ".join(t.name for t in agent.tools) or "none"
    for call in calls:
        if agent.tool(call.name) is None:
            answered.append(
                ToolMessage(
                    call_id=call.call_id,
                    name=call.name,
                    content=f"error: unknown tool '{call.name}'; available tools: {known}",
                    is_error=True,
                )
            )
        else:
            run.append(call)
    return RunTools(run=run, answered=answered, order=[c.call_id for c in calls])


def json_object(text: str) -> dict[str, object] | None:
    """`text` as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def describe_call(call: ToolCall, limit: int = 100) -> str:
    """A one-line, human-readable rendering of a call for the UI: `get_weather(city=Tokyo)`."""
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        args = None
    if isinstance(args, dict):
        parts = [f"{k}={_short(v)}" for k, v in args.items()]
        text = f"{call.name}({', '.join(parts)})"
    else:
        text = f"{call.name}({call.arguments})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"
