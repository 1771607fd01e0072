"""`eval add-case`: a recorded run (a production incident, say) made into a case of a dataset.

The case keeps the run's transcript just before model call N (the fork point the run itself
answers), so an eval can start the agent under test there (durable_agent_runner/evals/from_run.py)."""

from __future__ import annotations

from pathlib import Path

from pydantic import JsonValue
from temporalio.client import Client

from durable_agent_runner.client import checks
from durable_agent_runner.client.control import model_calls_made, query_run
from durable_agent_runner.client.errors import DecisionRefused
from durable_agent_runner.evals import Case, Dataset
from durable_agent_runner.evals.files import load_dataset, save_dataset, with_case_appended, write_text, yaml_file
from durable_agent_runner.evals.from_run import first_prompt, point_of
from durable_agent_runner.workflows import types as t


async def case_from_run(
    client: Client, run_id: str, *, at_turn: int | None = None, expected: JsonValue = None, name: str | None = None
) -> Case:
    """A case that starts where run `run_id` stood before model call `at_turn` (default: its last
    model call, asked again). Raises RunNotFound, or DecisionRefused for a turn the run never reached."""
    run_id = checks.run_id(run_id, "run_id", checks.MAX_ANY_ID)
    made = await model_calls_made(client, run_id)
    at = made if at_turn is None else at_turn
    if isinstance(at, bool) or not isinstance(at, int):
        raise TypeError(f"at_turn must be an int, not {type(at).__name__}")
    if made == 0:
        raise DecisionRefused(f"run {run_id} made no model call: there is no point a case could start from")
    if not 1 <= at <= made:
        raise DecisionRefused(f"run {run_id} made {made} model call(s): a case starts before one of them (1-{made})")
    point: t.ForkPoint = await query_run(
        client, run_id, t.FORK_POINT_QUERY, t.ForkQuery(turn=at), result_type=t.ForkPoint
    )
    return Case(
        name=name or f"{run_id[:160]} at turn {at}",
        inputs=first_prompt(point.messages),
        expected_output=expected,
        metadata={"from_run": run_id, "at_turn": at},
        from_run=point_of(run_id, at, point.messages),
    )


def add_case(path: str | Path, case: Case) -> Dataset:
    """`case` appended to the dataset file at `path` (made if missing, named after the file); a
    YAML file keeps its comments and layout. A case of that name already there is refused: a
    case's name is its key in reports."""
    path = Path(path)
    dataset = load_dataset(path) if path.exists() else Dataset(name=path.stem or "dataset", cases=[])
    if any(c.name == case.name for c in dataset.cases):
        raise checks.BadArgument("name", f"{path} already has a case named {case.name!r}: give it another name")
    grown = Dataset(name=dataset.name, cases=[*dataset.cases, case], evaluators=dataset.evaluators)
    kept = with_case_appended(path.read_text(encoding="utf-8"), case) if path.exists() and yaml_file(path) else None
    if kept is not None:  # the person's file as they wrote it (comments and all), one case longer
        write_text(path, kept)
    else:
        save_dataset(grown, path)
    return grown
