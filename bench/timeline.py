"""Where a turn's time goes (bench section 6): one turn's critical path, from the model server's
reply to the run's next request, as a chain of stamped points and the time between them.

The points come from three clocks on one machine (all `time.time()`): the worker's own stamps
(BENCH-ONLY wrappers that `install` puts around temporalio's bridge calls, the workflow
activation, the tool's thread and the model request, in the worker's process), the history's
event times (the server's) and the fake model server's arrival times (the reply is taken as sent
at arrival + latency). Each gap is put down to one side: the worker's Python, the SDK's Rust core,
the server (with the gRPC to and from it and the core's handling of its reply), or HTTP and the
model server (its side of a request, and httpx's).
"""

from __future__ import annotations

import atexit
import functools
import inspect
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

OPTION = "timeline"  # WorkerSpec option: the file the worker writes its stamps to when it stops
REPLY = "model server replies"
REQUEST = "model server: request in"
SIDES = ("worker (Python)", "SDK core (Rust)", "server, gRPC and SDK core", "HTTP and model server")

_stamps: list[tuple[float, str]] = []


def install(path: str) -> None:
    """BENCH-ONLY, in a worker's process, before its worker is built: stamp the points of a turn;
    they are written to `path` as JSON when the process exits."""
    import temporalio.bridge.worker as bridge
    import temporalio.worker._workflow as workflow_worker

    from durable_agent_runner.activities import model
    from durable_agent_runner.agents import executor

    def stamp(name: str) -> None:
        _stamps.append((time.time(), name))

    def stamped(cls: Any, method: str, start: str | None = None, end: str | None = None) -> None:
        """Wraps `cls.method` (sync or async) to stamp `start` as it is called and `end` as it returns."""
        original = getattr(cls, method)

        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
                if start:
                    stamp(start)
                try:
                    return await original(self, *args, **kwargs)
                finally:
                    if end:
                        stamp(end)

            setattr(cls, method, wrapped)
            return

        @functools.wraps(original)
        def wrapped_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
            if start:
                stamp(start)
            try:
                return original(self, *args, **kwargs)
            finally:
                if end:
                    stamp(end)

        setattr(cls, method, wrapped_sync)

    stamped(bridge.Worker, "poll_workflow_activation", end="activation in")
    stamped(bridge.Worker, "poll_activity_task", end="activity task in")
    stamped(bridge.Worker, "complete_workflow_activation", start="activation done")
    stamped(bridge.Worker, "complete_activity_task", start="activity done")
    stamped(workflow_worker._RunningWorkflow, "activate", "workflow code starts", "workflow code ends")
    stamped(executor.ToolThreads, "_counted", "tool starts", "tool ends")
    stamped(model.ModelActivities, "_send", "request sent", "reply read")
    atexit.register(lambda: Path(path).write_text(json.dumps(_stamps)))


def side(start: str, end: str) -> str:
    """Whose time a gap is: a gap that reaches the server includes the gRPC there and back and the
    SDK core's handling of what comes back."""
    if REPLY in (start, end) or REQUEST in (start, end):
        return SIDES[3]
    if start.startswith("server:") or end.startswith("server:"):
        return SIDES[2]
    if end in ("activation in", "activity task in"):
        return SIDES[1]
    return SIDES[0]


def analyse(
    requests: list[float], latency_ms: float, stamps: list[list[Any]], events: list[tuple[float, str]]
) -> dict[str, Any]:
    """The median gap between consecutive points of a turn, over the turns whose points came in
    the most common order (the first and last few turns left out: start-up and the end)."""
    points = sorted(
        [(float(t), str(name)) for t, name in stamps]
        + [(t, f"server: {name}") for t, name in events]
        + [(t, REQUEST) for t in requests]
        + [(t + latency_ms / 1000, REPLY) for t in requests]
    )
    turns: list[list[tuple[float, str]]] = []
    for sent, following in itertools.pairwise(requests[4:-2]):
        start = sent + latency_ms / 1000
        turns.append([p for p in points if start - 1e-6 <= p[0] <= following + 1e-6])
    if not turns:
        return {"rows": [], "turns": 0}
    shape, _ = Counter(tuple(name for _, name in turn) for turn in turns).most_common(1)[0]
    alike = [turn for turn in turns if tuple(name for _, name in turn) == shape]
    rows: list[dict[str, Any]] = []
    for i in range(len(shape) - 1):
        gap = median((turn[i + 1][0] - turn[i][0]) * 1000 for turn in alike)
        rows.append({"from": shape[i], "to": shape[i + 1], "ms": round(gap, 2), "side": side(shape[i], shape[i + 1])})
    by_side = {s: round(sum(r["ms"] for r in rows if r["side"] == s), 2) for s in SIDES}
    return {"rows": rows, "by_side": by_side, "turns": len(alike), "of": len(turns), "latency_ms": latency_ms}
