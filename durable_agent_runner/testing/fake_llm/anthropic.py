"""The anthropic wire of the fake: to be written (see dialects.py for the contract)."""

from __future__ import annotations

from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.wire import SSE, ApiError, JSONDict, Reply


def parse(body: dict[str, Any], *args: Any) -> Conversation:
    raise ApiError(501, "anthropic is not spoken yet")


def message(reply: Reply, conv: Conversation, rid: str, created: int) -> JSONDict:
    raise ApiError(501, "anthropic is not spoken yet")


response = message


def stream(reply: Reply, conv: Conversation, rid: str, created: int) -> list[SSE]:
    raise ApiError(501, "anthropic is not spoken yet")


def error_body(err: ApiError) -> JSONDict:
    return err.body()


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    raise ApiError(501, "not spoken yet")
