"""Schedules on Temporal Schedules, against the real dev server: a schedule every 2 s with overlap
skip starts one run at a time (a run waiting for a person keeps it from starting another); pause
stops it; trigger starts one now; each run names its schedule (status, list); describe, list and
delete; bad arguments refused with one line before anything is sent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli import main as cli_main
from durable_agent_runner.client import schedule_specs as specs
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.schedules import (
    DESCRIBE_TRIES,
    ScheduleExists,
    ScheduleNotFound,
    ScheduleRow,
    Schedules,
    ScheduleView,
)
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, script
from tests.test_client import cli  # noqa: F401  (the fixture: client.py as a subprocess)


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 20.0, every: float = 0.25) -> Any:
    """The first truthy answer of `check`, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: last {found!r}")
        await asyncio.sleep(every)


def name() -> str:
    return f"every-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def waits_for_a_person(llm: Any) -> LLMSettings:
    """A model that asks for `send`, which the guarded agent always holds for a person: a run
    of it stays running until someone decides (or cancels it)."""
    return LLMSettings(base_url=llm.base_url, model=script(llm, calls(("send", {"label": "report"}))))


async def test_a_schedule_runs_one_at_a_time_with_overlap_skip_pauses_and_triggers(
    client, task_queue, worker_factory, waits_for_a_person
):
    agents = AgentClient(client, task_queue=task_queue)
    sched = name()
    async with worker_factory(settings=waits_for_a_person):
        made = await agents.schedules.create(
            sched, agent="guarded", input="Send the daily report.", every="2s", overlap="skip", budget_usd=0.5
        )
        assert (made.when, made.overlap, made.paused, made.budget_usd) == ("every 2s", "skip", False, 0.5)
        try:
            # The first run starts and waits for a person; the times after it are skipped, not piled up.
            first = await until(lambda: _running(agents, sched))
            view = await until(lambda: _when_skipped(agents, sched, 2), timeout=15)
            assert view.runs_started == 1 and view.running == [first]
            assert view.unserved == ""  # a worker serves 'guarded'
            assert first.startswith(f"sched-{sched}-")
            run = await agents.get(first).status()
            assert run.schedule == sched and run.agent == "guarded"
            listed = [r for r in await agents.list(50, agent="guarded") if r.run_id == first]
            assert listed and listed[0].schedule == sched

            # The run ends; the next time starts the next one.
            await agents.get(first).cancel()
            second = await until(lambda: _running(agents, sched, other_than={first}))
            assert (await agents.schedules.describe(sched)).runs_started == 2

            # Paused: nothing more starts, however long it waits, with no run going on to skip for.
            paused = await agents.schedules.pause(sched, "quiet for the test")
            assert paused.paused and paused.note == "quiet for the test" and paused.runs_started == 2
            await agents.get(second).cancel()
            await until(lambda: _none_running(agents, sched))
            await asyncio.sleep(4.5)  # two intervals and more
            still = await agents.schedules.describe(sched)
            assert (still.runs_started, still.skipped_overlap, still.next_runs) == (2, paused.skipped_overlap, [])

            # Trigger: one run now, paused or not, and the answer names it.
            done = await agents.schedules.trigger(sched)
            assert done.run_id is not None and done.run_id not in (first, second), done
            assert (await agents.get(done.run_id).status()).schedule == sched
            rows = {r.name: r for r in await until(lambda: _listed(agents, sched))}
            assert rows[sched].paused and rows[sched].agent == "guarded" and rows[sched].when == "every 2s"
            await agents.get(done.run_id).cancel()
        finally:
            await agents.schedules.delete(sched)
    with pytest.raises(ScheduleNotFound, match=f"no schedule named '{sched}'"):
        await agents.schedules.describe(sched)


