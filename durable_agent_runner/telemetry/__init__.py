"""OpenTelemetry traces of agent runs: on when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; without it nothing here is built or installed.

One trace per run, the same across workers, retries and continue-as-new::

    StartWorkflow:AgentRun            the client that started the run (client.py, or `traced`)
    └─ invoke_agent demo              one per execution; continue-as-new adds a sibling
       ├─ turn 1                      every activity the run schedules for turn 1
       │  ├─ chat gpt-4.1-mini        one per attempt: a retried call shows each try
       │  │  └─ execute_tool get_weather   a cheap call run with the reply (tool_with_reply)
       │  └─ execute_tool send_report   a tool activity, local or not
       │     └─ chat gpt-4.1-mini   the next turn's call, when the tool's activity makes it
       └─ turn 2 …

`temporalio.contrib.opentelemetry.OpenTelemetryInterceptor`, with its own spans off, carries the
context in Temporal headers: client → run → activities and child runs, and on to the next
execution at continue-as-new. Retries and other workers read the same headers. The spans are
made in interceptors.py: the execution and turn spans by a workflow interceptor, on the
workflow's clock, through the contrib's replay-safe tracer provider (span ids come from the run's
seeded random, so a worker that replays the run makes the same spans again, and a span is ended,
so exported, only by the worker that ends it live); the model and tool spans by an activity
interceptor. spans.py fills them in; setup.py reads the OTEL_* variables and installs it all.

The workflow interceptor only reads workflow time and info and wraps the calls it sees: it never
adds, drops or reorders a command (tests/test_telemetry.py replays a traced run under it).

Spans hold names, ids, models, token counts, finish reasons and error types; never an error's
message, the API key or any header. Prompts, completions, tool arguments and results only with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, masked like everything the worker
writes and cut at CONTENT_LIMIT characters.
"""

from durable_agent_runner.telemetry.setup import (
    Telemetry,
    TelemetryConfigError,
    enabled,
    exporter_from_env,
    flush,
    traced,
)
from durable_agent_runner.telemetry.spans import (
    CONTENT_LIMIT,
    model_call_ahead,
    model_request,
    provider_name,
    tool_with_reply,
)

__all__ = [
    "CONTENT_LIMIT",
    "Telemetry",
    "TelemetryConfigError",
    "enabled",
    "exporter_from_env",
    "flush",
    "model_call_ahead",
    "model_request",
    "provider_name",
    "tool_with_reply",
    "traced",
]
