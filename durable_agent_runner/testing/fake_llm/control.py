"""Server state shared by all handler threads, and the control API that changes it.

The `/_control/*` endpoints and the `FakeLLMServer` helper methods both go through here,
so the HTTP and in-process ways of scripting the double behave identically:
  POST /_control/scripts   {"id": "abc", "steps": [{"content": "..."} | {"tool_calls": [...]}, ...]}
  POST /_control/faults    {"faults": [{"kind": "status", "status": 429, ...}, ...]}
  POST /_control/latency   {"ms": 50, "stream_event_ms": 20}  (the second: a pause after each SSE frame)
  POST /_control/reset     {}
  GET  /_control/requests  {"requests": [{"seq", "time", "method", "path", "headers", "body", ...}]}
  GET  /_control/faults    {"faults": [pending faults, in order]}
"""

from __future__ import annotations

import copy
import json
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any, TypeGuard

from durable_agent_runner.testing.fake_llm.conversation import as_list
from durable_agent_runner.testing.fake_llm.faults import FaultQueue, parse_fault
from durable_agent_runner.testing.fake_llm.prompt_cache import PromptCache
from durable_agent_runner.testing.fake_llm.scripts import Responder, ScriptStep, parse_steps, scripts_only


class State:
    """Everything the control API changes; shared by all handler threads. `responder` answers
    every model call (set before the server starts, kept across resets); `models` are the names
    GET /v1/models lists besides the scripts'."""

    def __init__(
        self,
        latency_ms: float = 0.0,
        max_log: int = 1000,
        responder: Responder = scripts_only,
        models: Sequence[str] = (),
    ) -> None:
        self.responder = responder
        self.models = tuple(models)
        self.lock = threading.Lock()
        self.scripts: dict[str, tuple[ScriptStep, ...]] = {}
        self.faults = FaultQueue()
        self.prompt_cache = PromptCache()  # the prefixes requests marked with cache_control
        self.latency_ms = self.initial_latency_ms = latency_ms
        self.stream_event_ms = 0.0  # a pause after each SSE frame, so a stream takes time
        # Bounded, and bodies kept as raw bytes (parsed when read): a 1,000-turn run sends
        # O(turns^2) bytes in total, and parsed JSON would cost several times that in memory.
        self.log: deque[dict[str, Any]] = deque(maxlen=max_log)
        self.seq = 0
        self.stopping = threading.Event()  # wakes sleeping handlers when the server stops

    def sleep(self, ms: float) -> None:
        if ms > 0:
            self.stopping.wait(ms / 1000)

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            entry["seq"] = self.seq
            self.seq += 1
            self.log.append(entry)
        return entry

    def update(self, entry: dict[str, Any], **fields: Any) -> None:
        with self.lock:
            entry.update(fields)

    def requests(self, last: int | None = None) -> list[dict[str, Any]]:
        with self.lock:  # copy the small mutable parts under the lock; parse bodies outside it
            log = list(self.log)
            if last is not None:
                log = log[-last:] if last > 0 else []
            entries = [(copy.deepcopy({k: v for k, v in e.items() if k != "raw"}), e["raw"]) for e in log]
        for entry, raw in entries:
            try:
                entry["body"] = json.loads(raw) if raw else None
            except ValueError:
                entry["body"], entry["body_text"] = None, raw.decode(errors="replace")
        return [entry for entry, _ in entries]

    def reset(self) -> None:
        with self.lock:
            self.scripts.clear()
            self.log.clear()
            self.seq = 0
            self.latency_ms = self.initial_latency_ms  # e.g. the CLI's --latency-ms
            self.stream_event_ms = 0.0
        self.faults.clear()
        self.prompt_cache.clear()


def apply_control(state: State, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST /_control/{scripts,faults,latency}; raises ValueError on a bad body."""
    if name == "scripts":
        script_id = body.get("id")
        if not isinstance(script_id, str) or not script_id:
            raise ValueError("'id' must be a non-empty string")
        steps = parse_steps(body.get("steps"))
        with state.lock:
            state.scripts[script_id] = steps
        return {"ok": True, "id": script_id, "model": f"script:{script_id}", "steps": len(steps)}
    if name == "faults":
        raw = as_list(body.get("faults"))
        if raw is None:
            raise ValueError("'faults' must be a list")
        faults = [parse_fault(f) for f in raw]
        state.faults.add(faults)
        return {"ok": True, "queued": len(faults)}
    ms = body.get("ms")
    pace = body.get("stream_event_ms", state.stream_event_ms)
    if not (_non_negative(ms) and _non_negative(pace)):
        raise ValueError("'ms' and 'stream_event_ms' must be non-negative numbers")
    with state.lock:
        state.latency_ms = float(ms)
        state.stream_event_ms = float(pace)
    return {"ok": True, "ms": ms, "stream_event_ms": pace}


def _non_negative(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
