"""Streaming latency: from the model server sending a piece of text to a watcher printing it.

fake_llm streams a long reply in paced SSE frames and records when each frame left; a watcher
(`durable_agent_runner.cli.watch.watch`, as `client.py watch` runs it) prints into a stream that timestamps every
write. For each piece of text, latency = first print that covers it − its frame's send time.

Text reaches a watcher by three hops, each with its own clock: the model activity heartbeats its
progress every PROGRESS_EVERY (0.05 s) while text streams in; the SDK sends a run's heartbeats to
the server at most every `max_heartbeat_throttle_interval` (worker.py: 0.1 s); the watcher
reads the streamed text every `durable_agent_runner.client.follow.STREAM_POLL` (0.05 s; its events every `POLL`, 0.1 s).
The bench-only settings below shorten one hop each, to show which of them the latency is made
of; the product is measured as shipped in the first row.
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.knobs import Spec, overriding
from bench.stack import Stack
from durable_agent_runner.cli.watch import watch
from durable_agent_runner.client import follow as watching
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.testing.fake_llm.wire import pieces, text_pieces
from tests.helpers import start

TEXT = " ".join(f"word{i}" for i in range(240))  # ~1.9 KB: ~120 pieces of ~16 characters
FRAME_MS = 25.0
TARGET_P50_MS = 200.0


@dataclass(frozen=True)
class Setting:
    label: str
    worker: Spec = field(default_factory=dict)  # worker options (bench.knobs specs)
    poll_s: float | None = None  # the watcher's streamed-text reads; None: client.follow.STREAM_POLL as shipped


THROTTLE = "max_heartbeat_throttle_interval"
BEAT = "patch:activities.model.PROGRESS_EVERY"  # bench-only: the model activity's progress beat
SETTINGS = [
    Setting("as shipped (beat 50 ms, heartbeat throttle 100 ms, watcher reads 50 ms)"),
    Setting("BENCH-ONLY watcher reads 20 ms", poll_s=0.02),
    Setting("BENCH-ONLY heartbeat throttle 50 ms", {THROTTLE: 0.05}),
    Setting("BENCH-ONLY progress beat 20 ms", {BEAT: 0.02}),
    Setting("BENCH-ONLY all three", {THROTTLE: 0.05, BEAT: 0.02}, poll_s=0.02),
]


class Stamped(io.StringIO):
    """A text stream that remembers when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, s: str) -> int:
        now = time.time()
        for line in s.splitlines():
            if line.strip():
                self.lines.append((now, line))
        return super().write(s)


def latencies(stamped: Stamped, sent_at: list[float], text: str) -> list[float]:
    """Seconds from each content frame's send to the print that first covers it."""
    sizes = [len(p) for p in pieces(text, text_pieces(text))]
    content_frames = sent_at[1 : 1 + len(sizes)]  # frame 0 is the role chunk
    printed: list[tuple[float, int]] = []  # (time, characters shown so far)
    shown = 0
    for when, line in stamped.lines:
        item = json.loads(line)
        if item["type"] == "delta":
            shown += len(item["text"])
            printed.append((when, shown))
        elif item.get("kind") == "model_finished":
            printed.append((when, len(text)))
    out: list[float] = []
    covered = 0
    for size, sent in zip(sizes, content_frames, strict=True):
        covered += size
        when = next(w for w, n in printed if n >= covered)
        out.append(when - sent)
    return out


async def _one(stack: Stack, queue: str) -> list[float]:
    """One streamed reply, watched to its end: each piece's latency in seconds."""
    assert stack.client is not None
    stack.llm.reset()
    stack.llm.set_latency(0, stream_event_ms=FRAME_MS)
    model = stack.llm.add_script(uuid.uuid4().hex[:8], [{"content": TEXT}])
    handle = await start(stack.client, queue, "talk", agent="scripted", model=model)
    out = Stamped()
    code = await watch(AgentClient(stack.client), handle.id, 0, as_json=True, out=out)
    if code != 0:
        said = " | ".join(line for _, line in out.lines if '"delta"' not in line)[-600:]
        raise RuntimeError(f"streamed run {handle.id} did not answer; the watcher printed: {said}")
    for _ in range(100):  # the server records its send times after the last frame's pace
        sent = next(r for r in stack.llm.requests() if r["model"] == model).get("frames_sent_at")
        if sent is not None:
            break
        await asyncio.sleep(0.02)
    else:
        raise RuntimeError(f"the model server recorded no send times for {model}")
    return latencies(out, sent, TEXT)


async def measure(stack: Stack, setting: Setting, runs: int) -> dict[str, Any]:
    """`runs` streamed replies on a streaming worker of the bench's dev server, after one to warm it."""
    poll = watching.STREAM_POLL if setting.poll_s is None else setting.poll_s
    seconds: list[float] = []
    errors: list[str] = []
    with overriding(watching, "STREAM_POLL", lambda _: poll):
        async with stack.worker(setting.worker, stream=True) as worker:
            for n in range(runs + 1):  # the first run on a worker imports the workflow: not counted
                try:
                    got = await asyncio.wait_for(_one(stack, worker.queue), 120)
                except Exception as err:  # one failed reply must not cost the section
                    errors.append(f"{type(err).__name__}: {err}"[:800])
                    continue
                seconds += got if n else []
    if not seconds:
        return {"label": setting.label, "pieces": 0, "p50_ms": None, "p95_ms": None, "max_ms": None, "errors": errors}
    ms = sorted(x * 1000 for x in seconds)
    return {
        "errors": errors,
        "label": setting.label,
        "pieces": len(ms),
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[max(0, int(len(ms) * 0.95) - 1)],
        "max_ms": ms[-1],
    }