@pytest.mark.parametrize("overlap", ["allow-all", "cancel-other"])
async def test_overlap_allow_all_runs_both_and_cancel_other_cancels_the_first(
    client, task_queue, worker_factory, waits_for_a_person, overlap
):
    """The other two overlap policies, run by the server: a paused schedule triggered twice while
    its first run waits for a person. allow-all: both run at once; cancel-other: the first is
    cancelled (its run ends cancelled), then the second starts."""
    agents = AgentClient(client, task_queue=task_queue)
    sched = name()
    async with worker_factory(settings=waits_for_a_person):
        await agents.schedules.create(
            sched, agent="guarded", input="Send it.", every="1h", overlap=overlap, paused=True
        )
        started: set[str] = set()
        try:
            await agents.schedules.trigger(sched)
            first = await until(lambda: _running(agents, sched))
            started.add(first)
            await until(lambda: _waiting_for_a_person(agents, first))
            await asyncio.sleep(1.1)  # a scheduled run's id ends in its time to the second: one start a second
            await agents.schedules.trigger(sched)
            second = await until(lambda: _running(agents, sched, other_than={first}))
            started.add(second)
            if overlap == "allow-all":
                view = await agents.schedules.describe(sched)
                assert set(view.running) == {first, second}
                assert (await agents.get(first).status()).status == "awaiting_approval"  # still waiting
            else:
                assert (await agents.get(first).status()).status == "cancelled"
                assert (await agents.schedules.describe(sched)).running == [second]
        finally:
            for run in started:
                with contextlib.suppress(Exception):
                    await agents.get(run).cancel()
            await agents.schedules.delete(sched)


async def _waiting_for_a_person(agents: AgentClient, run_id: str) -> bool:
    return bool((await agents.get(run_id).status()).pending_approvals)


async def _running(agents: AgentClient, sched: str, other_than: set[str] = frozenset()) -> str | None:  # type: ignore[assignment]
    view = await agents.schedules.describe(sched)
    fresh = [r for r in view.running if r not in other_than]
    return fresh[0] if fresh else None


async def _none_running(agents: AgentClient, sched: str) -> bool:
    return not (await agents.schedules.describe(sched)).running


async def _when_skipped(agents: AgentClient, sched: str, skipped: int) -> ScheduleView | None:
    view = await agents.schedules.describe(sched)
    return view if view.skipped_overlap >= skipped else None


async def _listed(agents: AgentClient, sched: str) -> list[Any]:
    rows = await agents.schedules.list()
    return rows if any(r.name == sched for r in rows) else []


