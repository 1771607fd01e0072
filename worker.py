"""Run a worker: `python worker.py [--tools MODULE_OR_FILE ...] [--task-queue Q]`.

Connects to Temporal as the `temporal` CLI does (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY, TEMPORAL_TLS_*, or a profile: activities/connection.py), loads the agents and
tools from the given modules (default: the demo), registers the workflow and activities, and stops
cleanly on SIGINT or SIGTERM. With PAYLOAD_CODEC_KEYS every payload is encrypted
(activities/codec.py). Model settings come from LLM_BASE_URL, LLM_MODEL and LLM_API_KEY; sync
tools share TOOL_THREADS threads (default 16).

On SIGTERM or SIGINT the worker stops taking work and gives calls in flight a grace period of
10 s to finish; then it cancels them (Temporal retries them on another worker) and exits 0 within
a few seconds more, even if a sync tool's thread is hung: threads are abandoned, never joined.

Besides the base task queue (workflows, model calls, and every activity of runs recorded before
routing), the worker polls two queues per agent it serves (`agent_task_queue`): `Q@agent` to
resolve the agent when a run starts, and `Q@agent@version` for its tool calls and hooks (its
approval policies, guardrails, output type and handoff filters: activities/hooks.py). So in a
rolling deploy a run's tool calls only reach workers that hold the exact agent the run froze.
Agents reached through handoffs or used as tools are served as well.

A `RunHooks` instance defined at module level in a --tools module is the worker's lifecycle
hooks (activities/lifecycle.py): the at-least-once ones run inside the activities, the
exactly-once ones from the hook feed (activities/hook_feed.py), which this process runs beside
its workers, with its checkpoints in HOOKS_STATE_DIR (default .state/hooks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.bridge import worker as bridge_worker
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.converter import _extstore as extstore
from temporalio.converter._extstore import StorageOperationMetrics
from temporalio.plugin import SimplePlugin
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    PollerBehaviorSimpleMaximum,
    Worker,
    WorkerConfig,
)

from activities import Registry, executor
from activities.compaction import CompactionActivities
from activities.config import SettingsError, WorkerSettings
from activities.connection import address, connect, data_converter, ensure_search_attributes, namespace, task_queue
from activities.context_cache import ContextCache
from activities.executor import ToolThreads
from activities.hook_feed import HookFeed, state_dir_from_env
from activities.hooks import HookActivities
from activities.lifecycle import HookCaller, RunHooks, hooks_in_modules
from activities.log_relay import log_to_stderr
from activities.model import ModelActivities, new_http_client
from activities.payload_store import PayloadStoreError
from activities.prices import PriceTable
from activities.redact import Redactor, redaction_for
from activities.settings import API_KEY_VARIABLES, LLMSettings
from activities.telemetry import Telemetry
from activities.tool_activities import ToolActivities
from activities.watchdog import DEFAULT_STALL_SECONDS, LoopWatchdog, tool_codes
from workflows import AgentRun
from workflows.types import agent_task_queue

log = logging.getLogger("worker")
DEFAULT_TOOLS = ["examples.demo_agent"]

# What marks a payload stored elsewhere: its encoding, its message type or its marker key
# (temporalio 1.35's converter._extstore). An activation that holds none of them has no reference
# to resolve; a false alarm (the text in a prompt) only costs the walks it always took.
_REFERENCE_MARKS = (
    extstore._REFERENCE_ENCODING,
    extstore._REFERENCE_MESSAGE_TYPE,
    extstore._REFERENCE_MARKER_KEY.encode(),
)


def skip_idle_payload_walks() -> None:
    """temporalio walks every activation and every completion three times each, in Python, to
    hand their payloads to a codec, to external storage and to a codec of storage references:
    about an eighth of a worker's main-thread Python time (README: "The benchmark"), also when no
    walk can change anything, which without a codec is nearly always: external storage stores
    only payloads of its threshold's size or more, and resolves only references. So, with no
    codec, an activation is walked only when its bytes hold a reference's mark, and a completion
    only when it is as large as the threshold; a codec gets every walk.
    Replaces two functions of temporalio 1.35's bridge module once per process, each with a
    wrapper of its own signature: the SDK calls them by their keyword names."""
    if getattr(bridge_worker.decode_activation, "_skips_idle", False):
        return
    decode, encode = bridge_worker.decode_activation, bridge_worker.encode_completion

    async def decode_activation(
        activation: WorkflowActivation,
        data_converter: DataConverter,
        decode_headers: bool,
        storage_concurrency_limit: int,
    ) -> StorageOperationMetrics:
        if data_converter.payload_codec is None and not _may_hold_references(activation):
            return StorageOperationMetrics()
        return await decode(activation, data_converter, decode_headers, storage_concurrency_limit)

    async def encode_completion(
        completion: WorkflowActivationCompletion,
        data_converter: DataConverter,
        encode_headers: bool,
        storage_concurrency_limit: int,
    ) -> StorageOperationMetrics:
        storage = data_converter.external_storage
        if data_converter.payload_codec is None and (
            storage is None or completion.ByteSize() < storage.payload_size_threshold
        ):
            return StorageOperationMetrics()
        return await encode(completion, data_converter, encode_headers, storage_concurrency_limit)

    decode_activation._skips_idle = True  # type: ignore[attr-defined]  # once per process
    bridge_worker.decode_activation, bridge_worker.encode_completion = decode_activation, encode_completion


def _may_hold_references(activation: WorkflowActivation) -> bool:
    """Whether a payload of the activation may be a reference to one stored elsewhere. Also
    without storage: the full walk then fails naming the cause (TMPRL1105)."""
    data = activation.SerializeToString()
    return any(mark in data for mark in _REFERENCE_MARKS)


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


class WorkerGroup:
    """The temporalio Workers of one process, started and stopped as one (a Worker polls a single
    task queue; routing needs several), with the tool threads and the loop watchdog they share,
    and the lifecycle hooks' feed when there is one.
    `async with build_worker(...) as group:` runs them, as with a single Worker."""

    def __init__(
        self,
        workers: list[Worker],
        threads: ToolThreads,
        watchdog: LoopWatchdog,
        hooks: HookCaller | None = None,
        feed: HookFeed | None = None,
    ) -> None:
        self.workers = workers
        self.threads = threads
        self.watchdog = watchdog
        self.hooks = hooks
        self.feed = feed

    @property
    def task_queues(self) -> list[str]:
        return [w.task_queue for w in self.workers]

    async def __aenter__(self) -> WorkerGroup:
        self.watchdog.start()
        for i, w in enumerate(self.workers):
            try:
                await w.__aenter__()
            except BaseException:
                await self._stop(self.workers[:i])
                raise
        if self.feed is not None:
            self.feed.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop(self.workers)
        for w in self.workers:
            await w.__aexit__(None, None, None)  # shut down already: raises a worker's fatal error, if any

    async def _stop(self, started: list[Worker]) -> None:
        """Stop all at once, so the grace period is spent once, not once per worker. Then drop
        queued tool calls and leave hung tool threads behind (see activities/executor.py)."""
        try:
            feed = self.feed.stop() if self.feed is not None else asyncio.sleep(0)
            await asyncio.gather(feed, *(w.shutdown() for w in started))
        finally:
            self.threads.shutdown()
            if self.hooks is not None:
                self.hooks.shutdown()
            self.watchdog.stop()

    async def run(self) -> None:
        """Run until `shutdown()`, as `Worker.run`; a worker's fatal error stops them all and is raised."""
        self.watchdog.start()
        runs = [asyncio.create_task(w.run()) for w in self.workers]
        if self.feed is not None:
            self.feed.start()
        try:
            await asyncio.wait(runs, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            await self._stop(self.workers)
            await asyncio.gather(*runs, return_exceptions=True)
        for task in runs:
            if not task.cancelled() and (err := task.exception()) is not None:
                raise err

    async def shutdown(self) -> None:
        """Stop workers started by `run()` or `async with`, and wait until they have."""
        await self._stop(self.workers)


class AgentPlugin(SimplePlugin):
    """Durable agents in a worker and a client a team already has, in two lines:

        client = await Client.connect("localhost:7233", plugins=[AgentPlugin(["my_agents"])])
        worker = Worker(client, task_queue="my-queue")  # runs the agents: workflows, model calls, tools

    On the client: the runner's data converter (pydantic; large payloads and encryption when
    configured). On a worker: the AgentRun workflow (outside the sandbox, by its own definition:
    workflows/agent.py; the worker's other workflows keep theirs); the model, tool, resolve, hook
    and compaction activities; the masking (and, given `telemetry`, tracing)
    interceptors; and, while the worker runs, the per-agent workers that routing needs (a run's
    tool calls go only to workers holding its agent's version: `agent_task_queue`), the tool
    threads, the loop watchdog and the lifecycle hooks' feed. `python worker.py` runs the same.
    One plugin serves one worker (its task queue decides the per-agent queues)."""

    def __init__(
        self,
        tools: Sequence[str] | Registry = tuple(DEFAULT_TOOLS),
        *,
        settings: LLMSettings | None = None,
        http: httpx.AsyncClient | None = None,
        tool_threads: int | None = None,
        stall_seconds: float = DEFAULT_STALL_SECONDS,
        run_hooks: Sequence[RunHooks] = (),
        hooks_state_dir: Path | None = None,
        prices: PriceTable | None = None,
        telemetry: Telemetry | None = None,
        agent_worker_options: dict[str, object] | None = None,
    ) -> None:
        self.registry = tools if isinstance(tools, Registry) else Registry.from_modules(list(tools))
        self.settings = settings or LLMSettings.from_env()
        self._http, self._owns_http = http, http is None
        self._options = (tool_threads, stall_seconds, run_hooks, hooks_state_dir, prices, telemetry)
        self._agent_worker_options = agent_worker_options or {}
        self.group: WorkerGroup | None = None  # the per-agent workers and shared parts, once configured
        self.runs_group = True  # False when build_worker starts the group itself
        super().__init__(
            "durable-agent-runner",
            data_converter=lambda _: data_converter(),
            workflows=[AgentRun],
            run_context=self._running,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        if self.group is not None:
            raise ValueError("an AgentPlugin serves one worker: give each worker its own")
        skip_idle_payload_walks()
        client, queue = config["client"], config["task_queue"]
        threads_n, stall, run_hooks, state_dir, prices, telemetry = self._options
        if self._http is None:
            self._http = new_http_client(self.settings)
        settings, http, registry = self.settings, self._http, self.registry
        threads = ToolThreads(executor.size_from_env() if threads_n is None else threads_n)
        cache = ContextCache()
        caller = HookCaller(run_hooks, Redactor.for_settings(settings))
        tools = ToolActivities(registry, cache=cache, settings=settings, threads=threads, hooks=caller)
        model = ModelActivities(client, settings, http, cache, hooks=caller, prices=prices, tools=tools)
        compaction = CompactionActivities(model)
        hooks = HookActivities(registry, client, settings, http, threads)
        masking, _ = redaction_for(settings)
        # Tracing outside masking: spans see masked values.
        interceptors: list[Any] = [*(telemetry.worker_interceptors(settings) if telemetry else []), masking]
        config["interceptors"] = [*interceptors, *config.get("interceptors", [])]
        served: list[Callable[..., Any]] = [
            model.call_model, compaction.compact, tools.call_tool, tools.resolve_agent, hooks.run_hook
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
    *,
    tool_threads: int | None = None,
    stall_seconds: float = DEFAULT_STALL_SECONDS,
    run_hooks: Sequence[RunHooks] = (),
    hooks_state_dir: Path | None = None,
    prices: PriceTable | None = None,
    telemetry: Telemetry | None = None,
    **options: object,
) -> WorkerGroup:
    """The workers, as `python worker.py` runs them; tests build theirs with this too: a Worker
    on `queue` with the AgentPlugin, and the plugin's per-agent workers, started and stopped as one.
    `tool_threads`: default $TOOL_THREADS or 16. `stall_seconds`: how long the event loop may be
    blocked before the watchdog names the culprit. `prices`: default the shipped table (the
    worker reads $LLM_PRICES over it). `options` override WORKER_DEFAULTS for every
    Worker. The caller owns `http` (see `new_http_client`) and closes it after the workers stop.
    Every worker masks the API key in whatever its activities return, heartbeat or raise.
    `run_hooks`: the lifecycle hooks (activities/lifecycle.py); when one has an exactly-once method,
    a hook feed follows `queue`'s runs, checkpointing in `hooks_state_dir` (default
    $HOOKS_STATE_DIR or .state/hooks). `telemetry`: trace runs (activities/telemetry.py)."""
    extra = options.pop("interceptors", None)
    plugin = AgentPlugin(
        registry,
        settings=settings,
        http=http,
        tool_threads=tool_threads,
        stall_seconds=stall_seconds,
        run_hooks=run_hooks,
        hooks_state_dir=hooks_state_dir,
        prices=prices,
        telemetry=telemetry,
        agent_worker_options=dict(options),
    )
    plugin.runs_group = False  # the group below starts every worker itself, at once
    base = {**WORKER_DEFAULTS, **options, "interceptors": list(extra) if isinstance(extra, list | tuple) else []}
    worker = Worker(client, task_queue=queue, plugins=[plugin], **base)  # type: ignore[arg-type]  # knobs as given
    assert plugin.group is not None
    group = plugin.group
    return WorkerGroup([worker, *group.workers], group.threads, group.watchdog, hooks=group.hooks, feed=group.feed)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="worker.py", description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE",
        help="module name or .py file defining tools and agents (repeatable; default: the demo)",
    )
    parser.add_argument(
        "--task-queue", default=None, help="task queue to poll (default: $AGENT_TASK_QUEUE or agent-runner)"
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


def startup_error(message: str) -> None:
    """One line on standard error for a worker that cannot start, with any key it may echo (a
    user module's error, a malformed URL with credentials in it) masked: settings that failed to
    parse never built the log filter, so the keys come straight from the environment."""
    keys = (os.environ.get(name) for name in (*API_KEY_VARIABLES, "TEMPORAL_API_KEY"))
    print(f"worker.py: error: {Redactor(*keys).text(message)}", file=sys.stderr)


async def missing_namespace(client: Client) -> str | None:
    """Why the worker cannot poll at all, checked before it tries: its namespace does not exist.
    (Found later, by the polls, it is a failing Worker that cancels the process's main task.)"""
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace), timeout=timedelta(seconds=10)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return (
                f"namespace {client.namespace!r} does not exist on {address()}: set TEMPORAL_NAMESPACE "
                "(or the profile's namespace) to one that does, or create it: temporal operator namespace create"
            )
    return None  # anything else (not allowed to describe it, a slow server): the polls will tell


async def serve(args: argparse.Namespace) -> int:
    try:
        registry = Registry.from_modules(args.tools or DEFAULT_TOOLS)
        hooks = hooks_in_modules(args.tools or DEFAULT_TOOLS)
        settings = LLMSettings.of(args.settings)
        prices = PriceTable.from_env()
        threads = executor.size_from_env()
        tracing = Telemetry.from_env("agent-worker")  # None without OTEL_EXPORTER_OTLP_ENDPOINT
    except Exception as err:  # a user's module: any import error is a usage error here
        startup_error(str(err))
        return 2
    _, log_filter = redaction_for(settings)
    for handler in logging.getLogger().handlers:  # on handlers: a logger's filters miss propagated records
        handler.addFilter(log_filter)
    try:
        client = await connect()
    except PayloadStoreError as err:  # PAYLOAD_STORE* settings: fixable by the user
        startup_error(str(err))
        return 2
    except Exception as err:
        startup_error(f"cannot reach Temporal at {address()} ({err})")
        return 1
    missing = await missing_namespace(client)
    if missing:
        startup_error(missing)
        return 2
    try:
        added = await ensure_search_attributes(client)
        if added:
            log.info("registered search attributes: %s", ", ".join(added))
    except Exception as err:  # a server that forbids it: runs still work, filters won't
        log.warning("could not check search attributes (%s); register them as the README says", err)

    queue = args.task_queue or task_queue()
    http = new_http_client(settings)
    worker = build_worker(
        client, queue, registry, settings, http, tool_threads=threads, run_hooks=hooks, prices=prices, telemetry=tracing
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "worker polling %s (and %d per-agent queues) on %s/%s; agents: %s; model server: %s; tool threads: %d; "
        "event loop: %s",
        queue, len(worker.workers) - 1, address(), namespace(), ", ".join(registry.agent_names()),
        settings.base_url, threads, type(loop).__module__.split(".")[0],
    )  # fmt: skip
    if hooks:
        names = ", ".join(type(h).__name__ for h in hooks)
        where = worker.feed.checkpoints.root if worker.feed else None
        feed = f"exactly-once ones fed from the runs' events (state in {where})" if where else "no exactly-once ones"
        log.info("lifecycle hooks: %s; %s", names, feed)
    if tracing:
        log.info("OpenTelemetry: exporting traces over OTLP (activities/telemetry.py)")
    try:
        async with http, worker:
            await stop.wait()
            log.info("stopping: finishing in-flight tasks")
    except asyncio.CancelledError:  # a Worker cancels us when it cannot go on (its polls refused)
        if stop.is_set():
            raise
        current = asyncio.current_task()
        while current is not None and current.uncancel():
            pass
        startup_error(f"the worker stopped: Temporal at {address()} refused its polls (namespace {namespace()!r})")
        return 1
    if tracing:
        tracing.shutdown()  # sends the spans still batched
    log.info("stopped")
    return 0


EVENT_LOOPS = ("uvloop", "asyncio")  # WORKER_EVENT_LOOP's values; the first is the default


def event_loop(env: Mapping[str, str] | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """The worker's event loop, by $WORKER_EVENT_LOOP: uvloop's by default, which costs about a
    tenth less worker CPU a turn than asyncio's (README: "The benchmark"); asyncio's when asked
    for, or by default where uvloop is not installed (Windows, which it does not support)."""
    raw = (os.environ if env is None else env).get("WORKER_EVENT_LOOP", "").strip().lower()
    if raw not in ("", *EVENT_LOOPS):
        raise ValueError(f"WORKER_EVENT_LOOP must be {' or '.join(EVENT_LOOPS)}, not {raw!r}")
    if raw == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if raw:
            raise ValueError("WORKER_EVENT_LOOP=uvloop, but uvloop is not installed: pip install uvloop") from None
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with log_to_stderr(args.log_level):  # written by a thread: an unread stderr never stalls the worker
        logging.getLogger("httpx").setLevel(logging.WARNING)
        try:
            args.settings = WorkerSettings.load()  # every variable checked before anything starts
            loop = event_loop()
        except (SettingsError, ValueError) as err:
            startup_error(str(err))
            return 2
        with asyncio.Runner(loop_factory=loop) as runner:
            return runner.run(serve(args))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the Temporal SDK's native threads can abort it (sdk-python#300).
    os._exit(code)
