"""The console's pages as rendered from a run's facts, with no server: the waterfall's figures
per turn. The pages over HTTP are tests/test_console_http.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable_agent_runner.console.views_run import turns, waterfall
from durable_agent_runner.workflows import types as t

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def ev(seq: int, at: float, kind: str, call: str | None = None, turn: int = 1) -> t.RunEvent:
    usage = t.Usage(input_tokens=10, output_tokens=5, cost_usd=0.001) if kind == "model_finished" else None
    return t.RunEvent(seq=seq, at=T0 + timedelta(seconds=at), kind=kind, turn=turn, call_id=call, usage=usage)


def test_an_approval_wait_counts_once_as_waiting_not_as_tool_time_too() -> None:
    """A call's tool_started comes before its approval is asked for: 10 s waiting for a person
    inside a call of 10.7 s is 10 s waiting and 0.7 s tool time (it was 10.7 s tools + 10 s waiting)."""
    events = [
        ev(0, 0.0, "model_started"),
        ev(1, 2.0, "model_finished"),
        ev(2, 2.0, "tool_started", "c1"),
        ev(3, 2.2, "approval_requested", "c1"),
        ev(4, 12.2, "approval_decided", "c1"),
        ev(5, 12.7, "tool_finished", "c1"),
    ]
    (turn,) = turns(events)
    assert (turn.model, round(turn.tools, 3), turn.waiting) == (2.0, 0.7, 10.0)
    assert turn.model + turn.tools + turn.waiting <= (turn.end - turn.start).total_seconds()  # type: ignore[operator]
    assert "turn 1: model 2.00 s · tools 0.70 s · waiting 10.00 s · 15 tokens · $0.0010" in waterfall(events)


def test_calls_side_by_side_count_their_wall_time_once() -> None:
    """Two calls waiting for a person at once, then running at once, and a call in doubt that waits
    for a decision before its rerun: each figure is the wall time in which at least one did it."""
    events = [
        ev(0, 0.0, "tool_started", "a"),
        ev(1, 0.0, "tool_started", "b"),
        ev(2, 0.0, "approval_requested", "a"),
        ev(3, 0.0, "approval_requested", "b"),
        ev(4, 4.0, "approval_decided", "a"),
        ev(5, 5.0, "approval_decided", "b"),  # waiting: 0-5 s, once
        ev(6, 6.0, "tool_finished", "a"),  # a runs 4-6 s while b still waits 4-5 s
        ev(7, 7.0, "tool_finished", "b"),  # tools: 4-7 s, once
        ev(8, 10.0, "tool_started", "c", turn=2),
        ev(9, 11.0, "call_in_doubt", "c", turn=2),
        ev(10, 31.0, "call_resolved", "c", turn=2),
        ev(11, 32.0, "tool_finished", "c", turn=2),
    ]
    first, second = turns(events)
    assert (first.tools, first.waiting) == (3.0, 5.0)
    assert (second.tools, second.waiting) == (2.0, 20.0)


def test_a_wait_still_open_or_an_unmatched_end_adds_nothing() -> None:
    events = [
        ev(0, 0.0, "approval_decided", "x"),
        ev(1, 1.0, "tool_started", "y"),
        ev(2, 2.0, "approval_requested", "y"),
    ]
    (turn,) = turns(events)
    assert (turn.model, turn.tools, turn.waiting) == (0.0, 0.0, 0.0)
