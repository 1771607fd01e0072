"""The console's pages as rendered from a run's facts, with no server: the waterfall's figures
per turn, and the byte bound of a page whatever the run holds. The pages over HTTP are
tests/test_console_http.py and tests/test_console_bounds.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from starlette.requests import Request

from durable_agent_runner.console.data import PAGE_SIZE, Asking, RunView, Waiting
from durable_agent_runner.console.security import MAX_FORM_BYTES, Refused, read_form
from durable_agent_runner.console.views import MAX_PAGE_BYTES, inbox_body, page, runs_body, size
from durable_agent_runner.console.views_run import facts, run_body, story, turns, waterfall
from durable_agent_runner.workflows import types as t
from tests.helpers import event

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def ev(seq: int, at: float, kind: str, call: str | None = None, turn: int = 1) -> t.AnyRunEvent:
    usage = t.Usage(input_tokens=10, output_tokens=5, cost_usd=0.001) if kind == "model_finished" else None
    fields = {"call_id": call} if call is not None else {}
    return event(kind, seq=seq, at=T0 + timedelta(seconds=at), turn=turn, usage=usage, **fields)


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


BIG = '"<&>' * (3 * 1024 * 1024 // 4)  # 3 MB of characters that escape to 4-6 bytes each
LONG_ID = "r" * 1000  # Temporal's longest workflow id
ARGS = 1024 * 1024  # a call's arguments stop at 1 MiB (machine/bounds.py)


def worst_view() -> RunView:
    """A run holding as much as it can in every part of its page."""
    call = t.ToolCall(call_id="c" * 200, name="n" * 64, arguments=json.dumps({"x": BIG[:ARGS]}))
    messages: list[tuple[int, t.Message]] = []
    for i in range(300):
        kinds: list[t.Message] = [
            t.UserMessage(content=BIG),
            t.AssistantMessage(content=BIG, tool_calls=[call] * 8),
            t.ToolMessage(call_id="c" * 200, name="n" * 64, content=BIG),
        ]
        messages.append((i, kinds[i % 3]))
    child = {"run_id": LONG_ID, "agent": "a" * 200, "phase": "running", "status": "running", "total_tokens": 1}
    child["children"] = []
    events = [ev(i, i, kind, "c", turn=1 + i // 2) for i, kind in enumerate(["model_started", "model_finished"] * 1000)]
    status = {
        "run_id": LONG_ID,
        "status": "running",
        "phase": "awaiting_approval",
        "agent": "a" * 200,
        "turn": 1000,
        "max_turns": 1000,
        "usage": {"total_tokens": 10**9, "requests": 1000},
        "cost_usd": 1.0,
        "started_at": T0.isoformat(),
        "ui_url": "http://ui/" + LONG_ID * 3,
        "forks": [{"run_id": LONG_ID, "turn": 3}] * 500,
        "error": {"type": "E" * 5000, "message": BIG},
        "paused": {"where": "model_call", "turn": 3, "why": BIG},
        "stuck": {"error": BIG, "what_to_do": BIG},
        "handoffs": [{"from_agent": "a" * 200, "to_agent": "b" * 200, "turn": 1, "at": T0.isoformat()}] * 1000,
        "switches": [{"from_model": "m" * 4000, "to_model": "n" * 4000, "turn": 1, "at": T0.isoformat(), "why": BIG}]
        * 1000,
        "budget": {
            "on_budget": "pause",
            "run": {"tokens": {"limit": 1e12, "spent": 1e11, "reserved": 0, "left": 9e11}, "usd": None},
            "tree": {"tokens": {"limit": 1e12, "spent": 2e11, "reserved": 1, "left": 8e11}, "usd": None},
            "children": [{"child_id": LONG_ID, "tokens": 10**9, "usd": 1e6}] * 100,
        },
    }
    schema = {"properties": {f"p{i}": {"type": "string", "description": "d" * 1000} for i in range(60)}}
    pending = t.PendingApproval(
        call_id="c" * 200, tool="n" * 64, arguments={f"p{i}": BIG[: ARGS // 60] for i in range(60)}, since=T0, turn=1
    )
    waiting: list[Asking] = [Waiting(LONG_ID, "a" * 200, pending, schema=schema) for _ in range(30)]
    return RunView(
        status=status, messages=messages, hidden=0, events=events, next_event=2000,
        children=[{**child, "children": [child] * 50}] * 50, parent=LONG_ID, waiting=waiting, live=True,
    )  # fmt: skip


def test_a_run_page_and_the_inbox_stay_under_their_bound_whatever_the_run_holds() -> None:
    """The worst a run can hold in every part of its page at once: 300 messages of 3 MB each,
    30 calls waiting with 1 MiB of arguments each (60 fields), 2,500 child runs, 1,000 turns and
    handoffs, and the longest ids."""
    view = worst_view()
    run_page = page(f"Run {LONG_ID}", run_body(view), "x" * 43, "b" * 200, stream=f"/runs/{LONG_ID}/events")
    inbox = page("Inbox", inbox_body(view.waiting * 10), "x" * 43, "b" * 200, stream="/inbox/events")
    for shown in (run_page, inbox, story(view), facts(view)):
        assert size(shown) < MAX_PAGE_BYTES, size(shown)
    assert "earlier message(s) not shown" in run_page and "the whole value</a>" in run_page
    assert "<dt>error</dt>" in run_page and "<dt>budget (tree)</dt>" in run_page  # the facts fit their share
    assert f'href="/runs/{"r" * 1000}/messages/299"' in run_page  # the newest are the ones kept
    assert "300 calls wait; the 40 oldest are shown" in inbox


def test_the_runs_page_stays_under_its_bound() -> None:
    row = {
        "run_id": '"<&>' * 250, "agent": "a" * 200, "phase": "awaiting_approval", "status": "running", "turn": 1,
        "total_tokens": 1, "cost_usd": 1.0, "started_at": T0.isoformat(), "ui_url": "http://ui/" + "%22" * 1000,
        "pending_approvals": 500, "waiting": [f"{'n' * 64} ({'c' * 200})"] * 500,
    }  # fmt: skip
    filters = {"phase": "", "agent": "a" * 200, "waiting": "1"}
    shown = page("Runs", runs_body([row] * PAGE_SIZE, filters, "t" * 4096), "x" * 43, "b" * 200)
    assert size(shown) < MAX_PAGE_BYTES, size(shown)
    assert "and 495 more" in shown


async def test_a_form_whose_length_is_not_ascii_digits_is_refused() -> None:
    """'²'.isdigit() is True and int('²') raises: the console read it as a number (a 500)."""
    for length, status in (("²", 400), ("٣", 400), ("-1", 400), (str(MAX_FORM_BYTES + 1), 413)):
        scope = {"type": "http", "method": "POST", "headers": [(b"content-length", length.encode())]}
        with pytest.raises(Refused) as refused:
            await read_form(Request(scope), "csrf")
        assert refused.value.status == status, (length, refused.value.message)


def small_view(**status: object) -> RunView:
    """A run of one turn, as its page reads it (`worst_view` is the largest)."""
    base = {"run_id": "r-1", "status": "running", "phase": "calling_model", "agent": "demo", "turn": 1,
            "max_turns": 8, "usage": {"total_tokens": 9, "requests": 3}, "cost_usd": 0.0,
            "started_at": T0.isoformat(), "ui_url": "http://ui/r-1", "forks": [], "handoffs": []}  # fmt: skip
    return RunView(status=base | status, messages=[], hidden=0, events=[], next_event=0, children=[], parent=None,
                   waiting=[], live=True)  # fmt: skip


def test_the_run_page_s_cost_says_the_calls_to_models_without_a_price_as_status_does() -> None:
    view = small_view(usage={"total_tokens": 9, "requests": 3, "unpriced": 2}, cost_usd=0.5)
    words = "$0.5000 (+ 2 call(s) to models without a price)"
    assert f"<dt>cost</dt><dd>{words}</dd>" in facts(view).replace("\n", "")
    view.status["usage"]["unpriced"] = 0
    assert "<dt>cost</dt><dd>$0.5000</dd>" in facts(view).replace("\n", "")


def test_a_paused_run_s_page_says_where_it_holds_as_status_does() -> None:
    """Before: `status paused (paused)` and `paused before before tools 2: …`."""
    from durable_agent_runner.cli.status import render_status

    pause = {"where": "before_tools", "turn": 2, "why": "a breakpoint before tool calls", "at": T0.isoformat()}
    view = small_view(status="paused", phase="paused", paused=pause)
    shown = facts(view).replace("\n", "")
    assert '<dt>status</dt><dd><span class="phase paused" id="status">paused</span></dd>' in shown
    assert "<dt>paused</dt><dd>before the tool calls of turn 2: a breakpoint before tool calls</dd>" in shown
    said = render_status(view.status)
    assert "paused:  before the tool calls of turn 2: a breakpoint before tool calls (inspect" in said
    assert "status:  paused\n" in said
