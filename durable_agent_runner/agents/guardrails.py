"""Guardrails: checks on a run's input and on its final output, written as plain functions.

    from durable_agent_runner import Agent, GuardrailContext, GuardrailResult, input_guardrail, output_guardrail

    @input_guardrail
    def no_card_numbers(ctx: GuardrailContext, text: str) -> bool:
        return re.search(r"\\b\\d{16}\\b", text) is not None  # True: the tripwire fires

    @output_guardrail(name="on_topic")
    async def judge(ctx: GuardrailContext, text: str) -> GuardrailResult:
        verdict = await ctx.ask_model(f"Is this about billing? Answer yes or no.\\n\\n{text}")
        return GuardrailResult(tripwire_triggered=verdict.lower().startswith("no"), output_info=verdict)

    billing = Agent(name="billing", input_guardrails=[no_card_numbers], output_guardrails=[judge])

A guardrail returns a `GuardrailResult` or a bool (True: the tripwire fires). A fired tripwire
stops the run; `output_info` (anything JSON can hold) is kept with the verdict. An agent's
spec freezes only the guardrails' names: the hook activity (activities/hooks.py) runs them on a
worker that holds the agent. Sync guardrails run in the tool threads (durable_agent_runner/agents/executor.py),
like sync tools, so a slow one does not stall the worker's event loop.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, overload

from pydantic import BaseModel

from durable_agent_runner.agents import executor


class GuardrailResult(BaseModel):
    tripwire_triggered: bool
    output_info: Any = None  # what the guardrail found; kept in the run's record


# (prompt, instructions, model) -> the model's text. The hook activity provides one.
ModelCaller = Callable[[str, str, str | None], Awaitable[str]]


@dataclass(frozen=True)
class GuardrailContext:
    """What a guardrail knows about its run, and a way to ask a model itself."""

    agent: str
    run_id: str
    turn: int
    model_caller: ModelCaller | None = field(default=None, repr=False, compare=False)

    async def ask_model(self, prompt: str, *, instructions: str = "", model: str | None = None) -> str:
        """One model call with this worker's model settings (`model`: default LLM_MODEL), without
        tools; its text. It has no retries of its own: a failure fails the hook, which Temporal retries."""
        if self.model_caller is None:
            raise RuntimeError("this GuardrailContext has no model to ask (it was made outside a worker)")
        return await self.model_caller(prompt, instructions, model)


GuardrailFunction = Callable[[GuardrailContext, str], GuardrailResult | bool | Awaitable[GuardrailResult | bool]]


class Guardrail:
    """A guardrail function and its name. Calling it calls the function unchanged."""

    kind: ClassVar[Literal["input", "output"]]

    def __init__(self, fn: GuardrailFunction, name: str | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not self.name:
            raise ValueError(f"{self.kind} guardrail {fn!r} needs a name")

    def __call__(self, ctx: GuardrailContext, text: str) -> GuardrailResult | bool | Awaitable[GuardrailResult | bool]:
        return self.fn(ctx, text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def run(
        self, ctx: GuardrailContext, text: str, threads: executor.ToolThreads | None = None
    ) -> GuardrailResult:
        """The guardrail's verdict on `text`. Whatever the function raises propagates."""
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(ctx, text)
        else:
            result = await (threads or executor.shared()).run(functools.partial(self.fn, ctx, text))
            if inspect.isawaitable(result):
                result = await result
        if isinstance(result, GuardrailResult):
            return result
        if isinstance(result, bool):
            return GuardrailResult(tripwire_triggered=result)
        raise TypeError(f"returned {type(result).__name__}, not a GuardrailResult or a bool")


class InputGuardrail(Guardrail):
    """Checks the run's input (its first user message) while the first model call runs."""

    kind = "input"


class OutputGuardrail(Guardrail):
    """Checks the final output before the run returns it."""

    kind = "output"


@overload
def input_guardrail(fn: GuardrailFunction, /) -> InputGuardrail: ...
@overload
def input_guardrail(*, name: str | None = None) -> Callable[[GuardrailFunction], InputGuardrail]: ...
def input_guardrail(
    fn: GuardrailFunction | None = None, /, *, name: str | None = None
) -> InputGuardrail | Callable[[GuardrailFunction], InputGuardrail]:
    """`@input_guardrail` or `@input_guardrail(name=...)` on `fn(ctx, text)`, sync or async."""
    if fn is None:
        return lambda f: InputGuardrail(f, name)
    return InputGuardrail(fn, name)


@overload
def output_guardrail(fn: GuardrailFunction, /) -> OutputGuardrail: ...
@overload
def output_guardrail(*, name: str | None = None) -> Callable[[GuardrailFunction], OutputGuardrail]: ...
def output_guardrail(
    fn: GuardrailFunction | None = None, /, *, name: str | None = None
) -> OutputGuardrail | Callable[[GuardrailFunction], OutputGuardrail]:
    """`@output_guardrail` or `@output_guardrail(name=...)` on `fn(ctx, text)`, sync or async."""
    if fn is None:
        return lambda f: OutputGuardrail(f, name)
    return OutputGuardrail(fn, name)
