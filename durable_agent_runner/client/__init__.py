"""The Python client: start agent runs, await their typed results, follow them live, decide
their tool calls, talk to sessions. `client.py` is a thin shell over it.

    import durable_agent_runner as dar

    client = await dar.connect()                    # the settings client.py reads
    run = await client.start("demo", "Weather in Tokyo?")
    async for event in run.events():                # steps and streamed text, live
        ...
    answer = await run.result()                     # typed when the agent has output_type

Errors: see durable_agent_runner/client/errors.py (one tree under AgentRunError).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent_runner.client.agent_client import AgentClient, connect
    from durable_agent_runner.client.errors import (
        AgentRunError,
        DecisionRefused,
        EventsUnavailable,
        NoWorkerAnswered,
        RunCancelled,
        RunFailed,
        RunNotFound,
    )
    from durable_agent_runner.client.events import Event, Retrying, RunClosed, TextDelta, TextDiscarded
    from durable_agent_runner.client.handles import RunHandle, SessionHandle
    from durable_agent_runner.client.script import run_script
    from durable_agent_runner.client.status import RunInfo
    from durable_agent_runner.workflows.types import RunEvent

# Imported on first use: the CLI's modules import parts of this package, and this package's
# handles import none of the CLI's, so no cycle forms however they are reached.
_EXPORTS = {
    "AgentClient": "durable_agent_runner.client.agent_client",
    "connect": "durable_agent_runner.client.agent_client",
    "run_script": "durable_agent_runner.client.script",
    "AgentRunError": "durable_agent_runner.client.errors",
    "DecisionRefused": "durable_agent_runner.client.errors",
    "EventsUnavailable": "durable_agent_runner.client.errors",
    "NoWorkerAnswered": "durable_agent_runner.client.errors",
    "RunCancelled": "durable_agent_runner.client.errors",
    "RunFailed": "durable_agent_runner.client.errors",
    "RunNotFound": "durable_agent_runner.client.errors",
    "Event": "durable_agent_runner.client.events",
    "Retrying": "durable_agent_runner.client.events",
    "RunClosed": "durable_agent_runner.client.events",
    "TextDelta": "durable_agent_runner.client.events",
    "TextDiscarded": "durable_agent_runner.client.events",
    "RunHandle": "durable_agent_runner.client.handles",
    "SessionHandle": "durable_agent_runner.client.handles",
    "RunInfo": "durable_agent_runner.client.status",
    "RunEvent": "durable_agent_runner.workflows.types",
}

__all__ = [
    "AgentClient",
    "AgentRunError",
    "DecisionRefused",
    "Event",
    "EventsUnavailable",
    "NoWorkerAnswered",
    "Retrying",
    "RunCancelled",
    "RunClosed",
    "RunEvent",
    "RunFailed",
    "RunHandle",
    "RunInfo",
    "RunNotFound",
    "SessionHandle",
    "TextDelta",
    "TextDiscarded",
    "connect",
    "run_script",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agent_runner.client' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
