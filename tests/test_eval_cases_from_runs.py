"""Cases made from recorded runs (issue 34, item 5): the case keeps the run's transcript before
model call N, its tool results and child runs' answers included, and reads back from its file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from durable_agent_runner.client.errors import DecisionRefused, RunNotFound
from durable_agent_runner.client.eval_cases import add_case, case_from_run
from durable_agent_runner.evals.files import DatasetError, load_dataset
from durable_agent_runner.workflows import types as t
from tests.helpers import start
from tests.test_fork_reuse import team


async def test_a_case_from_a_run_at_turn_3_keeps_its_tool_and_child_results(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path, tmp_path: Path
) -> None:
    registry, _ = team(llm)
    async with worker_factory(registry=registry):
        origin = await start(client, task_queue, "Explain tides", agent="lead")
        assert (await origin.result()).output == "done"
        case = await case_from_run(client, origin.id, at_turn=3, expected="done")
        last = await case_from_run(client, origin.id, name="tides again")  # no turn: its last model call, asked again
        with pytest.raises(DecisionRefused, match="made 3 model call"):
            await case_from_run(client, origin.id, at_turn=4)
    with pytest.raises(RunNotFound):
        await case_from_run(client, "no-such-run-at-all")
    assert case.inputs == "Explain tides" and case.expected_output == "done"
    assert case.from_run is not None and case.from_run.at_turn == 3 and case.from_run.run_id == origin.id
    messages = case.from_run.transcript()
    assert [m.content for m in messages if isinstance(m, t.ToolMessage)] == ["t1 #1", "Tides follow the moon."]
    assert isinstance(messages[-1], t.ToolMessage)  # it stops where model call 3 starts
    assert last.from_run is not None and last.from_run.at_turn == 3
    assert case.name == f"{origin.id} at turn 3"

    path = tmp_path / "incidents.yaml"
    add_case(path, case)
    grown = add_case(path, last)
    assert [c.name for c in grown.cases] == [case.name, last.name]
    assert load_dataset(path) == grown  # the transcript reads back as it was written
    with pytest.raises(ValueError, match="already has a case named"):
        add_case(path, case)


@pytest.mark.pure
def test_a_case_whose_recorded_transcript_is_bad_is_refused_at_load_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        '{"cases": [{"name": "incident", "inputs": "x",'
        ' "from_run": {"run_id": "r", "at_turn": 2, "messages": [{"role": "robot", "content": "hi"}]}}]}'
    )
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    message = str(err.value)
    assert "bad.json" in message and "incident" in message and "from_run" in message and "\n" not in message
