"""OpenTelemetry traces of agent runs: on when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; without it nothing here is built or installed.

One trace per run, the same across workers, retries and continue-as-new::

    StartWorkflow:AgentRun            the client that started the run (client.py, or `traced`)
    └─ invoke_agent demo              one per execution; continue-as-new adds a sibling
       ├─ turn 1                      every activity the run schedules for turn 1
       │  ├─ chat gpt-4.1-mini        one per attempt: a retried call shows each try
       │  │  └─ execute_tool get_weather   a cheap call run with the reply (tool_with_reply)
       │  └─ execute_tool send_report   a tool activity, local or not
       └─ turn 2 …

`temporalio.contrib.opentelemetry.OpenTelemetryInterceptor`, with its own spans off, carries the
context in Temporal headers: client → run → activities and child runs, and on to the next
execution at continue-as-new. Retries and other workers read the same headers. The spans are
made here: the execution and turn spans by a workflow interceptor, on the workflow's clock,
through the contrib's replay-safe tracer provider (span ids come from the run's seeded random, so
a worker that replays the run makes the same spans again, and a span is ended, so exported, only
by the worker that ends it live); the model and tool spans by an activity interceptor.

The workflow interceptor only reads workflow time and info and wraps the calls it sees: it never
adds, drops or reorders a command (tests/test_telemetry.py replays a traced run under it).

Spans hold names, ids, models, token counts, finish reasons and error types; never an error's
message, the API key or any header. Prompts, completions, tool arguments and results only with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, masked like everything the worker
writes and cut at CONTENT_LIMIT characters.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn, cast
from urllib.parse import urlsplit

import opentelemetry.context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from temporalio import activity, workflow
from temporalio.client import Client, OutboundInterceptor, StartWorkflowInput, WorkflowHandle
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, ReplaySafeTracerProvider, create_tracer_provider
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ContinueAsNewInput,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    StartChildWorkflowInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from activities.errors import cut
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.redact import Redactor
from workflows.types import (
    COMPACT_ACTIVITY,
    MODEL_CALL_ACTIVITY,
    TOOL_CALL_ACTIVITY,
    AgentSpec,
    AssistantMessage,
    Message,
    ModelReply,
    ToolCallInput,
    ToolMessage,
    ToolResult,
    Usage,
)

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CAPTURE_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_LIMIT = 16 * 1024  # characters of one captured attribute: a long transcript would be sent on every call
TRACER_NAME = "durable-agent-runner"
Attributes = dict[str, AttributeValue]


class TelemetryConfigError(ValueError):
    """An OTEL_* setting this module cannot honour (worker.py exits 2 naming it)."""


def enabled(env: Mapping[str, str]) -> bool:
    """Tracing is on with an OTLP endpoint, unless the standard switches turn it off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARS)


def exporter_from_env(env: Mapping[str, str]) -> SpanExporter:
    """The OTLP exporter the environment asks for. The exporter itself reads the endpoint,
    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION and _CERTIFICATE."""
    for name in ENDPOINT_VARS:
        url = env.get(name, "").strip()
        parts = urlsplit(url)
        if url and (parts.scheme not in ("http", "https") or not parts.hostname):
            raise TelemetryConfigError(f"{name} must be an http:// or https:// URL with a host, not {url!r}")
    traces = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    name = traces if env.get(traces, "").strip() else "OTEL_EXPORTER_OTLP_PROTOCOL"
    protocol = env.get(name, "").strip() or "http/protobuf"
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":  # not a dependency: gRPC's exporter brings grpcio
        try:
            module = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        except ImportError:
            raise TelemetryConfigError(
                f"{name}=grpc needs `pip install opentelemetry-exporter-otlp-proto-grpc`"
            ) from None
        return cast(SpanExporter, module.OTLPSpanExporter())
    raise TelemetryConfigError(f"{name} must be http/protobuf or grpc, not {protocol!r}")


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _resource(service_name: str) -> Resource:
    """OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES as the SDK reads them; `service_name` when neither names one."""
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create({} if named else {"service.name": service_name})


