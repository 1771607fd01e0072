"""Offline models: `ScriptedModel` (replies per agent and per turn) and `FunctionModel` (a
function of the request). Both answer over fake_llm's server (`serve()`), both wires, streamed
or not, so the runner under test is the one that runs in production.

    model = ScriptedModel({
        "triage": [hand_off("billing")],
        "billing": [call("refund", order="42"), reply("Refunded.")],
    })
    async with model.serve(agents=[triage]) as server:   # server.base_url, server.requests
        ...

The agent is recognized by its instructions and tools (see `request`), so the model must know the
agents: pass them to `serve(agents=...)` (AgentTestEnv does), or key a script by the Agent itself.
A model that knows no agent at all is refused when served (ValueError). A script that runs out,
an agent without a script, a function that raises: the model call fails with HTTP 400 and a
message naming the agent and the turn, so the run fails at once saying so.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from durable_agent_runner.agents.agent import Agent
from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.wire import ApiError
from durable_agent_runner.testing.request import AgentIndex, Answer, ModelRequest, describe, failure, request_of
from durable_agent_runner.testing.server import ModelServer, serve
from durable_agent_runner.testing.steps import Call, HandOff, Output, Reply, Step

# Runs a coroutine to its end (the server runs it on the loop that called serve()).
Resolve = Callable[[Awaitable[Any]], Any]


class OfflineModel(ABC):
    """A model that answers from Python. Subclasses say what one turn answers (`step`)."""

    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self.index = AgentIndex(agents)

    @abstractmethod
    def step(self, request: ModelRequest) -> Step | Awaitable[Step]:
        """This turn's answer."""

    def check(self) -> None:
        """Raise ValueError when the model cannot work with the agents it knows."""
        return None

    def serve(
        self, agents: Iterable[Agent] = (), *, host: str = "127.0.0.1", port: int = 0
    ) -> AbstractAsyncContextManager[ModelServer]:
        """An OpenAI-compatible server on `host:port` (0: a free one) that answers with this
        model, for as long as the `async with` lasts. `agents` (each with its team) are the
        ones it recognizes in requests, besides those it already knows."""
        for agent in agents:
            self.index.add(agent)
        return serve(self, host=host, port=port)

    def request(self, conv: Conversation) -> ModelRequest:
        try:
            return request_of(conv, self.index)
        except ValueError as exc:
            raise failure(type(self).__name__, str(exc)) from None

    def answer(self, request: ModelRequest, resolve: Resolve | None = None) -> Answer:
        """The rendered answer to `request` (ApiError 400 when there is none)."""
        name = type(self).__name__
        try:
            step = self.step(request)
            if inspect.isawaitable(step):
                if resolve is None:
                    raise TypeError("an async function needs the server's event loop: use serve()")
                step = resolve(step)
        except ApiError:
            raise
        except Exception as exc:
            raise failure(name, f"{describe(request)}: {type(exc).__name__}: {exc}") from None
        return render(name, step, request, self.index)


def render(model: str, step: object, request: ModelRequest, index: AgentIndex) -> Answer:
    """A step as (text, calls); ApiError 400 for what cannot be sent."""
    if isinstance(step, str):
        return step, []
    if isinstance(step, Reply):
        return step.text, []
    if isinstance(step, Output):
        return step.json_text(), []
    if isinstance(step, Call | HandOff):
        step = [step]
    if isinstance(step, Sequence) and step and all(isinstance(s, Call | HandOff) for s in step):
        calls: list[tuple[str, str]] = []
        for s in step:
            if isinstance(s, Call):
                calls.append((s.name, s.arguments_json()))
                continue
            tool = index.handoff_tool(request.agent, s.agent, request.tools)
            if tool is None:
                offered = ", ".join(request.tools) or "none"
                raise failure(
                    model,
                    f"{describe(request)} hands off to '{s.agent}', but no handoff to it is offered (tools: {offered})",
                )
            calls.append((tool, "{}"))
        return None, calls
    raise failure(model, f"{describe(request)}: not a step: {step!r} (use reply, call, hand_off or output)")


class ScriptedModel(OfflineModel):
    """Replies per agent and per turn: `scripts[agent][k]` answers that agent's k-th model call
    in a run (counted from the request, so a retried call gets the same answer)."""

    def __init__(self, scripts: Mapping[str | Agent, Sequence[Step]], *, agents: Iterable[Agent] = ()) -> None:
        if not isinstance(scripts, Mapping):
            raise TypeError(f"ScriptedModel takes a dict of scripts by agent, not {type(scripts).__name__}")
        keyed = [k for k in scripts if isinstance(k, Agent)]
        super().__init__([*keyed, *agents])
        self.scripts: dict[str, list[Step]] = {}
        for key, steps in scripts.items():
            name = key.name if isinstance(key, Agent) else key
            if not isinstance(name, str) or not name:
                raise TypeError(f"a script is keyed by an Agent or its name, not {key!r}")
            if isinstance(steps, str | Reply | Call | HandOff | Output):
                raise TypeError(f"the script for '{name}' must be a list of steps, one per turn")
            self.scripts[name] = list(steps)

    def check(self) -> None:
        unknown = sorted(set(self.scripts) - set(self.index.names()))
        if unknown:
            raise ValueError(
                f"ScriptedModel: it does not know the agent(s) {', '.join(repr(n) for n in unknown)}: pass them "
                "to serve(agents=[...]) or AgentTestEnv(agents=[...]), or key the script by the Agent itself"
            )

    def step(self, request: ModelRequest) -> Step:
        steps = self.scripts.get(request.agent)
        if not request.agent or steps is None:
            scripted = ", ".join(repr(n) for n in self.scripts) or "none"
            raise failure("ScriptedModel", f"no script for {describe(request)} (scripts for: {scripted})")
        if request.turn >= len(steps):
            raise failure(
                "ScriptedModel",
                f"the script for agent '{request.agent}' has {len(steps)} step(s), and this is its turn "
                f"{request.turn} (model call {request.turn + 1}): add a step for it",
            )
        return steps[request.turn]


class FunctionModel(OfflineModel):
    """Answers with `fn(request)`: a step (or a str), returned or awaited. `agents`: the ones
    whose names `request.agent` gives (also passed to `serve`)."""

    def __init__(self, fn: Callable[[ModelRequest], Step | Awaitable[Step]], *, agents: Iterable[Agent] = ()) -> None:
        super().__init__(agents)
        self.fn = fn

    def check(self) -> None:
        # Knowing no agent, every request's `agent` is "": a function that answers by agent would
        # answer every run with its fallback, and the runs would complete with wrong answers.
        if not self.index.names():
            name = getattr(self.fn, "__name__", type(self.fn).__name__)
            raise ValueError(
                f"FunctionModel({name}) knows no agent, so request.agent would be '' on every call: pass the "
                "agents to FunctionModel(..., agents=[...]), serve(agents=[...]) or AgentTestEnv(agents=[...])"
            )

    def step(self, request: ModelRequest) -> Step | Awaitable[Step]:
        return self.fn(request)
