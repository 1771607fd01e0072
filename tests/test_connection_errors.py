"""What every face says when it cannot use Temporal: the worker, client.py and the Python client
share one connect helper (durable_agent_runner/config/connection.py), so each says the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable_agent_runner.client as dar
from durable_agent_runner.config.connection import NamespaceNotFound
from tests.helpers import closed_address

ROOT = Path(__file__).resolve().parent.parent
OURS = ("LLM_", "OPENAI_", "TOOL_", "WORKER_", "PAYLOAD_", "AGENT_", "TEMPORAL_", "HOOKS_", "OTEL_")


def run(*command: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(OURS)}
    return subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=clean | env, capture_output=True, text=True, timeout=60
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.strip().splitlines()
    return line


def test_a_namespace_that_does_not_exist_is_named_not_a_missing_run(temporal_server: Any) -> None:
    """Before: `client.py status RUN` said "no run with id 'RUN'"."""
    done = run("client.py", "status", "some-run", TEMPORAL_ADDRESS=temporal_server.target, TEMPORAL_NAMESPACE="nope")
    assert done.returncode == 2, done
    line = one_line(done.stderr)
    assert "namespace 'nope' does not exist on" in line and "set TEMPORAL_NAMESPACE" in line, line
    assert "no run with id" not in line


async def test_the_python_client_names_the_missing_namespace(temporal_server: Any) -> None:
    with pytest.raises(NamespaceNotFound, match=r"namespace 'nope' does not exist on .*TEMPORAL_NAMESPACE"):
        await dar.connect(target=temporal_server.target, namespace="nope")
    assert (await dar.connect(target=temporal_server.target, namespace="default")).temporal.namespace == "default"


@pytest.mark.parametrize("command", [["client.py", "list"], ["worker.py"]])
def test_a_refused_connection_names_the_address_and_what_to_set(command: list[str]) -> None:
    """Before: a raw transport error, several lines of the core's Rust debug text, no hint."""
    with closed_address() as target:
        done = run(*command, TEMPORAL_ADDRESS=target)
    assert done.returncode == 1, done
    line = one_line(done.stderr)
    assert f"cannot reach Temporal at {target}: nothing listens there (connection refused)" in line, line
    assert "set TEMPORAL_ADDRESS" in line and "tonic" not in line and "ConnectError" not in line, line


async def test_the_python_client_says_the_same() -> None:
    with closed_address() as target, pytest.raises(ConnectionError) as caught:
        await dar.connect(target=target)
    assert str(caught.value).startswith(f"cannot reach Temporal at {target}: nothing listens there")
    assert "set TEMPORAL_ADDRESS" in str(caught.value)
