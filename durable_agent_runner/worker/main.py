"""Run a worker: `python worker.py [--tools MODULE_OR_FILE ...] [--task-queue Q]` in the repo, or
`durable-agent-runner-worker ...` / `python -m durable_agent_runner.worker ...` where the package is
installed.

Connects to Temporal as the `temporal` CLI does (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY, TEMPORAL_TLS_*, or a profile: durable_agent_runner/config/connection.py), loads the agents and
tools from the given modules (default: the demo), registers the workflow and activities, and stops
cleanly on SIGINT or SIGTERM. With PAYLOAD_CODEC_KEYS every payload is encrypted
(durable_agent_runner/payloads/codec.py). Model settings come from LLM_BASE_URL, LLM_MODEL and LLM_API_KEY; sync
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
hooks (durable_agent_runner/agents/lifecycle.py): the at-least-once ones run inside the activities, the
exactly-once ones from the hook feed (durable_agent_runner/worker/hook_feed.py), which this process runs beside
its workers, with its checkpoints in HOOKS_STATE_DIR (default .state/hooks).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from durable_agent_runner import Registry, __version__
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.activities.prices import PriceTable
from durable_agent_runner.agents.lifecycle import hooks_in_modules
from durable_agent_runner.client.script import exit_now
from durable_agent_runner.config.connection import address, connect, ensure_search_attributes, namespace, task_queue
from durable_agent_runner.config.env import SettingsError, WorkerSettings, secret_values
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.config.values import queue_flag
from durable_agent_runner.payloads.store import PayloadStoreError
from durable_agent_runner.redact import Redactor, redaction_for
from durable_agent_runner.telemetry import Telemetry
from durable_agent_runner.worker.log_relay import log_to_stderr
from durable_agent_runner.worker.plugin import DEFAULT_TOOLS, build_worker

log = logging.getLogger("worker")
PROG = "worker.py"  # how the command was called, in its usage and errors (set by `run`)
SLOW_IMPORT = 10.0  # seconds of loading the modules before the worker says it is still at it


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE",
        help="module name or .py file defining tools and agents (repeatable; default: the demo)",
    )
    parser.add_argument(
        "--task-queue",
        type=queue_flag,
        default=None,
        help="task queue to poll (default: $AGENT_TASK_QUEUE or agent-runner)",
    )
    levels = ["DEBUG", "INFO", "WARNING", "ERROR"]  # any case: --log-level debug
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=levels, help="what the log shows (default: INFO)"
    )
    parser.add_argument("--version", action="version", version=f"durable-agent-runner {__version__}")
    return parser.parse_args(argv)


def startup_error(message: str) -> None:
    """One line on standard error for a worker that cannot start, with any key it may echo (a
    user module's error, a malformed URL with credentials in it) masked: settings that failed to
    parse never built the log filter, so the keys come straight from the environment."""
    print(f"{PROG}: error: {Redactor(*secret_values()).text(message)}", file=sys.stderr)


def load(args: argparse.Namespace) -> None:
    """The user's modules and what the settings name, before any event loop runs: a module whose
    import hangs (a database it waits for) is said after SLOW_IMPORT seconds, and Ctrl-C stops it."""
    modules = args.tools or DEFAULT_TOOLS
    slow = threading.Timer(SLOW_IMPORT, lambda: log.warning(
        "still loading %s after %.0f s: a module's top-level code has not returned (Ctrl-C stops the worker)",
        ", ".join(modules), SLOW_IMPORT,
    ))  # fmt: skip
    slow.daemon = True
    slow.start()
    try:
        args.registry = Registry.from_modules(modules)
        args.hooks = hooks_in_modules(modules)
    finally:
        slow.cancel()
    args.llm = LLMSettings.of(args.settings)
    args.prices = PriceTable.from_path(args.settings.llm_prices)  # the settings, read once in main()
    args.tracing = Telemetry.from_env("agent-worker")  # None without OTEL_EXPORTER_OTLP_ENDPOINT


async def serve(args: argparse.Namespace) -> int:
    registry, hooks, settings, prices, tracing = args.registry, args.hooks, args.llm, args.prices, args.tracing
    threads = args.settings.tool_threads
    _, log_filter = redaction_for(settings)
    for handler in logging.getLogger().handlers:  # on handlers: a logger's filters miss propagated records
        handler.addFilter(log_filter)
    try:
        client = await connect()
    except PayloadStoreError as err:  # PAYLOAD_STORE* settings, a namespace that does not exist: fixable by the user
        startup_error(str(err))
        return 2
    except ConnectionError as err:  # names the address and what to set (config/connection.py)
        startup_error(str(err))
        return 1
    except Exception as err:
        startup_error(f"cannot reach Temporal at {address()} ({err})")
        return 1
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
        "event loop: %s; durable-agent-runner %s",
        queue, len(worker.workers) - 1, address(), namespace(), ", ".join(registry.agent_names()) or "none",
        settings.base_url, threads, type(loop).__module__.split(".")[0], __version__,
    )  # fmt: skip
    if not registry.agent_names():  # a worker of the runs' own steps alone may be meant; a module without agents not
        log.warning(
            "the modules given (%s) define no Agent: this worker takes the runs' own steps, but no agent's "
            "model calls, tools or approval checks",
            ", ".join(args.tools or DEFAULT_TOOLS),
        )
    keyless = settings.keyless(m for a in registry.agents() for m in [a.model, *a.fallback_models])
    if keyless:
        log.warning(keyless)
    said = settings.notify.said({a.name: a.notify for a in registry.agents()})
    log.info(said[0])
    for line in said[1:]:
        log.warning(line)
    if hooks:
        names = ", ".join(type(h).__name__ for h in hooks)
        where = worker.feed.checkpoints.root if worker.feed else None
        feed = f"exactly-once ones fed from the runs' events (state in {where})" if where else "no exactly-once ones"
        log.info("lifecycle hooks: %s; %s", names, feed)
    if tracing:
        log.info("OpenTelemetry: exporting traces over OTLP (durable_agent_runner/telemetry/)")
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


def event_loop(choice: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """The worker's event loop, by $WORKER_EVENT_LOOP (`WorkerSettings.event_loop`, checked
    there): uvloop's by default, which costs about a tenth less worker CPU a turn than asyncio's
    (docs/benchmark.md); asyncio's when asked for, or by default where uvloop is not installed
    (Windows, which it does not support)."""
    raw = choice or ""
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
            loop = event_loop(args.settings.event_loop)
        except (SettingsError, ValueError) as err:
            startup_error(str(err))
            return 2
        try:
            load(args)
        except KeyboardInterrupt:
            print(f"{PROG}: stopped while loading {', '.join(args.tools or DEFAULT_TOOLS)}", file=sys.stderr)
            return 130
        except Exception as err:  # a user's module: any import error is a usage error here
            startup_error(str(err))
            return 2
        with asyncio.Runner(loop_factory=loop) as runner:
            try:
                return runner.run(serve(args))
            except KeyboardInterrupt:  # Ctrl-C before the worker's own handler (connecting to Temporal)
                print(f"{PROG}: stopped while starting (Temporal at {address()})", file=sys.stderr)
                return 130


def run(prog: str = "worker.py", argv: Sequence[str] | None = None) -> NoReturn:
    """The worker as a process runs it: main's exit code, and no interpreter teardown."""
    global PROG
    PROG = prog
    exit_now(main(argv))  # no teardown: the Temporal SDK's native threads can abort it (sdk-python#300)


def script() -> NoReturn:
    """The `durable-agent-runner-worker` console script."""
    run("durable-agent-runner-worker")


if __name__ == "__main__":
    run("python -m durable_agent_runner.worker.main")
