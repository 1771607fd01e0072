"""Placeholder until the gemini wire lands (helper branch h-gemini)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agent_runner.activities.wire import MalformedResponse, Mask
from durable_agent_runner.workflows.types import AgentSpec, Message, ModelReply, ModelSettings


def check_settings(settings: ModelSettings) -> list[str]:
    return []


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    raise MalformedResponse("not spoken yet")


def parse_response(body: object, turn: int, *, mask: Mask | None = None) -> ModelReply:
    raise MalformedResponse("not spoken yet")


async def parse_stream(
    lines: AsyncIterator[str],
    turn: int,
    *,
    on_delta: Callable[[str], None] | None = None,
    mask: Mask | None = None,
    limit: int | None = None,
) -> ModelReply:
    raise MalformedResponse("not spoken yet")
