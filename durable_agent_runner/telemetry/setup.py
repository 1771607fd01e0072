"""Turning tracing on: the OTLP exporter the OTEL_* variables ask for, the tracer provider, and
what installs it in a worker (`Telemetry.worker_interceptors`) or a client (`traced`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import cast

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, ReplaySafeTracerProvider, create_tracer_provider
from temporalio.worker import Interceptor

from durable_agent_runner.config.env import ClientSettings, SettingsError, TelemetrySettings
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.telemetry.interceptors import RunTracing, StartSpans

TRACER_NAME = "durable-agent-runner"


class TelemetryConfigError(ValueError):
    """An OTEL_* setting this module cannot honour (worker.py exits 2 naming it)."""


def settings_of(env: Mapping[str, str] | TelemetrySettings | None = None) -> TelemetrySettings:
    """The OTEL_* settings (config/env.py) of `env` (default: the process's environment)."""
    if isinstance(env, TelemetrySettings):
        return env
    try:
        return cast(TelemetrySettings, TelemetrySettings.load(env))
    except SettingsError as err:
        raise TelemetryConfigError(str(err)) from None


def enabled(env: Mapping[str, str] | TelemetrySettings | None = None) -> bool:
    """Tracing is on with an OTLP endpoint, unless the standard switches turn it off."""
    return settings_of(env).enabled


def exporter_from_env(env: Mapping[str, str] | TelemetrySettings | None = None) -> SpanExporter:
    """The OTLP exporter the settings ask for. The exporter itself reads the endpoint,
    OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION and _CERTIFICATE."""
    protocol, name = settings_of(env).protocol_in_use
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
    raise TelemetryConfigError(f"{name} must be http/protobuf or grpc, not {protocol!r}")  # checked by the settings


def _capture() -> bool:
    """OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT as the settings model reads it, with the
    project's one yes/no parser (worker.py and client.py have already refused a bad value)."""
    try:
        return bool(ClientSettings.load().capture_content)
    except SettingsError as err:
        raise TelemetryConfigError(str(err)) from None


def _resource(service_name: str, settings: TelemetrySettings) -> Resource:
    """OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES as the SDK reads them; `service_name` when neither names one."""
    named = settings.service_name or "service.name=" in (settings.resource_attributes or "")
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
        settings = settings_of()
        if not settings.enabled:
            return None
        return cls.exporting(
            exporter_from_env(settings), service_name=service_name, capture_content=_capture(), settings=settings
        )

    @classmethod
    def exporting(
        cls,
        exporter: SpanExporter,
        *,
        service_name: str,
        capture_content: bool = False,
        settings: TelemetrySettings | None = None,
    ) -> Telemetry:
        # Sampler (OTEL_TRACES_SAMPLER), span limits and batching (OTEL_BSP_*): the SDK reads them itself.
        provider = create_tracer_provider(resource=_resource(service_name, settings or settings_of()))
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
        return [OpenTelemetryInterceptor(), RunTracing(self, settings)]

    def client(self, client: Client) -> Client:
        """`client` (same connection) with a span around each run it starts, whose context the
        run carries. For clients that start runs: a worker's client stays as it is, since
        `worker_interceptors` installs the worker's side (installing both doubles them)."""
        config = client.config()
        config["interceptors"] = [*config["interceptors"], StartSpans(self.tracer), OpenTelemetryInterceptor()]
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
