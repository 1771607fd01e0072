"""A durable fallback across models (issue 33): when a model call has used its retry bound, or
failed in a way no retry mends that is not the request's own fault, the same turn goes to the
agent's next model. Pure: the workflow asks `falls_back` when a call fails, and the turn machine
(machine/turn.py) makes the switch, which lives in the run's state (`RunState.switch_model`):
a worker killed mid-fallback resumes on the model the run had reached. In a session started on
2.0, each message's answer starts on the agent's first model again (`restored`,
machine/conversation.py): a provider back up is asked again.

What the next model gets: the same transcript, converted by its own wire (tool calls and results
included). Signed thinking blocks belong to their provider and are dropped (each wire sends only
its own provider's), and the switch's event says how many.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from durable_agent_runner.workflows.types import AgentSpec, AssistantMessage, Message, ModelSwitch, split_model

# Failures that are the request's own fault: another model would refuse it too, or the agent's
# author must fix it. Everything else (a provider down, out of quota, a key refused, a model it
# does not serve, replies it cannot form, every retry used) sends the turn on.
REQUEST_FAULTS = frozenset({"ModelSettingsInvalid", "ModelHTTP400", "ModelHTTP413", "ModelHTTP422"})


def switched(agent: AgentSpec, name: str) -> AgentSpec:
    """The run's first agent (with its team) once agent `name` has moved on to its next model."""

    def moved(a: AgentSpec) -> AgentSpec:
        return a.model_copy(update={"model": a.fallback_models[0], "fallback_models": a.fallback_models[1:]})

    return _changed(agent, name, moved)


def restored(agent: AgentSpec, switches: list[ModelSwitch]) -> AgentSpec:
    """The run's first agent (with its team) as it was before `switches` (oldest first): each
    agent back on the model it switched from, the models it switched to ahead of its fallbacks."""
    for switch in reversed(switches):
        agent = _changed(agent, switch.agent, functools.partial(_back, switch))
    return agent


def _back(switch: ModelSwitch, a: AgentSpec) -> AgentSpec:
    models = [switch.to_model, *a.fallback_models]
    return a.model_copy(update={"model": switch.from_model or None, "fallback_models": models})


def _changed(agent: AgentSpec, name: str, change: Callable[[AgentSpec], AgentSpec]) -> AgentSpec:
    """The first agent with its member `name` (itself, or one of its team) changed."""
    if name == agent.name:
        return change(agent)
    return agent.model_copy(update={"team": [change(a) if a.name == name else a for a in agent.team]})


def falls_back(agent: AgentSpec, error_type: str | None) -> bool:
    """Whether a failed model call of `agent` goes on to its next model."""
    return bool(agent.fallback_models) and (error_type or "") not in REQUEST_FAULTS


def thinking_lost(messages: list[Message], model: str) -> int:
    """How many signed thinking blocks of the transcript `model`'s provider will not get."""
    provider, _ = split_model(model)
    return sum(1 for m in messages if isinstance(m, AssistantMessage) for b in m.thinking if b.provider != provider)


def switch_words(agent: AgentSpec, why: str, lost: int) -> str:
    """The switch's event detail: from which model, why, to which."""
    words = f"{agent.model or 'the default model'} failed ({why}); the turn goes to {agent.fallback_models[0]}"
    if lost:
        words += f"; {lost} thinking block{'s' if lost != 1 else ''} of another provider not sent"
    return words
