"""Streaming is the default: `python worker.py` with no LLM_STREAM streams model replies, so
`client.py run --follow` shows text as it is written; LLM_STREAM=0 (false, no, off) turns it off.
Both processes run as a user runs them, against the session's dev server and fake_llm."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from durable_agent_runner.config.llm import LLMSettings
from tests.helpers import script

ROOT = Path(__file__).resolve().parent.parent
STORY = (
    "Tokyo is sunny and mild today at twenty two degrees, while Paris sits under low cloud at fifteen; "
    "if you are choosing where to walk this afternoon, Tokyo is the warmer and brighter choice by far."
)
Worker = Callable[..., Awaitable[subprocess.Popen[bytes]]]


@pytest.fixture
def user_env(temporal_server, llm, task_queue) -> dict[str, str]:
    """The environment of a user who set where Temporal and the model are, and nothing about streaming."""
    env = {k: v for k, v in os.environ.items() if k != "LLM_STREAM"}
    return env | {
        "TEMPORAL_ADDRESS": temporal_server.target,
        "TEMPORAL_NAMESPACE": "default",
        "AGENT_TASK_QUEUE": task_queue,
        "LLM_BASE_URL": llm.base_url,
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
async def worker(user_env: dict[str, str], tmp_path: Path) -> AsyncIterator[Worker]:
    """`await worker(LLM_STREAM="0")` starts `python worker.py` (no arguments) and waits until it polls."""
    procs: list[subprocess.Popen[bytes]] = []

    async def start(**extra: str) -> subprocess.Popen[bytes]:
        log = tmp_path / f"worker-{len(procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "worker.py"], cwd=ROOT, env=user_env | extra, stdout=out, stderr=subprocess.STDOUT
            )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while b"worker polling" not in log.read_bytes():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"worker did not start:\n{log.read_text()}"
            await asyncio.sleep(0.1)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def follow(env: dict[str, str], model: str) -> list[dict[str, Any]]:
    """`python client.py run --follow --json`: the lines it printed, in order."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "client.py", "run", "--follow", "--json", "--model", model, "tell me about the weather",
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and "Traceback" not in err.decode(), f"{out.decode()}\n{err.decode()}"
    return [json.loads(line) for line in out.decode().splitlines()]


def slow_story(llm: Any) -> str:
    """A reply that streams in 8-character pieces, 100 ms apart: about 2.5 s from first to last."""
    llm.set_latency(0, stream_event_ms=100)
    return script(llm, {"content": STORY, "delta_chars": 8})


def model_requests(llm: Any, model: str) -> list[dict[str, Any]]:
    return [r["body"] for r in llm.requests() if (r.get("body") or {}).get("model") == model]


async def test_a_worker_started_without_llm_stream_streams_replies_to_the_follower(worker, user_env, llm):
    model = slow_story(llm)
    await worker()
    lines = await follow(user_env, model)
    deltas = [i for i, line in enumerate(lines) if line["type"] == "delta"]
    finished = next(i for i, line in enumerate(lines) if line.get("kind") == "model_finished")
    final = next(i for i, line in enumerate(lines) if line.get("kind") == "final")
    assert len(deltas) >= 3, f"the text should arrive in several pieces while the call runs: {lines}"
    assert max(deltas) < finished < final  # shown while the reply was being written
    shown = "".join(lines[i]["text"] for i in deltas)
    assert len(shown) > len(STORY) // 2 and STORY.startswith(shown)
    assert lines[final]["text"] == STORY and lines[-1]["type"] == "end" and lines[-1]["outcome"] == "final"
    assert [r.get("stream") for r in model_requests(llm, model)] == [True]  # one call, and over SSE


@pytest.mark.parametrize("off", ["0", "off"])
async def test_llm_stream_0_turns_streaming_off(worker, user_env, llm, off: str):
    model = slow_story(llm)
    await worker(LLM_STREAM=off)
    lines = await follow(user_env, model)
    assert [r.get("stream", False) for r in model_requests(llm, model)] == [False]
    assert not [line for line in lines if line["type"] == "delta"], lines
    final = next(line for line in lines if line.get("kind") == "final")
    assert final["text"] == STORY and lines[-1]["type"] == "end" and lines[-1]["outcome"] == "final"


def test_llm_stream_reads_yes_and_no_and_defaults_to_yes():
    assert LLMSettings().stream and LLMSettings.from_env({}).stream and LLMSettings.from_env({"LLM_STREAM": ""}).stream
    for on in ("1", "true", "yes", "on", "TRUE", " Yes "):
        assert LLMSettings.from_env({"LLM_STREAM": on}).stream, on
    for off in ("0", "false", "no", "off", "False", " OFF "):
        assert not LLMSettings.from_env({"LLM_STREAM": off}).stream, off


def test_an_unknown_llm_stream_stops_the_worker_with_one_line(user_env: dict[str, str]):
    env = user_env | {"LLM_STREAM": "maybe", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "worker.py: error: LLM_STREAM must be 1, true, yes or on, or 0, false, no or off, not 'maybe'"
    )
