"""Each pattern of examples/patterns runs offline against the dev server, as `python -m
examples.patterns.NAME` runs it: its workflow, child AgentRuns, its offline model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agent_runner.config.llm import API_KEY_VARIABLES


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*API_KEY_VARIABLES, "LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


async def children(client: Client, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The child workflows the example's workflow started, from the id it printed."""
    printed = capsys.readouterr().out
    run_id = printed.split("workflow: ", 1)[1].split()[0]
    history = await client.get_workflow_handle(run_id).fetch_history()
    started = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id.removeprefix(run_id + "/")
        for e in history.events
        if e.event_type == started
    ]


async def test_sequential_feeds_the_outline_to_the_writer(client: Client, capsys: Any) -> None:
    from examples.patterns import sequential

    answer = await sequential.main("rivers", client=client)
    assert answer == "Rivers start in the hills, run through the plains and end in the sea."
    assert await children(client, capsys) == ["outliner-1", "writer-1"]


async def test_the_printed_link_follows_temporal_ui_url(
    client: Client, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the examples read TEMPORAL_UI and linked localhost:8233 whatever TEMPORAL_UI_URL said."""
    from examples.patterns import sequential

    monkeypatch.setenv("TEMPORAL_UI_URL", "https://ui.example.com:9000/")
    await sequential.main("rivers", client=client)
    printed = capsys.readouterr().out
    run_id = printed.split("workflow: ", 1)[1].split()[0]
    assert f"(https://ui.example.com:9000/namespaces/default/workflows/{run_id})" in printed, printed


async def test_concurrent_asks_three_at_once_and_a_fourth_merges(client: Client, capsys: Any) -> None:
    from examples.patterns import concurrent

    answer = await concurrent.main("tram?", client=client)
    assert answer.startswith("Build it:")
    assert await children(client, capsys) == ["economist-1", "engineer-1", "historian-1", "merger-1"]


async def test_handoff_triage_hands_to_the_right_specialist(client: Client, capsys: Any) -> None:
    from examples.patterns import handoff

    assert (await handoff.main("I was charged twice", client=client)).startswith("billing: I see two charges")
    assert (await handoff.main("The app shows an error", client=client)).startswith("tech: Clear the app's cache")


async def test_manager_calls_its_specialists_as_tools(client: Client, capsys: Any) -> None:
    from examples.patterns import manager

    answer = await manager.main("heat pump?", client=client)
    assert answer.startswith("Yes: it cuts heating costs")
    assert await children(client, capsys) == ["manager-1"]  # the specialists are the manager's own children


async def test_judge_loop_revises_until_the_judge_passes(client: Client, capsys: Any) -> None:
    from examples.patterns import judge

    answer = await judge.main("rivers", client=client)
    assert answer == "The rivers run to meet the sea,\nas every river longs to be.\n(passed after 2 round(s))"
    assert await children(client, capsys) == ["author-1", "judge-1", "author-2", "judge-2"]


async def test_routing_follows_the_classifiers_typed_output(client: Client, capsys: Any) -> None:
    from examples.patterns import routing

    assert await routing.main("The app crashes", client=client) == (
        "tech: Update the app; version 4.2 fixes the crash at login."
    )
    assert await children(client, capsys) == ["classifier-1", "tech-1"]


@pytest.mark.parametrize("name", ["sequential", "concurrent", "handoff", "manager", "judge", "routing"])
def test_the_docs_show_each_examples_code_as_it_is(name: str) -> None:
    root = Path(__file__).resolve().parent.parent
    source = (root / "examples" / "patterns" / f"{name}.py").read_text()
    start = source.index("\n\n", source.index("from durable_agent_runner.workflow import")) + 2
    code = source[start : source.index("\n\nasync def main(")].strip()
    assert code in (root / "docs" / "patterns.md").read_text()
    assert len(source.splitlines()) <= 70  # an example stays short


@pytest.mark.pure
def test_an_example_with_temporal_out_of_reach_says_one_line_not_a_traceback() -> None:
    """`run_script` words the project's own errors as client.py does; before, an example printed
    a 20-line traceback ending in the same line."""
    import os
    import subprocess
    import sys

    from tests.helpers import closed_address

    with closed_address() as address:
        done = subprocess.run(
            [sys.executable, "-m", "examples.patterns.sequential", "rivers"],
            cwd=Path(__file__).resolve().parents[1], env={**os.environ, "TEMPORAL_ADDRESS": address},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: cannot reach Temporal at ") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.pure
def test_run_script_words_each_of_the_projects_errors_with_client_pys_exit_code() -> None:
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    from durable_agent_runner.client.errors import NoWorkerAnswered, RunFailed, RunNotFound
    from durable_agent_runner.client.script import said

    failed = WorkflowFailureError(cause=ApplicationError("no model", type="ModelConnectionError"))
    assert said(failed) == ("the workflow failed: ModelConnectionError: no model", 1)
    assert said(RunFailed("r", "failed", "Boom", "it broke")) == (str(RunFailed("r", "failed", "Boom", "it broke")), 1)
    assert said(RunNotFound("r"))[1] == 2 and said(NoWorkerAnswered("no worker took it"))[1] == 3
    assert said(KeyError("x")) == (None, 1)  # anything else: its traceback, as before
