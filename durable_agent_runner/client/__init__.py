"""The Python client: start agent runs, await their typed results, follow them live, decide
their tool calls, pause, edit and fork them, list and export them, talk to sessions. The CLI
(`durable-agent-runner`, `client.py`) and the web console are thin shells over it.

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
    from durable_agent_runner.client.checks import BadArgument
    from durable_agent_runner.client.control import Forked
    from durable_agent_runner.client.diff import RunDiff
    from durable_agent_runner.client.errors import (
        AgentRunError,
        DecisionRefused,
        EventsUnavailable,
        IdTaken,
        NotThatKind,
        NoWorkerAnswered,
        RunCancelled,
        RunFailed,
        RunNotFound,
        StillRunning,
    )
    from durable_agent_runner.client.events import Event, Retrying, RunClosed, TextDelta, TextDiscarded
    from durable_agent_runner.client.handles import RunHandle
    from durable_agent_runner.client.listing import RunRow, RunsPage
    from durable_agent_runner.client.schedules import (
        ScheduledRun,
        ScheduleExists,
        ScheduleNotFound,
        ScheduleRow,
        Schedules,
        ScheduleView,
        Triggered,
    )
    from durable_agent_runner.client.script import run_script
    from durable_agent_runner.client.sessions import SessionHandle
    from durable_agent_runner.client.status import RunInfo, WaitingFor
    from durable_agent_runner.workflows.types import AnyRunEvent, EventKind, Phase, RunEvent

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
    "IdTaken": "durable_agent_runner.client.errors",
    "NotThatKind": "durable_agent_runner.client.errors",
    "RunCancelled": "durable_agent_runner.client.errors",
    "RunFailed": "durable_agent_runner.client.errors",
    "RunNotFound": "durable_agent_runner.client.errors",
    "StillRunning": "durable_agent_runner.client.errors",
    "BadArgument": "durable_agent_runner.client.checks",
    "Forked": "durable_agent_runner.client.control",
    "RunDiff": "durable_agent_runner.client.diff",
    "RunRow": "durable_agent_runner.client.listing",
    "RunsPage": "durable_agent_runner.client.listing",
    "WaitingFor": "durable_agent_runner.client.status",
    "Event": "durable_agent_runner.client.events",
    "Retrying": "durable_agent_runner.client.events",
    "RunClosed": "durable_agent_runner.client.events",
    "TextDelta": "durable_agent_runner.client.events",
    "TextDiscarded": "durable_agent_runner.client.events",
    "RunHandle": "durable_agent_runner.client.handles",
    "SessionHandle": "durable_agent_runner.client.sessions",
    "RunInfo": "durable_agent_runner.client.status",
    "Schedules": "durable_agent_runner.client.schedules",
    "ScheduleView": "durable_agent_runner.client.schedules",
    "ScheduleRow": "durable_agent_runner.client.schedules",
    "ScheduledRun": "durable_agent_runner.client.schedules",
    "Triggered": "durable_agent_runner.client.schedules",
    "ScheduleNotFound": "durable_agent_runner.client.schedules",
    "ScheduleExists": "durable_agent_runner.client.schedules",
    "RunEvent": "durable_agent_runner.workflows.types",
    "AnyRunEvent": "durable_agent_runner.workflows.types",
    "EventKind": "durable_agent_runner.workflows.types",
    "Phase": "durable_agent_runner.workflows.types",
}

__all__ = [
    "AgentClient",
    "AgentRunError",
    "AnyRunEvent",
    "BadArgument",
    "DecisionRefused",
    "Event",
    "EventKind",
    "EventsUnavailable",
    "Forked",
    "IdTaken",
    "NoWorkerAnswered",
    "NotThatKind",
    "Phase",
    "Retrying",
    "RunCancelled",
    "RunClosed",
    "RunDiff",
    "RunEvent",
    "RunFailed",
    "RunHandle",
    "RunInfo",
    "RunNotFound",
    "RunRow",
    "RunsPage",
    "ScheduleExists",
    "ScheduleNotFound",
    "ScheduleRow",
    "ScheduleView",
    "ScheduledRun",
    "Schedules",
    "SessionHandle",
    "StillRunning",
    "TextDelta",
    "TextDiscarded",
    "Triggered",
    "WaitingFor",
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