class Telemetry:
    """A tracer provider that exports, and what installs it in a worker or a client."""

    def __init__(self, provider: ReplaySafeTracerProvider, *, capture_content: bool = False) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(TRACER_NAME)
        self.capture_content = capture_content

    @classmethod
    def from_env(cls, service_name: str) -> Telemetry | None:
        """None unless tracing is on (see `enabled`); TelemetryConfigError for a bad setting."""
        if not enabled(os.environ):
            return None
        return cls.exporting(
            exporter_from_env(os.environ), service_name=service_name, capture_content=_yes(os.environ.get(CAPTURE_VAR))
        )

    @classmethod
    def exporting(cls, exporter: SpanExporter, *, service_name: str, capture_content: bool = False) -> Telemetry:
        # Sampler (OTEL_TRACES_SAMPLER), span limits and batching (OTEL_BSP_*) come from the environment.
        provider = create_tracer_provider(resource=_resource(service_name))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, capture_content=capture_content)

    def worker_interceptors(self, settings: LLMSettings) -> list[Interceptor]:
        """For every Worker, ahead of the masking interceptor (so spans see what it masked).
        The contrib's workflow side needs its replay-safe provider as the global one: set here."""
        if not isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider):
            trace.set_tracer_provider(self.provider)  # once per process; later calls are refused
        if not isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider):
            raise TelemetryConfigError(
                "this process already set a global OpenTelemetry tracer provider that is not temporalio's "
                "ReplaySafeTracerProvider (temporalio.contrib.opentelemetry.create_tracer_provider)"
            )
        return [OpenTelemetryInterceptor(), _RunTracing(self, settings)]

    def client(self, client: Client) -> Client:
        """`client` (same connection) with a span around each run it starts, whose context the
        run carries. For clients that start runs: a worker's client stays as it is, since
        `worker_interceptors` installs the worker's side (installing both doubles them)."""
        config = client.config()
        config["interceptors"] = [*config["interceptors"], _StartSpans(self.tracer), OpenTelemetryInterceptor()]
        return Client(**config)

    def shutdown(self) -> None:
        """Send what is left and stop (the worker's and client's last step)."""
        self.provider.shutdown()


# --------------------------------------------------------------------------- client.py


_client_telemetry: list[Telemetry] = []


def traced(client: Client, service_name: str = "agent-client") -> Client:
    """For client.py: `client` tracing the runs it starts when tracing is on, else `client`. A
    bad OTEL_* setting is reported on stderr and otherwise ignored: the command still works."""
    try:
        telemetry = Telemetry.from_env(service_name)
    except TelemetryConfigError as err:
        print(f"warning: OpenTelemetry off: {err}", file=sys.stderr)
        return client
    if telemetry is None:
        return client
    _client_telemetry.append(telemetry)
    return telemetry.client(client)


def flush() -> None:
    """Send the spans `traced` clients made (client.py calls this before it exits)."""
    while _client_telemetry:
        _client_telemetry.pop().shutdown()


class _StartSpans(ClientInterceptor):
    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _StartOutbound(next, self._tracer)


class _StartOutbound(OutboundInterceptor):
    """The run's root span when the caller has none (the contrib, inside, sends its context)."""

    def __init__(self, next: OutboundInterceptor, tracer: Tracer) -> None:
        super().__init__(next)
        self._tracer = tracer

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        attributes: Attributes = {"temporalWorkflowID": input.id}
        agent = getattr(input.args[0], "agent", None) if input.args else None
        if isinstance(agent, str):
            attributes["gen_ai.agent.name"] = agent
        with _span(self._tracer, f"StartWorkflow:{input.workflow}", SpanKind.CLIENT, attributes):
            return await super().start_workflow(input)


# ------------------------------------------------------------------------------ spans


@contextmanager
def _span(tracer: Tracer, name: str, kind: SpanKind, attributes: Attributes) -> Iterator[Span]:
    """A span around a call. A failure marks it with its type only: messages may quote anything."""
    with tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as err:
            _error(span, err.type if isinstance(err, ApplicationError) and err.type else type(err).__name__)
            raise


