"""Run a worker: `python worker.py [--tools MODULE_OR_FILE ...] [--task-queue Q]`.

Connects to Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE), loads the agents and tools from the
given modules (default: the demo), registers the workflow and activities, and stops cleanly on
SIGINT or SIGTERM. Model settings come from LLM_BASE_URL, LLM_MODEL and LLM_API_KEY.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

import httpx
from temporalio.client import Client
from temporalio.worker import Worker

from activities import Registry
from activities.connection import address, connect, ensure_search_attributes, namespace, task_queue
from activities.context_cache import ContextCache
from activities.model import ModelActivities, new_http_client
from activities.settings import LLMSettings
from activities.tool_activities import ToolActivities
from workflows import AgentRun

log = logging.getLogger("worker")
DEFAULT_TOOLS = ["examples.demo_agent"]
# build_worker's own Worker settings; `**options` overrides them.
WORKER_DEFAULTS: dict[str, object] = {
    "graceful_shutdown_timeout": timedelta(seconds=10),
    # Streamed text reaches watchers through heartbeat details: send them promptly.
    "max_heartbeat_throttle_interval": timedelta(milliseconds=200),
}


def build_worker(
    client: Client,
    queue: str,
    registry: Registry,
    settings: LLMSettings,
    http: httpx.AsyncClient,
    **options: object,
) -> Worker:
    """The worker, as `python worker.py` runs it; tests build theirs with this too.
    The caller owns `http` (see `new_http_client`) and closes it after the worker stops."""
    cache = ContextCache()
    model = ModelActivities(client, settings, http, cache)
    tools = ToolActivities(registry, default_model=settings.model, cache=cache)
    return Worker(
        client,
        task_queue=queue,
        workflows=[AgentRun],
        activities=[model.call_model, tools.call_tool, tools.resolve_agent],
        **{**WORKER_DEFAULTS, **options},  # type: ignore[arg-type]  # Worker's tuning knobs, passed through as given
    )


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


async def serve(args: argparse.Namespace) -> int:
    try:
        registry = Registry.from_modules(args.tools or DEFAULT_TOOLS)
        settings = LLMSettings.from_env()
    except Exception as err:  # a user's module: any import error is a usage error here
        print(f"worker.py: error: {err}", file=sys.stderr)
        return 2
    try:
        client = await connect()
    except Exception as err:
        print(f"worker.py: error: cannot reach Temporal at {address()} ({err})", file=sys.stderr)
        return 1
    try:
        added = await ensure_search_attributes(client)
        if added:
            log.info("registered search attributes: %s", ", ".join(added))
    except Exception as err:  # a server that forbids it: runs still work, filters won't
        log.warning("could not check search attributes (%s); register them as the README says", err)

    queue = args.task_queue or task_queue()
    http = new_http_client(settings)
    worker = build_worker(client, queue, registry, settings, http)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "worker polling %s on %s/%s; agents: %s; model server: %s",
        queue, address(), namespace(), ", ".join(registry.agent_names()), settings.base_url,
    )  # fmt: skip
    async with http, worker:
        await stop.wait()
        log.info("stopping: finishing in-flight tasks")
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return asyncio.run(serve(args))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the Temporal SDK's native threads can abort it (sdk-python#300).
    os._exit(code)
