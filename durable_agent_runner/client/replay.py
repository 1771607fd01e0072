"""An exported run replayed offline (durable_agent_runner/client/export.py writes it): each
captured response goes back through the wire parser and the pure turn logic, which must make the
decisions the run recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from durable_agent_runner.activities import chat_wire, responses_wire
from durable_agent_runner.client.export import FAILURE_KINDS
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.rules import Final, decide
from durable_agent_runner.workflows import types as t


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def _lines_of(items: list[str]) -> Any:
    for item in items:
        yield item


async def replay_decisions(lines: list[dict[str, Any]]) -> Iterator[tuple[int, str, str]]:
    """Feed each captured response back through the wire parser and `decide`; yields
    (turn, recorded, replayed) for every decision, where recorded == replayed when all is well."""
    agent = t.AgentSpec.model_validate(lines[0]["agent"])
    recorded = {(d["turn"]): d for d in lines if d["type"] == "decision"}
    out: list[tuple[int, str, str]] = []
    tokens, cost = 0, 0.0
    for call in (line for line in lines if line["type"] == "model_call"):
        capture = call["capture"]
        if capture is None:
            raise ValueError(f"turn {call['turn']} has no wire capture: run with --capture")
        wire = responses_wire if capture["api"] == "responses" else chat_wire
        if capture["stream"]:
            reply = await wire.parse_stream(_lines_of(capture["response"]), call["turn"])
        else:
            reply = wire.parse_response(json.loads(capture["response"]), call["turn"])
        tokens, cost = tokens + reply.usage.total_tokens, cost + reply.usage.cost_usd
        step = decide(agent, call["turn"], reply, tokens_used=tokens, cost_used=cost)  # as the turn machine asks
        want = recorded.get(call["turn"])
        if isinstance(step, Final):
            mine = f"final: {step.output}"
        elif isinstance(step, RunTools):
            mine = f"run_tools: {[p.call.call_id for p in step.calls if p.action in ('tool', 'child')]}"
        else:
            mine = FAILURE_KINDS.get(step.error, "failed")
        if want is None:
            theirs = "none"
        elif want["kind"] == "final":
            theirs = f"final: {want['output']}"
        elif want["kind"] == "run_tools":
            theirs = f"run_tools: {want['ran']}"
        else:
            theirs = want["kind"]
        out.append((call["turn"], theirs, mine))
    return iter(out)