def _error(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def _usage(usage: Usage) -> Attributes:
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


def provider_name(base_url: str) -> str:
    """gen_ai.provider.name: `openai` for any OpenAI-compatible server (the wire it speaks, as the
    conventions ask of an instrumentation that cannot know the backend), Azure's by its host."""
    host = urlsplit(base_url).hostname or ""
    return "azure.ai.openai" if host.endswith((".openai.azure.com", ".services.ai.azure.com")) else "openai"


# --------------------------------------------------------------------- activity spans


class _ModelCall:
    """The span of one model-call attempt, reachable from the activity (see `model_request`)."""

    def __init__(self, span: Span, content: _Content | None, tracer: Tracer) -> None:
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
        attributes = _usage(reply.usage)
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


_model_call: ContextVar[_ModelCall | None] = ContextVar("agent_model_call_span", default=None)


def model_request(agent: AgentSpec, messages: Sequence[Message], *, api: str, stream: bool) -> None:
    """Called by the model activity with what it is about to send: the request's settings on the
    attempt's span, and (only when content capture is on) the instructions and messages. Does
    nothing unless the worker traces."""
    call = _model_call.get()
    if call is not None:
        call.request(agent, messages, api, stream)


class _Content:
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


class _ActivitySpans(ActivityInboundInterceptor):
    """A span for each attempt of a model call (a compaction is one too) and of a tool call."""

    def __init__(self, next: ActivityInboundInterceptor, root: _RunTracing) -> None:
        super().__init__(next)
        self._root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        arg = input.args[0] if input.args else None
        if kind in (MODEL_CALL_ACTIVITY, COMPACT_ACTIVITY):
            return await self._model(input, arg, compaction=kind == COMPACT_ACTIVITY)
        if kind == TOOL_CALL_ACTIVITY:
            return await self._tool(input, arg)
        return await super().execute_activity(input)

    def _common(self, arg: object) -> Attributes:
        info = activity.info()
        attributes: Attributes = {
            "temporalWorkflowID": info.workflow_id or "",
            "temporalRunID": info.workflow_run_id or "",
            "temporalActivityID": info.activity_id,
            "temporalActivityAttempt": info.attempt,
        }
        agent, turn = getattr(arg, "agent", None), getattr(arg, "turn", None)
        if isinstance(agent, str) and agent:
            attributes["gen_ai.agent.name"] = agent
        if isinstance(turn, int):
            attributes["agent.turn"] = turn
        return attributes

    async def _model(self, input: ExecuteActivityInput, arg: object, *, compaction: bool) -> Any:
        root = self._root
        model = getattr(arg, "model", None) or root.settings.model
        address = urlsplit(root.settings.base_url)
        attributes = self._common(arg) | {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": root.provider,
            "gen_ai.system": root.provider,  # the attribute's name before the conventions renamed it
            "gen_ai.request.model": model,
            "server.address": address.hostname or "",
            "server.port": address.port or (443 if address.scheme == "https" else 80),
        }
        if compaction:
            attributes["agent.compaction"] = True
        with _span(root.tracer, f"chat {model}", SpanKind.CLIENT, attributes) as span:
            call = _ModelCall(span, root.content, root.tracer)
            token = _model_call.set(call)
            try:
                result = await super().execute_activity(input)
            finally:
                _model_call.reset(token)
            if isinstance(result, ModelReply):
                call.reply(result)
            elif isinstance(usage := getattr(result, "usage", None), Usage):
                span.set_attributes(_usage(usage))
            return result

    async def _tool(self, input: ExecuteActivityInput, arg: object) -> Any:
        root = self._root
        attributes = self._common(arg) | _tool_attributes(arg, root.content)
        name = f"execute_tool {getattr(arg, 'tool', '')}"
        with _span(root.tracer, name, SpanKind.INTERNAL, attributes) as span:
            result = await super().execute_activity(input)
            if isinstance(result, ToolResult):
                _tool_result(span, result, root.content)
            return result


def _tool_attributes(arg: object, content: _Content | None) -> Attributes:
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


def _tool_result(span: Span, result: ToolResult, content: _Content | None) -> None:
    if result.is_error:  # the model reads the error: the call itself went wrong
        _error(span, "tool_error")
    if content is not None:
        span.set_attribute("gen_ai.tool.call.result", content.json(result.output))


@contextmanager
def tool_with_reply(call: ToolCallInput) -> Iterator[Callable[[ToolResult], None]]:
    """The span of a call the model activity runs with its reply (ToolActivities.run_with_reply),
    inside the model call's: yields what records the result. Does nothing unless the worker traces."""
    model = _model_call.get()
    if model is None:
        yield lambda result: None
        return
    attributes = _tool_attributes(call, model.content) | {"agent.turn": call.turn, "agent.tool.with_reply": True}
    if call.agent:
        attributes["gen_ai.agent.name"] = call.agent
    with _span(model.tracer, f"execute_tool {call.tool}", SpanKind.INTERNAL, attributes) as span:
        yield lambda result: _tool_result(span, result, model.content)


# --------------------------------------------------------------------- workflow spans


class _RunTracing(Interceptor):
    """The spans this module makes on a worker: execution and turn spans in workflows, model
    and tool spans in activities."""

    def __init__(self, telemetry: Telemetry, settings: LLMSettings) -> None:
        self.tracer = telemetry.tracer
        self.settings = settings
        self.provider = provider_name(settings.base_url)
        self.content = _Content(Redactor.for_settings(settings)) if telemetry.capture_content else None

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivitySpans(next, self)

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        tracer = self.tracer

        class Traced(_RunInbound):
            _tracer = tracer

        return Traced


@contextmanager
def _attached(context: Context) -> Iterator[None]:
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


class _Turn:
    def __init__(self, number: int, span: Span, context: Context) -> None:
        self.number = number
        self.span = span
        self.context = context
        self.last_done: int | None = None  # workflow time the turn's last activity or child run ended

    def done(self, _: object) -> None:
        self.last_done = workflow.time_ns()

    def end(self) -> None:
        """Ends at its last piece of work, not when the next turn starts: a session's last turn of
        an answer is not stretched over the wait for the next message."""
        self.span.end(end_time=self.last_done or workflow.time_ns())


class _Execution:
    """The spans of one execution: its own and its turns'. Started from the context the contrib
    attached from the run's headers: the client's span, or the previous execution's parent."""

    def __init__(self, tracer: Tracer, input: ExecuteWorkflowInput) -> None:
        info = workflow.info()
        self.tracer = tracer
        received = otel_context.get_current()
        arg = input.args[0] if input.args else None
        self.agent = str(getattr(arg, "agent", "") or "")
        self.ids: Attributes = {"temporalWorkflowID": info.workflow_id, "temporalRunID": info.run_id}
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent,
            "gen_ai.conversation.id": info.workflow_id,
            **self.ids,
            "agent.session": bool(getattr(arg, "session", False)),
        }
        if info.continued_run_id:
            attributes["temporalContinuedRunID"] = info.continued_run_id
        self.span = tracer.start_span(
            f"invoke_agent {self.agent}", received, attributes=attributes, start_time=workflow.time_ns()
        )
        self.context = trace.set_span_in_context(self.span, received)
        # What continue-as-new hands on: what this execution received, so executions are siblings;
        # a run started without a traced client hangs its later executions under its first one.
        started_traced = trace.get_current_span(received).get_span_context().is_valid
        self.handed_on = received if started_traced else self.context
        self.turn: _Turn | None = None

    def enter(self, args: Sequence[Any]) -> _Turn | None:
        """The turn an activity or child run belongs to: the turn its input names (a new turn
        span when it is the next one), else the current one."""
        number = getattr(args[0], "turn", None) if args else None
        if isinstance(number, int) and number > 0 and (self.turn is None or number > self.turn.number):
            if self.turn is not None:
                self.turn.end()
            agent = getattr(args[0], "agent", None) or self.agent
            attributes: Attributes = {"agent.turn": number, "gen_ai.agent.name": str(agent), **self.ids}
            span = self.tracer.start_span(
                f"turn {number}", self.context, attributes=attributes, start_time=workflow.time_ns()
            )
            self.turn = _Turn(number, span, trace.set_span_in_context(span, self.context))
        return self.turn

    def end(self, error: str | None = None, *, continued: bool = False) -> None:
        if self.turn is not None:
            self.turn.end()
        if continued:
            self.span.set_attribute("agent.continued_as_new", True)
        if error is not None:
            _error(self.span, error)
        self.span.end(end_time=workflow.time_ns())


