"""The spans' contents, in the GenAI semantic conventions: a span around a call that records only
an error's type, token usage, a model call's request and reply, a tool call's arguments and result,
and captured text (masked, bounded) when content capture is on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from temporalio.exceptions import ApplicationError

from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine.texts import cut
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelCallInput,
    ModelReply,
    ToolCallInput,
    ToolMessage,
    ToolResult,
    Usage,
    split_model,
)

CONTENT_LIMIT = 16 * 1024  # characters of one captured attribute: a long transcript would be sent on every call
Attributes = dict[str, AttributeValue]


@contextmanager
def call_span(tracer: Tracer, name: str, kind: SpanKind, attributes: Attributes) -> Iterator[Span]:
    """A span around a call. A failure marks it with its type only: messages may quote anything."""
    with tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as err:
            mark_error(span, err.type if isinstance(err, ApplicationError) and err.type else type(err).__name__)
            raise


def mark_error(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def usage_attributes(usage: Usage) -> Attributes:
    attributes: Attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cached_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if usage.reasoning_tokens:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    if usage.cost_usd:
        attributes["agent.usage.cost_usd"] = usage.cost_usd
    return attributes


def provider_of(model: str, settings: LLMSettings) -> tuple[str, str]:
    """gen_ai.provider.name and the base URL of the provider a model string names."""
    provider, _ = split_model(model)
    if provider == "anthropic":
        return "anthropic", settings.anthropic_base_url
    if provider == "gemini":
        return "gcp.gemini", settings.gemini_base_url
    base = settings.openai_base_url if provider == "openai" else settings.base_url
    return provider_name(base), base


def provider_name(base_url: str) -> str:
    """gen_ai.provider.name: `openai` for any OpenAI-compatible server (the wire it speaks, as the
    conventions ask of an instrumentation that cannot know the backend), Azure's by its host."""
    host = urlsplit(base_url).hostname or ""
    return "azure.ai.openai" if host.endswith((".openai.azure.com", ".services.ai.azure.com")) else "openai"


class ModelCall:
    """The span of one model-call attempt, reachable from the activity (see `model_request`)."""

    def __init__(self, span: Span, content: Content | None, tracer: Tracer) -> None:
        self.span = span
        self.content = content
        self.tracer = tracer  # for the spans of tools run with the reply

    def request(self, agent: AgentSpec, messages: Sequence[Message], api: str, stream: bool) -> None:
        attributes: Attributes = {"gen_ai.request.stream": stream, "agent.api": api}
        settings = agent.settings
        for key, value in (
            ("gen_ai.request.temperature", settings.temperature),
            ("gen_ai.request.top_p", settings.top_p),
            ("gen_ai.request.max_tokens", settings.max_output_tokens),
            ("gen_ai.request.seed", settings.seed),
        ):
            if value is not None:
                attributes[key] = value
        if self.content is not None:
            if agent.instructions:
                attributes["gen_ai.system_instructions"] = self.content.json([_text(agent.instructions)])
            attributes["gen_ai.input.messages"] = self.content.messages(messages)
        self.span.set_attributes(attributes)

    def reply(self, reply: ModelReply) -> None:
        attributes = usage_attributes(reply.usage)
        attributes["agent.reply.tool_calls"] = len(reply.message.tool_calls)
        if reply.model:
            attributes["gen_ai.response.model"] = reply.model
        if reply.response_id:
            attributes["gen_ai.response.id"] = reply.response_id
        if reply.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [reply.finish_reason]
        if self.content is not None:
            message = _message(reply.message) | {"finish_reason": reply.finish_reason or ""}
            attributes["gen_ai.output.messages"] = self.content.json([message])
        self.span.set_attributes(attributes)


current_model_call: ContextVar[ModelCall | None] = ContextVar("agent_model_call_span", default=None)


# Set while a tool activity that makes the next model call runs (activities/ahead.py): the span
# of that call's attempt, made as the model activity's is.
model_ahead: ContextVar[Callable[[ModelCallInput], AbstractContextManager[ModelCall]] | None] = ContextVar(
    "agent_model_ahead_span", default=None
)


@contextmanager
def model_call_ahead(request: ModelCallInput) -> Iterator[Callable[[ModelReply], None]]:
    """The span of the model call a tool's activity makes once its tool has run, inside the
    tool's span: yields what records the reply. Does nothing unless the worker traces."""
    span_of = model_ahead.get()
    if span_of is None:
        yield lambda reply: None
        return
    with span_of(request) as call:
        yield call.reply


def model_request(agent: AgentSpec, messages: Sequence[Message], *, api: str, stream: bool) -> None:
    """Called by the model activity with what it is about to send: the request's settings on the
    attempt's span, and (only when content capture is on) the instructions and messages. Does
    nothing unless the worker traces."""
    call = current_model_call.get()
    if call is not None:
        call.request(agent, messages, api, stream)


class Content:
    """Captured text, masked and bounded: JSON in the GenAI conventions' message format."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def json(self, value: object) -> str:
        text = self.redactor.text(json.dumps(value, ensure_ascii=False))
        return cut(text, CONTENT_LIMIT)

    def messages(self, messages: Sequence[Message]) -> str:
        """The latest messages that fit, whole (valid JSON); a message too long alone is cut."""
        kept: list[str] = []
        size = 2
        for message in reversed(messages):
            item = self.json(_message(message))
            if kept and size + len(item) + 1 > CONTENT_LIMIT:
                break
            kept.append(item)
            size += len(item) + 1
        return "[" + ",".join(reversed(kept)) + "]"


def _text(content: str) -> dict[str, object]:
    return {"type": "text", "content": content}


def _message(message: Message) -> dict[str, object]:
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": message.call_id, "response": message.content}],
        }
    parts: list[dict[str, object]] = [_text(message.content)] if message.content else []
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            parts.append({"type": "tool_call", "id": call.call_id, "name": call.name, "arguments": call.arguments})
    return {"role": message.role, "parts": parts}


def tool_attributes(arg: object, content: Content | None) -> Attributes:
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": str(getattr(arg, "tool", "")),
        "gen_ai.tool.call.id": str(getattr(arg, "call_id", "")),
        "gen_ai.tool.type": "function",
    }
    if content is not None:  # the object, or the model's text when it is not one
        args = getattr(arg, "args", None)
        attributes["gen_ai.tool.call.arguments"] = content.json(
            args if args is not None else getattr(arg, "arguments", "")
        )
    return attributes


def record_tool_result(span: Span, result: ToolResult, content: Content | None) -> None:
    if result.is_error:  # the model reads the error: the call itself went wrong
        mark_error(span, "tool_error")
    if content is not None:
        span.set_attribute("gen_ai.tool.call.result", content.json(result.output))


@contextmanager
def tool_with_reply(call: ToolCallInput) -> Iterator[Callable[[ToolResult], None]]:
    """The span of a call the model activity runs with its reply (ToolActivities.run_with_reply),
    inside the model call's: yields what records the result. Does nothing unless the worker traces."""
    model = current_model_call.get()
    if model is None:
        yield lambda result: None
        return
    attributes = tool_attributes(call, model.content) | {"agent.turn": call.turn, "agent.tool.with_reply": True}
    if call.agent:
        attributes["gen_ai.agent.name"] = call.agent
    with call_span(model.tracer, f"execute_tool {call.tool}", SpanKind.INTERNAL, attributes) as span:
        yield lambda result: record_tool_result(span, result, model.content)
