"""The worker's event loop (worker.event_loop, $WORKER_EVENT_LOOP): uvloop's by default,
asyncio's when asked for, and a clear refusal of anything else."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import uvloop

from durable_agent_runner.config.env import SettingsError, WorkerSettings
from worker import event_loop

ROOT = Path(__file__).resolve().parent.parent


def test_uvloop_by_default_and_asyncio_when_asked() -> None:
    assert event_loop(chosen({})) is uvloop.new_event_loop
    assert event_loop(chosen({"WORKER_EVENT_LOOP": " UVLOOP "})) is uvloop.new_event_loop
    assert event_loop(chosen({"WORKER_EVENT_LOOP": "asyncio"})) is asyncio.new_event_loop
    loop = event_loop(chosen({}))()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def chosen(env: dict[str, str]) -> str | None:
    """WORKER_EVENT_LOOP as the worker's settings read it."""
    settings: WorkerSettings = WorkerSettings.load(env)
    return settings.event_loop


@pytest.mark.parametrize("bad", ["tokio", "1", "uv loop"])
def test_another_loop_is_refused(bad: str) -> None:
    with pytest.raises(SettingsError, match="WORKER_EVENT_LOOP must be one of uvloop or asyncio"):
        chosen({"WORKER_EVENT_LOOP": bad})


def test_a_bad_event_loop_stops_the_worker_at_once() -> None:
    env = {**os.environ, "WORKER_EVENT_LOOP": "tokio", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "worker.py: error: WORKER_EVENT_LOOP must be one of uvloop or asyncio, not 'tokio'"