async def test_create_refuses_a_name_taken_a_missing_session_and_a_cron_the_server_refuses(client, task_queue):
    agents = AgentClient(client, task_queue=task_queue)
    sched = name()
    view = await agents.schedules.create(
        sched, agent="demo", input="hi", cron="0 9 * * 1-5", timezone="Europe/Paris", jitter="30s", paused=True
    )
    try:
        assert (view.when, view.timezone, view.jitter_seconds, view.paused) == (
            "cron 0 9 * * 1-5 (Europe/Paris)", "Europe/Paris", 30.0, True
        )  # fmt: skip
        # No worker serves 'demo' on this test's queue: describe says what its runs would wait for.
        says = f"no worker serves agent 'demo' now: nothing has polled task queue {task_queue}@demo lately"
        assert view.unserved.startswith(says), view.unserved
        with pytest.raises(ScheduleExists):
            await agents.schedules.create(sched, agent="demo", input="hi", every="1h")
        backfilled = await agents.schedules.backfill(sched, "2026-11-30T00:00", "2026-11-30T00:01")
        assert backfilled.name == sched
        with pytest.raises(BadArgument, match="a cron schedule backfills at most 31 days"):
            await agents.schedules.backfill(sched, "2026-01-01", "2026-06-01")
        with pytest.raises(BadArgument, match="FROM must be before TO"):
            await agents.schedules.backfill(sched, "2026-06-01", "2026-01-01")
        tomorrow = datetime.now(UTC) + timedelta(days=1)  # it started now the runs due tomorrow
        with pytest.raises(BadArgument, match=r"^from/to: TO is in the future \(now is .* UTC\): a backfill starts"):
            await agents.schedules.backfill(sched, tomorrow - timedelta(hours=2), tomorrow)
    finally:
        await agents.schedules.delete(sched)
    with pytest.raises(BadArgument, match="session: no run with id 'nobody-here'"):
        await agents.schedules.create(name(), input="hi", every="1h", session="nobody-here")
    with pytest.raises(
        BadArgument, match=r"^jitter: must be at most the interval, 1h \(Temporal caps it there\), not 2h$"
    ):
        await agents.schedules.create(name(), agent="demo", input="hi", every="1h", jitter="2h")
    with pytest.raises(BadArgument, match="Temporal refused it"):
        await agents.schedules.create(name(), agent="demo", input="hi", cron="99 0 0 * * * *")  # seconds first
    with pytest.raises(ScheduleNotFound):
        await agents.schedules.trigger("never-made")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--cron", "every day"], "--cron: 'every day' is not a cron expression"),
        (["--cron", "99 * * * *"], "--cron: '99 * * * *': the minute is 0-59, not 99"),
        (["--cron", "0 9 * 1-13 MON"], "--cron: '0 9 * 1-13 MON': the month is 1-12, not 13"),
        (["--cron", "0 9 0/2 * *"], "--cron: '0 9 0/2 * *': the day is 1-31, not 0"),
        (["--every", "10 parsecs"], "--every: '10 parsecs' is not a duration"),
        (["--every", "0s"], "--every: must be from 1s"),
        (["--every", "10s", "--jitter=-1m"], "--jitter: '-1m' is not a duration"),
        (
            ["--every", "1m", "--jitter", "5m"],
            "--jitter: must be at most the interval, 1m (Temporal caps it there), not 5m",
        ),
        (["--every", "10s", "--catchup-window", "2s"], "--catchup-window: must be from 10s"),
        (["--every", "10s", "--timezone", "Mars/Olympus"], "--timezone: 'Mars/Olympus' is not a time zone"),
        (["--every", "10s", "--timezone", "Europe/Paris"], "--timezone: is for a cron: an interval (every) is counted"),
        (["--every", "10s", "--note", "two\nlines"], "--note: must be one line of at most 1,000 printable"),
        (["--every", "10s", "--session", "s-1"], "argument --session: not allowed with argument --agent"),
        (["--every", "10s", "--overlap", "sometimes"], "--overlap: invalid choice: 'sometimes'"),
        (["--every", "10s", "--cron", "@daily"], "not allowed with argument"),
        ([], "one of the arguments --cron --every is required"),
    ],
)
def test_bad_schedule_arguments_are_one_line_before_anything_is_sent(capsys, args, says):
    with pytest.raises(SystemExit) as exit:
        cli_main.main(["schedule", "create", "nightly", "--agent", "demo", "--input", "hi", *args])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["schedule", "create", "", "--agent", "demo", "--input", "x", "--every", "1m"], "'' is not a schedule name"),
        (["schedule", "create", "a b", "--agent", "demo", "--input", "x", "--every", "1m"], "is not a schedule name"),
        (["schedule", "create", "ok", "--agent", "", "--input", "x", "--every", "1m"], "--agent: must be 1-200"),
        (["schedule", "pause", "../etc"], "is not a schedule name"),
        (["schedule", "pause", "ok", "--note", "x" * 1001], "--note: must be one line of at most 1,000"),
        (["schedule", "create", "ok", "--input", "x", "--every", "1m"], "one of the arguments --agent --session is"),
        (
            ["schedule", "create", "ok", "--session", "s-1", "--model", "m", "--input", "x", "--every", "1m"],
            "--session: a session has its own model and budget: give no --model or --budget-*",
        ),
        (["schedule", "backfill", "ok", "yesterday", "2026-12-01"], "FROM: 'yesterday' is not a time"),
        # was `input: is empty`, the client's field, after connecting
        (["schedule", "create", "ok", "--agent", "demo", "--input", " ", "--every", "1m"], "--input: is empty: give"),
    ],
)
def test_bad_names_and_times_are_usage_errors(capsys, argv, says):
    with pytest.raises(SystemExit) as exit:
        cli_main.main(argv)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and says in err and "Traceback" not in err, err


