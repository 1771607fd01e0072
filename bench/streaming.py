"""Streaming latency: from the model server sending a piece of text to a watcher printing it.

fake_llm streams a long reply in paced SSE frames and records when each frame left; a watcher
(`cli.watch.watch`, as `client.py watch` runs it) prints into a stream that timestamps every
write. For each piece of text, latency = first print that covers it − its frame's send time.
Pieces arrive through the model activity's heartbeat details, so the figure includes the
heartbeat throttle (200 ms) and the watcher's poll (100 ms): it is a "seconds, not minutes" path,
not a token-by-token one.
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from activities import Registry
from activities.connection import connect
from activities.model import new_http_client
from activities.settings import LLMSettings
from cli.watch import watch
from fake_llm import FakeLLMServer
from fake_llm.wire import pieces, text_pieces
from tests.devserver import DevServer
from tests.helpers import start
from worker import build_worker

TEXT = " ".join(f"word{i}" for i in range(240))  # ~1.9 KB: ~120 pieces of ~16 characters


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


async def measure(frame_ms: float = 25.0, runs: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            settings = LLMSettings(base_url=llm.base_url, model="demo", stream=True)
            registry = Registry.from_modules(["tests.fixtures.agents"])
            queue = f"bench-stream-{uuid.uuid4().hex[:8]}"
            llm.set_latency(0, stream_event_ms=frame_ms)
            all_latencies: list[float] = []
            async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
                for _ in range(runs):
                    model = f"script:{uuid.uuid4().hex[:8]}"
                    llm.add_script(model.split(":")[1], [{"content": TEXT}])
                    handle = await start(client, queue, "talk", agent="scripted", model=model)
                    out = Stamped()
                    await asyncio.wait_for(watch(client, handle.id, 0, as_json=True, out=out), 120)
                    sent = next(r for r in llm.requests() if r["model"] == model)["frames_sent_at"]
                    all_latencies += latencies(out, sent, TEXT)
        finally:
            server.stop()
    ms = sorted(x * 1000 for x in all_latencies)
    return {
        "pieces": len(ms),
        "frame_ms": frame_ms,
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[int(len(ms) * 0.95) - 1],
        "max_ms": ms[-1],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure()), indent=2))