class _RunInbound(WorkflowInboundInterceptor):
    _tracer: Tracer

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        self.execution: _Execution | None = None
        super().init(_RunOutbound(outbound, self))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        execution = self.execution = _Execution(self._tracer, input)
        try:
            result = await super().execute_workflow(input)
        except workflow.ContinueAsNewError:
            execution.end(continued=True)
            raise
        except BaseException as err:
            # Ends only what ends the run (cancelled, failed): an eviction or a failed workflow
            # task leaves the span open, for the replay that goes on with the same span.
            if isinstance(err, ApplicationError):
                execution.end(err.type or "ApplicationError")
            elif isinstance(err, Exception) and workflow.is_failure_exception(err):
                execution.end(type(err).__name__)
            elif isinstance(err, asyncio.CancelledError) and not workflow.unsafe.is_replaying():
                execution.end("cancelled")
            raise
        execution.end()
        return result


class _RunOutbound(WorkflowOutboundInterceptor):
    """Makes the right span current while the contrib, further in, writes it into the headers."""

    def __init__(self, next: WorkflowOutboundInterceptor, root: _RunInbound) -> None:
        super().__init__(next)
        self._root = root

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        execution = self._root.execution
        if execution is None:
            return super().start_activity(input)
        turn = execution.enter(input.args)
        with _attached(turn.context if turn else execution.context):
            handle = super().start_activity(input)
        if turn is not None:
            handle.add_done_callback(turn.done)
        return handle

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        execution = self._root.execution
        if execution is None:
            return await super().start_child_workflow(input)
        turn = execution.turn
        with _attached(turn.context if turn else execution.context):
            handle = await super().start_child_workflow(input)
        if turn is not None:
            handle.add_done_callback(turn.done)
        return handle

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        execution = self._root.execution
        if execution is None:
            super().continue_as_new(input)
        with _attached(execution.handed_on):
            super().continue_as_new(input)
