"""Cases made from recorded runs (issue 34, item 5): the case keeps the run's transcript before
model call N, its tool results and child runs' answers included, and reads back from its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from durable_agent_runner.client import AgentClient
from durable_agent_runner.client.errors import DecisionRefused, RunNotFound
from durable_agent_runner.client.eval_cases import add_case, case_from_run
from durable_agent_runner.evals import Case
from durable_agent_runner.evals.files import DatasetError, load_dataset
from durable_agent_runner.evals.from_run import point_of
from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.workflows import types as t
from tests.console_helpers import serve_console
from tests.helpers import start, transcript
from tests.test_agents import requests_for
from tests.test_client import cli  # noqa: F401  (the fixture)
from tests.test_console_http import csrf_of
from tests.test_fork_reuse import before_first_model_call, team


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


async def test_an_eval_of_a_case_made_at_turn_3_asks_only_the_model_and_runs_no_tool(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path, tmp_path: Path, cli: Any
) -> None:
    registry, model = team(llm)
    path = tmp_path / "incidents.yaml"
    path.write_text("name: incidents\nevaluators: [EqualsExpected]\ncases: []\n")
    async with worker_factory(registry=registry):
        origin = await start(client, task_queue, "Explain tides", agent="lead")
        await origin.result()
        added = await cli("eval", "add-case", str(path), origin.id, "--at-turn", "3", "--expected", "done", "--json")
        assert added.code == 0, added.err
        assert json.loads(added.out)["at_turn"] == 3
        asked_before = len(requests_for(llm, model))
        ev = await AgentClient(client, task_queue=task_queue).evals.start(path, agent="lead", concurrency=1)
        await ev.wait(120)
        rows = (await ev.report())[0].rows
        story = await transcript(client.get_workflow_handle(rows[0].run_id))
        refused = await cli("eval", "add-case", str(path), origin.id, "--at-turn", "3")
    assert refused.code == 2 and "Traceback" not in refused.err
    # said as the flag that names a case, where it read `name: …`, the client's field
    assert f"error: --name: {path} already has a case named" in refused.err and "give it another name" in refused.err
    assert len(rows) == 1 and rows[0].passed and rows[0].scores == {"EqualsExpected": True}
    assert len(requests_for(llm, model)) == asked_before + 1  # model call 3 only
    assert len(counter_file.read_text().splitlines()) == 1  # the recorded tally did not run again
    activities, children, model_calls = await before_first_model_call(client.get_workflow_handle(rows[0].run_id))
    assert t.TOOL_CALL_ACTIVITY not in activities and children == [] and model_calls == 1
    assert [m.content for m in story if isinstance(m, t.ToolMessage)] == ["t1 #1", "Tides follow the moon."]


async def test_the_run_page_makes_a_case_into_the_consoles_datasets_folder(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, counter_file: Path, tmp_path: Path
) -> None:
    registry, _ = team(llm)
    async with worker_factory(registry=registry):
        origin = await start(client, task_queue, "Explain tides", agent="lead")
        await origin.result()
        async with (
            serve_console(client, task_queue, datasets=tmp_path / "sets") as url,
            httpx.AsyncClient(base_url=url, timeout=20) as web,
        ):
            page = (await web.get(f"/runs/{origin.id}")).text
            assert f'action="/runs/{origin.id}/case"' in page and "Make a case" in page
            action, csrf = f"/runs/{origin.id}/case", csrf_of(page)
            form = {"dataset": "incidents", "at_turn": "3", "expected": "done", "csrf": csrf}
            assert (await web.post(action, data={**form, "csrf": ""})).status_code == 403
            escaped = await web.post(action, data={**form, "dataset": "../../etc/x"})
            assert escaped.status_code == 400 and "not a path" in escaped.text
            beyond = await web.post(action, data={**form, "at_turn": "9"})
            assert beyond.status_code == 409 and "made 3 model call" in beyond.text
            made = await web.post(action, data=form)
            assert made.status_code == 200 and "added case" in made.text
    written = load_dataset(tmp_path / "sets" / "incidents.yaml")
    assert [c.expected_output for c in written.cases] == ["done"]
    assert written.cases[0].from_run is not None and written.cases[0].from_run.at_turn == 3
    assert list((tmp_path / "sets").iterdir()) == [tmp_path / "sets" / "incidents.yaml"]


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


@pytest.mark.pure
def test_a_case_from_a_run_starts_as_a_fork_of_its_point_and_any_other_case_from_its_prompt() -> None:
    spec = t.AgentSpec(name="lead", instructions="Lead.")
    messages: list[t.Message] = [t.UserMessage(content="Explain tides"), t.AssistantMessage(content="thinking")]
    point = point_of("origin-run", 2, messages)
    forked = plan.run_input(Case(name="incident", inputs="Explain tides", from_run=point), spec, None)
    plain = plan.run_input(Case(name="plain", inputs={"city": "Paris"}), spec, None)
    assert forked.carry is not None and forked.prompt == "" and forked.frozen is None
    assert forked.carry.messages == messages and forked.carry.turn == 1 and forked.carry.agent == spec
    assert forked.carry.forked_from == t.ForkLink(run_id="origin-run", turn=2)
    assert plain.carry is None and plain.frozen == spec and plain.prompt == '{"city": "Paris"}'
