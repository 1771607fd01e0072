"""`client.py run --break-*`, pause, inspect, edit, resume and fork, run as a user runs them."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from durable_agent_runner.workflows import types as t
from tests.helpers import calls, script
from tests.test_agents import requests_for
from tests.test_client import Cli, cli, one_clean_line, started  # noqa: F401  (cli is a fixture)

pytestmark = pytest.mark.asyncio


async def until_paused(cli: Cli, run_id: str) -> dict:
    async with asyncio.timeout(30):
        while True:
            done = await cli("inspect", run_id, "--json")
            if done.code == 0 and done.json()["paused"] is not None:
                return done.json()
            await asyncio.sleep(0.2)


async def test_break_edit_resume_and_fork_from_the_command_line(
    cli: Cli, client, worker_factory, llm, counter_file
) -> None:
    model = script(llm, calls(("record", {"label": "first"})), calls(("add", {"a": 2, "b": 2})), {"content": "done"})
    async with worker_factory():
        done = await cli(
            "run", "--agent", "scripted", "--model", model, "--break-tool", "record", "--break-at", "3", "go"
        )
        run_id = done.out.strip()
        view = await until_paused(cli, run_id)
        assert view["paused"]["where"] == "before_tools"
        (call,) = view["pending_calls"]
        status = (await cli("status", run_id, "--json")).json()
        assert status["status"] == "paused" and "before record" in status["paused"]["why"]
        text = (await cli("inspect", run_id)).out
        assert "[0] user" in text and call["call_id"] in text
        # not "run when resumed": a call whose tool needs approval is asked for it first
        assert "pending calls (when resumed, each goes on as any call: approved first, if its tool asks):" in text
        refused = await cli("edit", run_id, "--args", call["call_id"], '{"label": 7}')
        assert refused.code == 2 and "arguments for record are invalid" in one_clean_line(refused.err), str(refused)
        refused = await cli("edit", run_id, "--text", "0", "x", "--drop", "1")
        assert refused.code == 2 and "exactly one edit" in one_clean_line(refused.err)
        ok = await cli("edit", run_id, "--args", call["call_id"], '{"label": "edited"}', "--by", "carol")
        assert ok.code == 0 and "carol changed the arguments" in ok.out, str(ok)
        assert (await cli("resume", run_id)).code == 0
        view = await until_paused(cli, run_id)  # then at model call 3
        assert view["paused"]["turn"] == 3 and view["paused"]["where"] == "before_model"
        past = await cli("fork", run_id, "--at-turn", "9")  # paused: the call it waits before is a fork point too
        assert past.code == 2 and one_clean_line(past.err).endswith("(1-2), or 3 while it waits before it"), str(past)
        ok = await cli("edit", run_id, "--insert", str(len(view["items"])), "user", "say it in French")
        assert ok.code == 0, str(ok)
        assert (await cli("resume", run_id)).code == 0
        result = await cli("result", run_id, "--json")
        assert result.json()["output"] == "done"
        exported = await cli("export", run_id)  # every control people sent, in order (export left them out)
        controls = [json.loads(line) for line in exported.out.splitlines() if '"type": "control"' in line]
        assert [(c["update"], c.get("op"), c["by"]) for c in controls] == [
            ("edit", "args", "carol"), ("resume", None, "cli"), ("edit", "insert", "cli"), ("resume", None, "cli"),
        ], controls  # fmt: skip
        assert controls[0]["summary"].startswith(f"carol changed the arguments of {call['call_id']} (record)")
        assert [line.split()[0] for line in counter_file.read_text().splitlines()] == ["edited"]
        assert requests_for(llm, model)[2]["messages"][-1]["content"] == "say it in French"
        # A run that has ended can't be paused or edited; it can be forked.
        assert (await cli("pause", run_id)).code == 2
        fork = await cli("fork", run_id, "--at-turn", "2", "--prompt", "and now subtract", "--json")
        assert fork.code == 0, str(fork)
        fork_id = fork.json()["run_id"]
        forked = await client.get_workflow_handle(fork_id, result_type=t.RunResult).result()
        assert forked.turns >= 2
        fork_status = (await cli("status", fork_id, "--json")).json()
        assert fork_status["forked_from"] == {"run_id": run_id, "turn": 2, "live_tools": False}
        async with asyncio.timeout(20):  # visibility catches up
            while not (await cli("status", run_id, "--json")).json().get("forks"):
                await asyncio.sleep(0.3)
        source = (await cli("status", run_id, "--json")).json()
        assert source["forks"][0]["run_id"] == fork_id and source["forks"][0]["turn"] == 2
        bad = await cli("fork", run_id, "--at-turn", "9")
        assert bad.code == 2 and "cannot fork before model call 9" in one_clean_line(bad.err), str(bad)
        # An ended run waits before no call: the range it names is the calls it made, and no more.
        assert re.search(r"fork before one of them \(1-\d\)$", one_clean_line(bad.err)), str(bad)
        first_fork_request = json.dumps(requests_for(llm, model)[-1]["messages"])
        assert "and now subtract" in first_fork_request


async def test_inspect_with_no_worker_to_answer_is_one_clear_line_in_bounded_time(cli: Cli) -> None:
    # no worker polls this task queue: nobody can answer the run's query
    run_id = await started(cli, "hello")
    # A client.py process that asks Temporal one thing, as the machine's load is now: on two
    # shared cores a process's start alone took 9 s once. `inspect --wait 2` takes its wait more.
    reference = await cli("list", "--limit", "1")
    done = await cli("inspect", run_id, "--wait", "2")
    line = one_clean_line(done.err)
    assert done.code == 1 and "no answer in time" in line and "worker.py" in line, str(done)
    assert done.seconds < max(reference.seconds, 2) + 2 + 6, (str(done), reference.seconds)
    assert (await cli("cancel", run_id)).code == 0


async def test_a_refusals_hint_names_the_run_as_a_person_types_it(cli: Cli, client, task_queue, worker_factory) -> None:
    """An edit of a run that is not paused is refused with the run's hint, which said `pause it
    first (client.py pause RUN_ID)`: the run knows neither how the CLI was started nor, where it
    refuses, its own id. The client names both."""
    from durable_agent_runner import AgentClient

    async with worker_factory():
        chat = await AgentClient(client, task_queue=task_queue).start_session("chatter")
        refused = await cli("edit", chat.id, "--text", "0", "hi")
        await chat.end()
    line = one_clean_line(refused.err)
    assert refused.code == 2 and line.endswith(
        f"the run is not paused: pause it first (python client.py pause {chat.id})"
    )


@pytest.mark.pure
async def test_only_a_runs_own_hints_are_named() -> None:
    from durable_agent_runner.client.errors import cli, naming

    assert naming("(client.py resolve RUN_ID c1 --rerun)", "r-1") == f"({cli()} resolve r-1 c1 --rerun)"
    assert naming("`python client.py pause RUN_ID`", r"a\1") == f"`{cli()} pause a\\1`"  # no backreference
    assert naming("RUN_ID alone, client.py RUN_ID", "r") == "RUN_ID alone, client.py RUN_ID"  # no verb: left


@pytest.mark.pure
async def test_inspect_shows_how_to_edit_only_where_an_edit_is_taken() -> None:
    """Before: every inspection ended with the edit commands, though a run that is not paused
    refuses each edit ("the run is not paused: pause it first"). Each command names the run, as a
    person types it (it said RUN_ID)."""
    from datetime import UTC, datetime

    from durable_agent_runner.cli.debug import render

    base = {"run_id": "run-7", "agent": "demo", "turn": 3}
    waiting = render(t.Inspection(**base, phase="awaiting_approval"))
    assert "durable-agent-runner edit" not in waiting and waiting.endswith(
        "to edit: durable-agent-runner pause run-7 (it pauses at its next safe point), then edit, then resume"
    )
    ended = render(t.Inspection(**base, phase="completed"))
    assert "durable-agent-runner edit" not in ended and "durable-agent-runner fork run-7 --at-turn N" in ended
    pause = t.PauseInfo(where="before_model", turn=3, why="pause by alice", at=datetime(2026, 12, 5, tzinfo=UTC))
    paused = render(t.Inspection(**base, phase="paused", paused=pause))
    assert "edit: durable-agent-runner edit run-7 --text I TEXT" in paused and paused.endswith(
        "then: durable-agent-runner resume run-7"
    )


@pytest.mark.pure
async def test_inspect_names_only_other_agents_as_those_the_run_may_switch_to() -> None:
    """Before: a run of one agent said "agent: demo (may switch to: demo)"."""
    from durable_agent_runner.cli.debug import render

    alone = render(t.Inspection(run_id="r", agent="demo", agents=["demo"], turn=1, phase="running"))
    assert "agent:   demo\n" in alone and "may switch" not in alone
    team = render(t.Inspection(run_id="r", agent="triage", agents=["billing", "triage"], turn=1, phase="running"))
    assert "agent:   triage (may switch to: billing)\n" in team


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ({"text": ["-1", "x"]}, "--text INDEX: an item index is a whole number from 0, not '-1'"),
        ({"insert": ["x", "user", "hi"]}, "--insert INDEX: an item index is a whole number from 0, not 'x'"),
        ({"drop": -3}, "--drop INDEX: must be between 0 and 1,000,000,000"),
        ({"insert": ["1", "system", "hi"]}, "--insert ROLE must be user or assistant, not 'system'"),
    ],
)
async def test_an_edit_s_bad_index_names_the_flag_it_came_with(flags: dict, said: str) -> None:
    """A bad item index is said with its flag (`--text INDEX: …`), before anything is sent,
    where it said `index: …`, a name no flag has."""
    import argparse

    from durable_agent_runner.cli.common import UsageError
    from durable_agent_runner.cli.debug import edit_of

    given = {"text": None, "drop": None, "insert": None, "args": None, "drop_call": None, "agent": None}
    with pytest.raises(UsageError) as refused:
        edit_of(argparse.Namespace(**(given | flags), by="cli"))
    assert str(refused.value) == said


@pytest.mark.pure
async def test_inspect_says_error_once_for_a_tool_message_that_says_it_itself() -> None:
    """Before: a dropped call read `get_weather (call_1_1) error: error: cli dropped this call`."""
    from durable_agent_runner.cli.debug import item_line

    dropped = t.ToolMessage(call_id="c1", name="get_weather", content="error: cli dropped it", is_error=True)
    assert item_line(dropped) == "tool      get_weather (c1): error: cli dropped it"
    plain = t.ToolMessage(call_id="c2", name="send", content="the mail server said no", is_error=True)
    assert item_line(plain) == "tool      send (c2) error: the mail server said no"
    assert item_line(plain.model_copy(update={"is_error": False})) == "tool      send (c2): the mail server said no"
