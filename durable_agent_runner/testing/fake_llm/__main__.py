"""`python -m durable_agent_runner.testing.fake_llm`: run the fake OpenAI-compatible server until
SIGINT or SIGTERM, answering with the default scenarios (durable_agent_runner/testing/scenarios/)
or, with `--model module:attr`, with your own ScriptedModel or FunctionModel (docs/testing.md)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from durable_agent_runner.testing.models import OfflineModel
from durable_agent_runner.testing.scenarios.default import FakeLLMServer

PROG = "python -m durable_agent_runner.testing.fake_llm"
IMPORT_SECONDS = 30.0  # the most --model's module may take to import


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def load_model(reference: str) -> OfflineModel:
    """The model `module:attr` names (an OfflineModel, or a function that returns one); ValueError
    with one line saying what is wrong."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr or len(reference) > 500:
        raise ValueError(f"--model {reference[:80]!r}: expected module:attr, e.g. my_agents:MODEL")
    value: object = _import(reference, module_name)
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ValueError(f"--model {reference}: {module_name} has no attribute {attr!r}")
        value = getattr(value, part)
    if callable(value) and not isinstance(value, OfflineModel):
        try:
            value = value()
        except Exception as exc:
            raise ValueError(f"--model {reference}: calling it failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, OfflineModel):
        raise ValueError(
            f"--model {reference}: not a model but {type(value).__name__}: "
            "give a ScriptedModel or FunctionModel of durable_agent_runner.testing (or a function returning one)"
        )
    return value


def _import(reference: str, module_name: str) -> object:
    """The module, imported in a thread so that an import that never ends is bounded."""
    found: list[object] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            found.append(importlib.import_module(module_name))
        except BaseException as exc:  # its own errors too: a user's module may fail in any way
            failed.append(exc)

    thread = threading.Thread(target=run, name="fake_llm-import", daemon=True)
    thread.start()
    thread.join(IMPORT_SECONDS)
    if failed:
        exc = failed[0]
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        raise ValueError(f"--model {reference}: cannot import {module_name}: {why}")
    if not found:
        raise ValueError(f"--model {reference}: importing {module_name} did not end in {IMPORT_SECONDS:.0f} s")
    return found[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fake OpenAI-compatible model server (a test double for tests and the offline demo).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8400, help="port to bind, 0 for any free one (default 8400)")
    parser.add_argument("--latency-ms", type=_non_negative, default=0.0, help="added to every model reply")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument(
        "--model",
        metavar="MODULE:ATTR",
        help="answer every model call with this ScriptedModel or FunctionModel (durable_agent_runner.testing) "
        "instead of the default scenarios, e.g. my_agents:MODEL",
    )
    args = parser.parse_args(argv)
    if args.model is not None:
        try:
            model = load_model(args.model)
        except ValueError as exc:
            print(f"fake_llm: {exc}", file=sys.stderr)
            return 2
        try:
            model.check()
        except ValueError as exc:
            print(f"fake_llm: --model {args.model}: {exc}".splitlines()[0], file=sys.stderr)
            return 2
        return asyncio.run(_serve_model(model, args))

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server = FakeLLMServer(args.host, args.port, latency_ms=args.latency_ms, verbose=args.verbose)
    try:
        server.start()
    except OSError as exc:
        print(f"fake_llm: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"fake_llm listening on {server.base_url}", flush=True)
    try:
        while not stop.wait(0.5):  # a timed wait keeps the main thread responsive to signals
            pass
    finally:
        server.stop()
    return 0


async def _serve_model(model: OfflineModel, args: argparse.Namespace) -> int:
    """`model` on its server until SIGINT or SIGTERM (its async functions run on this loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with model.serve(host=args.host, port=args.port) as server:
            server.fake.set_latency(args.latency_ms)
            known = ", ".join(model.index.names()) or "none named"
            print(f"fake_llm listening on {server.base_url} ({type(model).__name__} {args.model}; agents: {known})")
            sys.stdout.flush()
            await stop.wait()
    except OSError as exc:
        print(f"fake_llm: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
