"""The interceptors that make the spans: a client's run-start span, an activity's model and tool
spans (one per attempt), and a workflow's execution and turn spans on the workflow's clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import opentelemetry.context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer
from temporalio import activity, workflow
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.client import OutboundInterceptor, StartWorkflowInput, WorkflowHandle
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

from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.redact import Redactor
from durable_agent_runner.telemetry.spans import (
    Attributes,
    Content,
    ModelCall,
    call_span,
    current_model_call,
    mark_error,
    model_ahead,
    provider_of,
    record_tool_result,
    tool_attributes,
    usage_attributes,
)
from durable_agent_runner.workflows.types import (
    COMPACT_ACTIVITY,
    MODEL_CALL_ACTIVITY,
    TOOL_CALL_ACTIVITY,
    ModelReply,
    ToolResult,
    Usage,
)
from durable_agent_runner.workflows.types.evals import EVAL_SCORE_ACTIVITY

if TYPE_CHECKING:
    from durable_agent_runner.telemetry.setup import Telemetry

# ------------------------------------------------------------------- client


class StartSpans(ClientInterceptor):
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
        with call_span(self._tracer, f"StartWorkflow:{input.workflow}", SpanKind.CLIENT, attributes):
            return await super().start_workflow(input)


# --------------------------------------------------------------------- activity spans


class _ActivitySpans(ActivityInboundInterceptor):
    """A span for each attempt of a model call (a compaction is one too) and of a tool call."""

    def __init__(self, next: ActivityInboundInterceptor, root: RunTracing) -> None:
        super().__init__(next)
        self._root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        arg = input.args[0] if input.args else None
        if kind in (MODEL_CALL_ACTIVITY, COMPACT_ACTIVITY):
            return await self._model(input, arg, compaction=kind == COMPACT_ACTIVITY)
        if kind == TOOL_CALL_ACTIVITY:
            return await self._tool(input, arg)
        if kind == EVAL_SCORE_ACTIVITY:
            return await self._score(input, arg)
        return await super().execute_activity(input)

    async def _score(self, input: ExecuteActivityInput, arg: object) -> Any:
        """An eval case's or a live run's scoring (online scoring): a span naming the scored run,
        each score an attribute (`eval.score.<name>`: the value, or its error)."""
        attributes = self._common(arg) | {"agent.scored_run_id": str(getattr(arg, "run_id", ""))}
        with call_span(self._root.tracer, "eval.score", SpanKind.INTERNAL, attributes) as span:
            result = await super().execute_activity(input)
            for score in getattr(result, "scores", []):
                value = score.value if score.error is None else f"error: {score.error}"
                span.set_attribute(f"eval.score.{score.name}", value)
            return result

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
        with self._model_span(arg, compaction=compaction) as call:
            result = await super().execute_activity(input)
            if isinstance(result, ModelReply):
                call.reply(result)
            elif isinstance(usage := getattr(result, "usage", None), Usage):
                call.span.set_attributes(usage_attributes(usage))
            return result

    @contextmanager
    def _model_span(self, arg: object, *, compaction: bool = False) -> Iterator[ModelCall]:
        """A model call's attempt: the model activity's, or one a tool's activity makes ahead."""
        root = self._root
        model = getattr(arg, "model", None) or root.settings.model
        provider, base_url = provider_of(model, root.settings)
        address = urlsplit(base_url)
        attributes = self._common(arg) | {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the attribute's name before the conventions renamed it
            "gen_ai.request.model": model,
            "server.address": address.hostname or "",
            "server.port": address.port or (443 if address.scheme == "https" else 80),
        }
        if compaction:
            attributes["agent.compaction"] = True
        with call_span(root.tracer, f"chat {model}", SpanKind.CLIENT, attributes) as span:
            call = ModelCall(span, root.content, root.tracer)
            token = current_model_call.set(call)
            try:
                yield call
            finally:
                current_model_call.reset(token)

    async def _tool(self, input: ExecuteActivityInput, arg: object) -> Any:
        root = self._root
        attributes = self._common(arg) | tool_attributes(arg, root.content)
        name = f"execute_tool {getattr(arg, 'tool', '')}"
        with call_span(root.tracer, name, SpanKind.INTERNAL, attributes) as span:
            ahead = model_ahead.set(self._model_span) if getattr(arg, "then", None) is not None else None
            try:
                result = await super().execute_activity(input)
            finally:
                if ahead is not None:
                    model_ahead.reset(ahead)
            if isinstance(result, ToolResult):
                record_tool_result(span, result, root.content)
            return result


# --------------------------------------------------------------------- workflow spans


class RunTracing(Interceptor):
    """The spans this module makes on a worker: execution and turn spans in workflows, model
    and tool spans in activities."""

    def __init__(self, telemetry: Telemetry, settings: LLMSettings) -> None:
        self.tracer = telemetry.tracer
        self.settings = settings
        self.content = Content(Redactor.for_settings(settings)) if telemetry.capture_content else None

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
        self.model: str | None = None  # the model its last model call asked

    def model_call(self, model: str | None) -> None:
        """A model call of this turn: one that asks another model than the last is a fallback
        (machine/fallback.py), an event on the turn's span."""
        if self.model is not None and model != self.model:
            attributes = {"agent.model.from": self.model, "agent.model.to": model or ""}
            self.span.add_event("model_fallback", attributes, timestamp=workflow.time_ns())
        self.model = model

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
            mark_error(self.span, error)
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
            if input.activity == MODEL_CALL_ACTIVITY and input.args:
                turn.model_call(getattr(input.args[0], "model", None))
        then = getattr(input.args[0], "then", None) if input.args else None
        if then is not None:  # it makes the next turn's model call: that turn begins as it ends
            handle.add_done_callback(lambda _: execution.enter([then.call]))
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