class _SlowScheduler:
    """A schedule handle whose describe times out `timeouts` times (the scheduler workflow not yet
    at its first task), then raises `last`; it counts the asks."""

    def __init__(self, timeouts: int, last: RPCError) -> None:
        self.timeouts, self.last, self.asked = timeouts, last, 0

    async def describe(self, rpc_timeout: timedelta) -> Any:
        self.asked += 1
        if self.asked <= self.timeouts:
            raise RPCError("Timeout expired", RPCStatusCode.CANCELLED, b"")
        raise self.last


@pytest.mark.parametrize(
    "timeouts, asked, raised", [(0, 1, ScheduleNotFound), (2, 3, ScheduleNotFound), (9, 3, RPCError)]
)
async def test_a_describe_that_times_out_is_asked_again_a_bounded_number_of_times(timeouts, asked, raised):
    slow = _SlowScheduler(timeouts, RPCError("not found", RPCStatusCode.NOT_FOUND, b""))
    schedules = Schedules(cast(Any, SimpleNamespace(get_schedule_handle=lambda _name: slow)), "q", "http://ui")
    with pytest.raises(raised):
        await schedules.describe("nightly")
    assert slow.asked == asked == min(timeouts + 1, DESCRIBE_TRIES)


def test_durations_are_read_as_people_write_them():
    assert specs.duration("1h30m", "x").total_seconds() == 5400
    assert specs.duration("90", "x").total_seconds() == 90
    assert specs.duration("2d", "x").total_seconds() == 172800
    assert specs.said(specs.duration("1h30m", "x")) == "1h30m"
    with pytest.raises(BadArgument, match="days"):
        specs.duration("400d", "x")
    with pytest.raises(BadArgument, match=r"every: must be from 1s to 366 days, not -5s$"):  # it said "not "
        specs.duration(-5, "every", low=specs.MIN_EVERY)


@pytest.mark.pure
@given(st.integers(min_value=-(10**8), max_value=10**8))
def test_a_duration_said_is_never_empty_and_reads_back(seconds: int) -> None:
    d = timedelta(seconds=seconds)
    words = specs.said(d)
    assert words and words.endswith(("s", "m", "h", "d"))
    if 0 < seconds <= 366 * 86400:
        assert specs.duration(words, "x") == d


@given(
    st.lists(st.integers(min_value=0, max_value=99), min_size=5, max_size=5),
    st.sampled_from(["{}", "{}-{}", "*/{}", "{},{}"]),
)
def test_a_cron_field_is_taken_within_its_range_and_refused_past_it(numbers: list[int], form: str) -> None:
    """Each of the five fields is checked before anything is sent, named with its range, in
    every way a number is written in it (a value, a range, a list); a step is a count, not a value."""
    fields = [form.format(n, n) if form != "*/{}" else f"*/{max(n, 1)}" for n in numbers]
    text = " ".join(fields)
    wrong = [
        (what, n) for (what, low, high), n in zip(specs.CRON_RANGES, numbers, strict=True)
        if form != "*/{}" and not low <= n <= high
    ]  # fmt: skip
    if not wrong:
        assert specs.cron(text) == text
    else:
        what, n = wrong[0]
        with pytest.raises(BadArgument, match=rf"^cron: '.*': the {what} is \d+-\d+, not {n}$"):
            specs.cron(text)


