"""A bench worker in its own process: `python -m bench.worker_proc CONFIG_JSON`.

The config names the dev server, task queue, model server, variant ("product", "variant",
"rival": bench.rival, or "bare": bench.bare), tuning knobs and the pipe (`ready_fd`) it writes
READY to once polling, with the name of the event loop it runs on.
Stops on SIGTERM/SIGINT or when its stdin closes, so it never outlives the bench, however the
bench ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

from bench import idle_walks, timeline
from bench.workers import MODULES, make_worker
from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.env import WorkerSettings
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.worker.log_relay import log_to_stderr
from worker import event_loop


def ready(config: dict[str, object]) -> None:
    """READY and the event loop this worker runs on (its class's module: "uvloop", "asyncio...")."""
    fd = config["ready_fd"]
    assert isinstance(fd, int)
    os.write(fd, f"READY {type(asyncio.get_running_loop()).__module__}\n".encode())
    os.close(fd)


async def serve(config: dict[str, object]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stdin = sys.stdin.fileno()

    def on_stdin() -> None:
        if not os.read(stdin, 4096):  # EOF: the bench is gone or done with us
            loop.remove_reader(stdin)
            stop.set()

    loop.add_reader(stdin, on_stdin)
    if config["variant"] == "rival":  # Temporal's OpenAI Agents integration (the bench extra)
        from bench.rival import rival_worker

        what_if = config.get("options") or {}
        assert isinstance(what_if, dict)
        async with await rival_worker(str(config["target"]), str(config["queue"]), str(config["base_url"]), what_if):
            ready(config)
            await stop.wait()
        return
    if config["variant"] == "bare":  # Temporal's own floor (bench.bare)
        from bench.bare import bare_worker

        settings = LLMSettings(base_url=str(config["base_url"]), model="demo")
        target, queue = str(config["target"]), str(config["queue"])
        with ThreadPoolExecutor(max_workers=16, thread_name_prefix="tool") as tools:
            async with new_http_client(settings) as http:
                async with await bare_worker(target, queue, settings.base_url, http, tools):
                    ready(config)
                    await stop.wait()
        return
    client = await connect(str(config["target"]), "default")
    settings = LLMSettings(base_url=str(config["base_url"]), model="demo", stream=bool(config.get("stream")))
    registry = Registry.from_modules(MODULES)
    spec = config.get("options") or {}
    assert isinstance(spec, dict)
    if stamps := spec.pop(timeline.OPTION, None):  # BENCH-ONLY: section 6's stamps
        timeline.install(str(stamps))
    if spec.pop(idle_walks.OPTION, False):  # BENCH-ONLY: the per-turn section's walks row
        idle_walks.install()
    async with new_http_client(settings) as http:
        worker = make_worker(str(config["variant"]), client, str(config["queue"]), registry, settings, http, spec)
        async with worker:
            ready(config)
            await stop.wait()


def main() -> None:
    with (
        log_to_stderr(logging.WARNING),  # as `python worker.py` logs
        asyncio.Runner(
            loop_factory=event_loop(WorkerSettings.load().event_loop)
        ) as runner,  # the loop `python worker.py` runs on
    ):
        runner.run(serve(json.loads(sys.argv[1])))


if __name__ == "__main__":
    main()
