"""`python -m fake_llm`: run the fake OpenAI-compatible server until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from durable_agent_runner.testing.fake_llm.server import FakeLLMServer


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durable_agent_runner.testing.fake_llm",
        description="Fake OpenAI-compatible model server (a test double for tests and the offline demo).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8400, help="port to bind, 0 for any free one (default 8400)")
    parser.add_argument("--latency-ms", type=_non_negative, default=0.0, help="added to every model reply")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