async def test_the_cli_creates_describes_lists_pauses_and_deletes_with_json(cli):
    sched = name()
    made = await cli("schedule", "create", sched, "--agent", "demo", "--input", "Weather in Tokyo?",
                     "--every", "1h", "--budget-tokens", "5000", "--paused", "--catchup-window", "5m",
                     "--jitter", "30s", "--overlap", "buffer-one", "--model", "demo", "--json")  # fmt: skip
    assert made.code == 0, made.err
    view = json.loads(made.out)
    assert (view["name"], view["when"], view["paused"], view["budget_tokens"]) == (sched, "every 1h", True, 5000)
    shown = await cli("schedule", "describe", sched)
    assert shown.code == 0 and f"{sched}  every 1h  agent demo  paused" in shown.out, shown.out
    assert "budget per run: 5,000 tokens" in shown.out and "/schedules/" in shown.out
    assert "overlap buffer-one · catch-up window 5m · jitter 30s" in shown.out and "model: demo" in shown.out
    unpaused = await cli("schedule", "unpause", sched, "--json")
    assert unpaused.code == 0 and json.loads(unpaused.out)["paused"] is False
    many = await cli("schedule", "backfill", sched, "2026-01-01", "2026-06-01")
    assert many.code == 2 and "that range would start 3,624 runs, more than 1,000" in many.err, many.err
    listed = await until(lambda: _cli_lists(cli, sched))
    assert listed["agent"] == "demo" and listed["next_runs"]
    gone = await cli("schedule", "delete", sched, "--json")
    assert gone.code == 0 and json.loads(gone.out) == {"deleted": sched}
    missing = await cli("schedule", "describe", sched, "--json")
    assert missing.code == 2 and json.loads(missing.out)["error"] == f"no schedule named '{sched}'"


async def _cli_lists(cli: Any, sched: str) -> dict[str, Any] | None:
    done = await cli("schedule", "list", "--json")
    assert done.code == 0, done.err
    return next((r for r in json.loads(done.out)["schedules"] if r["name"] == sched), None)


async def test_a_schedule_sends_its_input_to_a_session_and_its_runs_name_it_in_the_cli(
    client, task_queue, worker_factory, cli
):
    agents = AgentClient(client, task_queue=task_queue)
    sched = name()
    async with worker_factory():
        session = await agents.start_session("demo")
        made = await agents.schedules.create(
            sched, input="Weather in Tokyo?", every="1h", session=session.id, paused=True
        )
        assert made.session == session.id and made.input == "Weather in Tokyo?"
        try:
            with pytest.raises(BadArgument, match="a session has its own model and budget"):
                await agents.schedules.create(name(), input="x", every="1h", session=session.id, budget_usd=1.0)
            with pytest.raises(BadArgument, match="give one of agent"):
                await agents.schedules.create(name(), agent="demo", input="x", every="1h", session=session.id)
            done = await agents.schedules.trigger(sched)
            assert done.run_id and done.run_id.startswith(f"sched-{sched}-")
            delivered = await client.get_workflow_handle(done.run_id, result_type=t.Delivered).result()
            assert (delivered.session, delivered.message) == (session.id, 1)
            exchange = await session.exchange(1, wait=60)
            assert exchange.prompt == "Weather in Tokyo?" and exchange.by == f"schedule {sched}" and exchange.output
            # A run of an agent it started: `status` and `list` name the schedule.
            runs = await agents.schedules.create(f"{sched}-runs", agent="demo", input="Weather in Paris?", every="1h")
            started = await agents.schedules.trigger(runs.name)
            assert started.run_id and await agents.get(started.run_id).result()
            status = await cli("status", started.run_id)
            assert f"schedule: started by schedule {sched}-runs" in status.out, status.out
            listed = await until(lambda: _cli_list_names(cli, started.run_id))
            assert f"· schedule {sched}-runs" in listed
            only = await cli("list", "--schedule", f"{sched}-runs")  # the runs it started, and no other
            assert [line.split()[0] for line in only.out.splitlines()] == [started.run_id], only.out
            none = await cli("list", "--schedule", f"{sched}-never")
            assert none.out.strip() == f"no run started by schedule '{sched}-never'", none.out
        finally:
            for made_name in (sched, f"{sched}-runs"):
                with contextlib.suppress(ScheduleNotFound):
                    await agents.schedules.delete(made_name)
            await session.end("done")


