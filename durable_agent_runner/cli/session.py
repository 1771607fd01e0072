"""The client side of session runs, shared by `client.py chat`, `send`, `end` and `result --message`.

A session is one `AgentRun` with `session=True`. A message and the end are updates, so a run that
has ended, or is not a session, refuses them at once with a reason; each message's answer is
read back with the `session.exchange` query, from whichever execution of the run holds it. The
mechanism lives in the Python client (durable_agent_runner/client/updates.py); this module adds
the CLI's `--wait` flag and keeps the names the CLI's commands use.
"""

from __future__ import annotations

import argparse

from durable_agent_runner.cli.args import number
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import session_id
from durable_agent_runner.client.errors import AgentRunError, NoWorkerAnswered
from durable_agent_runner.client.follow import DEADLINE
from durable_agent_runner.client.updates import (
    DEFAULT_WAIT,
    GAP_PAUSE,
    LIVE,
    NOT_TAKEN,
    PASSING,
    POLL,
    READ_TIMEOUT,
    end_session,
    get_exchange,
    send_message,
    update,
    wait_answer,
)

SessionError = AgentRunError  # one clear line, exit code 2: the run has ended, is not a session, does not exist
NoWorker = NoWorkerAnswered  # no worker took an update within the bound the user gave: exit code 3
NO_WORKER = 3  # client.py's exit code when no worker took an update in time

__all__ = [
    "DEADLINE",
    "DEFAULT_WAIT",
    "GAP_PAUSE",
    "LIVE",
    "NOT_TAKEN",
    "NO_WORKER",
    "PASSING",
    "POLL",
    "READ_TIMEOUT",
    "NoWorker",
    "SessionError",
    "add_read_wait",
    "add_wait",
    "end_session",
    "get_exchange",
    "send_message",
    "session_id",
    "update",
    "wait_answer",
    "wait_seconds",
]


def add_wait(cmd: argparse.ArgumentParser, *, answer_flag: bool = False) -> None:
    """`--wait SECONDS` (also `--wait-worker`; `send`, whose --wait waits for the answer, has only that)."""
    names = ("--wait-worker",) if answer_flag else ("--wait", "--wait-worker")
    cmd.add_argument(
        *names,
        dest="worker_wait",
        type=wait_seconds,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help=f"give up when no worker takes it within this long: one line, exit code {NO_WORKER} "
        "(default: %(default)g). Not taken, it may still be applied once by a worker that starts soon, "
        "or never; sending it again is safe",
    )


def add_read_wait(cmd: argparse.ArgumentParser) -> None:
    """`--wait SECONDS` for a command that only reads a run by query (`inspect`, `diff`)."""
    cmd.add_argument(
        "--wait",
        dest="worker_wait",
        type=wait_seconds,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="give up when no worker answers within this long: one line, exit code 1 (default: %(default)g)",
    )


def wait_seconds(text: str) -> float:
    """`--wait SECONDS`, bounded as the client bounds every wait (checks.seconds)."""
    try:
        return checks.seconds(number(text))
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 3600], not {text[:40]!r}") from None
