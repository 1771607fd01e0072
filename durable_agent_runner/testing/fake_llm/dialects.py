"""Each API the fake speaks, as one `Dialect`: how a request's path names it, how its body becomes
the API-neutral `Conversation`, and how a `Reply` and an error go back in its shapes. The handler
(handler.py) knows no API beyond this table: a new wire is a module and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durable_agent_runner.testing.fake_llm import anthropic, gemini
from durable_agent_runner.testing.fake_llm.conversation import Api, Conversation, parse_chat, parse_responses
from durable_agent_runner.testing.fake_llm.wire import (
    SSE,
    ApiError,
    JSONDict,
    Reply,
    chat_completion,
    chat_stream,
    response_object,
    response_stream,
)


@dataclass(frozen=True)
class Call:
    """What the path of a model call says: the API, and for Gemini the model and whether it streams."""

    api: Api
    model: str | None = None  # None: the body names it
    stream: bool | None = None  # None: the body says


@dataclass(frozen=True)
class Dialect:
    # (body, the path's call) → the conversation; raises ApiError as the real API would
    parse: Callable[[dict[str, Any], Call], Conversation]
    # (reply, conversation, response id, created) → the reply's body, or its stream's events
    body: Callable[[Reply, Conversation, str, int], JSONDict]
    stream: Callable[[Reply, Conversation, str, int], list[SSE]]
    error: Callable[[ApiError], JSONDict]  # an error's body, in the API's own shape
    key: Callable[[dict[str, str]], str]  # the key as sent (lower-cased headers), for a hostile server to echo
    # The request as an equivalent Chat Completions body (system message, function tools, a
    # json_schema response_format), for the testing kit's typed view (testing/request.py).
    as_chat: Callable[[dict[str, Any]], dict[str, Any]] = lambda body: body
    # What the API requires of the headers (lower-cased) beside the body (a key, a version),
    # checked before the body is read as a conversation; raises ApiError.
    check: Callable[[dict[str, str], dict[str, Any]], None] = lambda headers, body: None


def _openai_key(headers: dict[str, str]) -> str:
    return headers.get("authorization") or headers.get("api-key") or ""


DIALECTS: dict[Api, Dialect] = {
    "chat": Dialect(
        parse=lambda body, call: parse_chat(body),
        body=lambda reply, conv, rid, created: chat_completion(reply, rid=rid, model=conv.model, created=created),
        stream=lambda reply, conv, rid, created: chat_stream(
            reply, rid=rid, model=conv.model, created=created, include_usage=conv.include_usage
        ),
        error=ApiError.body,
        key=_openai_key,
    ),
    "responses": Dialect(
        parse=lambda body, call: parse_responses(body),
        body=lambda reply, conv, rid, created: response_object(
            reply, rid=rid, model=conv.model, created=created, request=conv.request
        ),
        stream=lambda reply, conv, rid, created: response_stream(
            reply, rid=rid, model=conv.model, created=created, request=conv.request
        ),
        error=ApiError.body,
        key=_openai_key,
    ),
    "anthropic": Dialect(
        parse=lambda body, call: anthropic.parse(body),
        body=anthropic.message,
        stream=anthropic.stream,
        error=anthropic.error_body,
        key=lambda headers: headers.get("x-api-key") or headers.get("authorization", ""),  # the SDKs 2.x: Bearer
        as_chat=anthropic.as_chat,
        check=anthropic.check_headers,
    ),
    "gemini": Dialect(
        parse=lambda body, call: gemini.parse(body, call.model or "", bool(call.stream)),
        body=gemini.response,
        stream=gemini.stream,
        error=gemini.error_body,
        key=lambda headers: headers.get("x-goog-api-key", ""),
        as_chat=gemini.as_chat,
        check=lambda headers, body: gemini.require_key(headers),
    ),
}

GEMINI_PREFIX = "/v1beta/models/"


def call_for(method: str, path: str, query: str) -> Call | None:
    """The model call a POST to `path` (without its query) makes, or None."""
    if method != "POST":
        return None
    if path == "/v1/chat/completions":
        return Call("chat")
    if path == "/v1/responses":
        return Call("responses")
    if path == "/v1/messages":
        return Call("anthropic")
    if path.startswith(GEMINI_PREFIX) and ":" in path:
        model, _, verb = path.removeprefix(GEMINI_PREFIX).rpartition(":")
        if verb == "generateContent":
            return Call("gemini", model=model, stream=False)
        if verb == "streamGenerateContent":
            return Call("gemini", model=model, stream="alt=sse" in query)
    return None


def rid_for(api: Api, fingerprint: str) -> str:
    """A reply's id, from the request: a retry, streamed or not, gets the very same one."""
    prefix = {"chat": "chatcmpl-", "responses": "resp_", "anthropic": "msg_", "gemini": ""}[api]
    return prefix + fingerprint
