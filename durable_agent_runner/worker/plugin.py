"""AgentPlugin: durable agents in a worker and a client a team already has.

A complete worker of a team's own (its `worker.py`), with the agents and tools in `my_agents.py`
(`from durable_agent_runner import Agent, tool`). Besides the agents it runs a workflow of the
team's, here one that asks an agent as a child workflow::

    import asyncio
    import os
    import signal

    from temporalio import workflow
    from temporalio.client import Client
    from temporalio.worker import Worker

    # temporalio's sandbox imports this module afresh to check and run AskTheAgent; the runner is
    # no workflow code (its plugin brings httpx, threads and the worker's activities): pass it through.
    with workflow.unsafe.imports_passed_through():
        from durable_agent_runner import WORKFLOW_NAME, AgentPlugin, RunInput, RunResult


    @workflow.defn
    class AskTheAgent:
        @workflow.run
        async def run(self, question: str) -> str:
            run = RunInput(prompt=question)
            reply = await workflow.execute_child_workflow(WORKFLOW_NAME, run, result_type=RunResult)
            return reply.output


    async def main() -> None:
        plugin = AgentPlugin(["my_agents"])  # the modules that define the agents and their tools
        client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"), plugins=[plugin])
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        # Runs the agents (their workflow, model calls and tools) beside the team's own workflows.
        async with Worker(client, task_queue=os.environ.get("TASK_QUEUE", "agents"), workflows=[AskTheAgent]):
            await stop.wait()


    if __name__ == "__main__":
        asyncio.run(main())

The model server comes from LLM_BASE_URL, LLM_MODEL and LLM_API_KEY (or `settings=`). Runs
start from any client that carries the plugin (for its data converter):
`client.start_workflow(WORKFLOW_NAME, RunInput(prompt=...), id=..., task_queue="agents")`.
tests/test_plugin.py runs this snippet as written.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker, WorkerConfig

from durable_agent_runner.activities.ahead import call_ahead
from durable_agent_runner.activities.compaction import CompactionActivities
from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.activities.deliver import DeliverActivities
from durable_agent_runner.activities.evals import EvalActivities
from durable_agent_runner.activities.hooks import HookActivities
from durable_agent_runner.activities.model import ModelActivities, new_http_client
from durable_agent_runner.activities.notify import NotifyActivities
from durable_agent_runner.activities.prices import PriceTable
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.agents import executor
from durable_agent_runner.agents.executor import ToolThreads
from durable_agent_runner.agents.lifecycle import HookCaller, RunHooks
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.config.connection import data_converter
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.redact import Redactor, redaction_for
from durable_agent_runner.telemetry import Telemetry
from durable_agent_runner.worker.group import WorkerGroup
from durable_agent_runner.worker.hook_feed import HookFeed, state_dir_from_env
from durable_agent_runner.worker.watchdog import DEFAULT_STALL_SECONDS, LoopWatchdog, tool_codes
from durable_agent_runner.workflows import AgentRun, DeliverMessage
from durable_agent_runner.workflows.eval_run import EvalRun  # not in workflows/__init__: evals import workflows.types
from durable_agent_runner.workflows.score_run import ScoreRun
from durable_agent_runner.workflows.types import agent_task_queue

DEFAULT_TOOLS = ["examples.demo_agent"]

# build_worker's own Worker settings; `**options` overrides them.
WORKER_DEFAULTS: dict[str, object] = {
    "graceful_shutdown_timeout": timedelta(seconds=10),
    # Streamed text reaches watchers through heartbeat details: send them promptly.
    "max_heartbeat_throttle_interval": timedelta(milliseconds=100),
}


# The per-agent workers only run activities, and little at a time: two pollers each are plenty.
AGENT_WORKER_DEFAULTS: dict[str, object] = {
    "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(maximum=2),
}


@dataclass(frozen=True)
class PluginOptions:
    """What an AgentPlugin takes besides its tools, settings and HTTP client, defined once:
    `AgentPlugin(tools, options=PluginOptions(...))`; `build_worker` and `python worker.py` pass
    them by these names."""

    tool_threads: int | None = None  # threads for sync tools; None: $TOOL_THREADS or 16
    stall_seconds: float = DEFAULT_STALL_SECONDS  # the event loop blocked this long: the watchdog names the culprit
    run_hooks: Sequence[RunHooks] = ()  # lifecycle hooks (agents/lifecycle.py); exactly-once ones get a feed
    hooks_state_dir: Path | None = None  # the feed's checkpoints; None: $HOOKS_STATE_DIR or .state/hooks
    prices: PriceTable | None = None  # None: the shipped table ($LLM_PRICES over it)
    telemetry: Telemetry | None = None  # trace runs (telemetry/)


class AgentPlugin(SimplePlugin):
    """Durable agents in a worker and a client a team already has, in two lines:

        client = await Client.connect("localhost:7233", plugins=[AgentPlugin(["my_agents"])])
        worker = Worker(client, task_queue="my-queue")  # runs the agents: workflows, model calls, tools

    On the client: the runner's data converter (pydantic; large payloads and encryption when
    configured). On a worker: the AgentRun workflow (outside the sandbox, by its own definition:
    workflows/agent.py; the worker's other workflows keep theirs) and DeliverMessage (a schedule's
    or a webhook's message to a session); the model, tool, resolve, hook, compaction, deliver and
    notification activities; the masking (and, given `telemetry`, tracing) interceptors; and, while
    the worker runs, the per-agent workers that routing needs (a run's tool calls go only to
    workers holding its agent's version: `agent_task_queue`), the tool threads, the loop watchdog
    and the lifecycle hooks' feed. `python worker.py` runs the same.
    One plugin serves one worker (its task queue decides the per-agent queues)."""

    def __init__(
        self,
        tools: Sequence[str] | Registry = tuple(DEFAULT_TOOLS),
        *,
        settings: LLMSettings | None = None,
        http: httpx.AsyncClient | None = None,
        options: PluginOptions | None = None,
        agent_worker_options: dict[str, object] | None = None,
    ) -> None:
        self.registry = tools if isinstance(tools, Registry) else Registry.from_modules(list(tools))
        self.settings = settings or LLMSettings.from_env()
        self._http, self._owns_http = http, http is None
        self.options = options or PluginOptions()
        self._agent_worker_options = agent_worker_options or {}
        self.group: WorkerGroup | None = None  # the per-agent workers and shared parts, once configured
        self.runs_group = True  # False when build_worker starts the group itself
        super().__init__(
            "durable-agent-runner",
            data_converter=lambda _: data_converter(),
            # DeliverMessage: schedules' and webhooks' messages to sessions; EvalRun: durable evals;
            # ScoreRun: a sampled live run's scores (online scoring)
            workflows=[AgentRun, DeliverMessage, EvalRun, ScoreRun],
            run_context=self._running,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        if self.group is not None:
            raise ValueError("an AgentPlugin serves one worker: give each worker its own")
        client, queue = config["client"], config["task_queue"]
        o = self.options
        threads_n, stall, run_hooks, state_dir, prices, telemetry = (
            o.tool_threads,
            o.stall_seconds,
            o.run_hooks,
            o.hooks_state_dir,
            o.prices,
            o.telemetry,
        )
        if self._http is None:
            self._http = new_http_client(self.settings)
        settings, http, registry = self.settings, self._http, self.registry
        threads = ToolThreads(executor.size_from_env() if threads_n is None else threads_n)
        cache = ContextCache()
        caller = HookCaller(run_hooks, Redactor.for_settings(settings))
        tools = ToolActivities(registry, cache=cache, settings=settings, threads=threads, hooks=caller, prices=prices)
        model = ModelActivities(client, settings, http, cache, hooks=caller, prices=prices, tools=tools)
        tools.ahead = functools.partial(call_ahead, model)  # a lone tool's activity calls the model next
        compaction = CompactionActivities(model)
        hooks = HookActivities(registry, client, settings, http, threads)
        notify = NotifyActivities(settings.notify)  # who hears of a run waiting for a person
        masking, _ = redaction_for(settings)
        # Tracing outside masking: spans see masked values.
        interceptors: list[Any] = [*(telemetry.worker_interceptors(settings) if telemetry else []), masking]
        config["interceptors"] = [*interceptors, *config.get("interceptors", [])]
        served: list[Callable[..., Any]] = [
            model.call_model, compaction.compact, tools.call_tool, tools.resolve_agent, hooks.run_hook,
            DeliverActivities(client).deliver, notify.notify, EvalActivities(client, settings, model).score,
        ]  # fmt: skip
        config["activities"] = [*config.get("activities", []), *served]
        for key, value in WORKER_DEFAULTS.items():
            if config.get(key) is None:
                config[key] = value  # type: ignore[literal-required]  # Worker's tuning knobs, by name
        per_agent: dict[str, Any] = {
            **WORKER_DEFAULTS, **AGENT_WORKER_DEFAULTS, **self._agent_worker_options, "interceptors": interceptors
        }  # fmt: skip
        # The per-agent workers poll through the same connection, without this plugin (it would
        # configure them as another base worker).
        c = client.config()
        plain = Client(
            c["service_client"],
            namespace=c["namespace"],
            data_converter=client.data_converter,
            interceptors=c["interceptors"],
            default_workflow_query_reject_condition=c["default_workflow_query_reject_condition"],
            header_codec_behavior=c["header_codec_behavior"],
        )
        workers = []
        for agent in registry.agents():  # the agents it reaches are registered too: their code runs here
            routed: list[tuple[str, list[Callable[..., Any]]]] = [
                (agent_task_queue(queue, agent.name), [tools.resolve_agent]),
                (agent_task_queue(queue, agent.name, agent.version), [tools.call_tool, hooks.run_hook]),
            ]
            for q, acts in routed:
                workers.append(Worker(plain, task_queue=q, activities=acts, **per_agent))
        feed = HookFeed(client, queue, caller, state_dir or state_dir_from_env()) if caller.wants_feed else None
        watchdog = LoopWatchdog(tool_codes(registry.tools()), threshold=stall)
        self.group = WorkerGroup(workers, threads, watchdog, hooks=caller, feed=feed)
        return config

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """Around the worker's run: the per-agent workers and the rest, unless build_worker runs them."""
        assert self.group is not None, "configured with the worker"
        try:
            if self.runs_group:
                async with self.group:
                    yield
            else:
                yield
        finally:
            if self._owns_http and self._http is not None:
                await self._http.aclose()


def build_worker(
    client: Client,
    queue: str,
    registry: Registry,
    settings: LLMSettings,
    http: httpx.AsyncClient,
    **options: object,
) -> WorkerGroup:
    """The workers, as `python worker.py` runs them; tests build theirs with this too: a Worker
    on `queue` with the AgentPlugin, and the plugin's per-agent workers, started and stopped as one.
    `options` are the plugin's (`PluginOptions`, by name) and Worker settings, which override
    WORKER_DEFAULTS for every Worker. The caller owns `http` (see `new_http_client`) and closes it
    after the workers stop. Every worker masks the API key in whatever its activities return,
    heartbeat or raise."""
    names = {f.name for f in fields(PluginOptions)}
    chosen: dict[str, Any] = {k: options.pop(k) for k in list(options) if k in names}
    extra = options.pop("interceptors", None)
    plugin = AgentPlugin(
        registry, settings=settings, http=http, options=PluginOptions(**chosen), agent_worker_options=dict(options)
    )
    plugin.runs_group = False  # the group below starts every worker itself, at once
    base = {**WORKER_DEFAULTS, **options, "interceptors": list(extra) if isinstance(extra, list | tuple) else []}
    worker = Worker(client, task_queue=queue, plugins=[plugin], **base)  # type: ignore[arg-type]  # knobs as given
    assert plugin.group is not None
    group = plugin.group
    return WorkerGroup([worker, *group.workers], group.threads, group.watchdog, hooks=group.hooks, feed=group.feed)