async def _cli_list_names(cli: Any, run_id: str) -> str | None:
    done = await cli("list", "--limit", "50")
    return next((line for line in done.out.splitlines() if line.startswith(run_id)), None)


async def test_a_time_missed_while_the_server_was_down_is_caught_up_when_it_is_back(
    client, task_queue, worker_factory, llm, temporal_server
):
    """Catch-up across a real outage: the dev server (SQLite, as `start-dev --db-filename`) is
    stopped for longer than two intervals and started again; the schedule then starts a run for a
    time that fell in the outage, late, as its catch-up window (Temporal's default: a year) allows.
    `describe` shows it: due during the outage, started after it."""
    agents = AgentClient(client, task_queue=task_queue)
    sched = name()
    quick = LLMSettings(base_url=llm.base_url, model=script(llm, {"content": "done"}))
    async with worker_factory(settings=quick):
        await agents.schedules.create(sched, agent="scripted", input="Tick.", every="4s", overlap="allow-all")
        try:
            await until(lambda: _started_at_least(agents, sched, 1), timeout=20)
            down = datetime.now(UTC)
            temporal_server.stop()  # SQLite keeps the schedule
            await asyncio.sleep(10)  # two intervals and more: at least two times fall in the outage
            temporal_server.start()
            up = datetime.now(UTC)

            async def caught_up() -> list[Any]:
                view = await agents.schedules.describe(sched)
                after = up - timedelta(seconds=1)
                return [r for r in view.recent if down < r.scheduled_at < up and (r.started_at or down) >= after]

            late = await until(caught_up, timeout=40, every=0.5)
            assert late, "no run for a time missed during the outage"
        finally:
            await agents.schedules.delete(sched)


async def _started_at_least(agents: AgentClient, sched: str, n: int) -> bool:
    return (await agents.schedules.describe(sched)).runs_started >= n


async def test_a_time_zone_for_an_interval_and_a_note_of_two_lines_are_refused_before_anything_is_sent():
    agents = AgentClient(cast(Any, None), task_queue="nowhere")  # a client that would fail if it were called
    with pytest.raises(BadArgument, match=r"^timezone: is for a cron: an interval \(every\) is counted from 1970"):
        await agents.schedules.create("s", agent="demo", input="hi", every="1h", timezone="Europe/Paris")
    with pytest.raises(BadArgument, match=r"^note: must be one line"):
        await agents.schedules.create("s", agent="demo", input="hi", every="1h", note="two\nlines")
    with pytest.raises(BadArgument, match=r"^note: must be one line of at most 1,000"):
        await agents.schedules.pause("s", note="x" * 1001)


def test_a_schedule_s_note_is_shown_beside_its_state_active_or_paused():
    from durable_agent_runner.cli.schedules import _head
    from durable_agent_runner.console.views_schedules import _row

    active = ScheduleRow(name="nightly", agent="demo", when="cron @daily", note="the ops report")
    assert _head(active) == "nightly  cron @daily  agent demo  active (the ops report)"
    assert "the ops report" in _row(active)
    assert _head(active.model_copy(update={"paused": True, "note": ""})).endswith("  paused")


async def test_a_refusal_after_connecting_names_create_s_flag():
    """Before: `session: no run with id 'x'`, the client's field, where the person typed --session."""
    import argparse

    from durable_agent_runner.cli.common import UsageError
    from durable_agent_runner.cli.schedules import cmd_create

    async def refuse(*_: Any, **__: Any) -> Any:
        raise BadArgument("session", "no run with id 'x'")

    client = SimpleNamespace(schedules=SimpleNamespace(create=refuse))
    fields = ("agent", "input", "cron", "every", "overlap", "catchup_window", "jitter", "timezone", "budget_usd",
              "budget_tokens", "session", "model", "paused", "note")  # fmt: skip
    args = argparse.Namespace(name="s", json=False, **dict.fromkeys(fields))
    with pytest.raises(UsageError, match=r"^--session: no run with id 'x'$"):
        await cmd_create(cast(Any, client), args)
