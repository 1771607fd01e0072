"""AgentRun runs outside temporalio's sandbox (workflows/agent.py says why). What the sandbox would
check at run time is checked by the tests' replays instead, in STRICT_SANDBOX. These tests show
that check can fail: workflow code that reads a clock, draws a random number or reads the
environment does not replay there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CONTRACTS, STRICT_SANDBOX

SOURCE = Path(__file__).resolve().parents[1]
HISTORY = SOURCE / "tests" / "histories" / "weather_1_0.json"  # two tool calls: machine/calls._plan runs

# Replays HISTORY with the package found first on sys.path (a copy), in STRICT_SANDBOX.
REPLAY = """
import asyncio, os, sys
copy, source, history = sys.argv[1:]
sys.path[:0] = [copy, source]
from durable_agent_runner import machine, workflows
for engine in (machine, workflows):
    assert engine.__file__.startswith(copy), f"the copy was not imported: {engine.__file__}"
from temporalio.client import WorkflowHistory
from tests.helpers import strict_replayer
asyncio.run(strict_replayer().replay_workflow(WorkflowHistory.from_json("demo", open(history).read())))
print("replayed", flush=True)
os._exit(0)  # no interpreter teardown: temporalio's runtime can SIGABRT it (sdk-python#300; seen in CI)
"""


def replay_with(tmp_path: Path, injected: str | None) -> subprocess.CompletedProcess[str]:
    """Replay HISTORY with a copy of the engine whose `machine/calls._plan` (run for every tool call) first
    runs `injected`."""
    copy = tmp_path / "copy"
    for name in ("durable_agent_runner", "machine", "workflows", "activities"):  # with the package's links
        shutil.copytree(SOURCE / name, copy / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    if injected is not None:
        calls = copy / "machine" / "calls.py"
        calls.write_text(
            calls.read_text() + "\n\nimport datetime, os, random\n_checked_plan = _plan\n\n"
            f"def _plan(*args, **kwargs):\n    {injected}\n    return _checked_plan(*args, **kwargs)\n"
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", REPLAY, str(copy), str(SOURCE), str(HISTORY)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )


def test_unchanged_workflow_code_replays_in_the_strict_sandbox(tmp_path: Path) -> None:
    done = replay_with(tmp_path, None)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "replayed" in done.stdout


@pytest.mark.parametrize(
    "injected, named",
    [
        ("datetime.datetime.now()", "datetime.datetime.now"),
        ("random.random()", "random.random"),
        ("os.environ.get('HOME')", "os.environ"),
    ],
)
def test_a_nondeterministic_call_in_workflow_code_fails_its_replay(tmp_path: Path, injected: str, named: str) -> None:
    done = replay_with(tmp_path, injected)
    assert done.returncode != 0 and "replayed" not in done.stdout
    assert f"Cannot access {named}" in done.stderr, done.stderr[-2000:]


def test_no_module_of_the_engine_is_passed_through_the_strict_sandbox() -> None:
    """A module passed through is imported outside the sandbox, so nothing in it is checked. Only
    the contracts (data: workflows/types/, the eval contracts) are; the workflow classes and the
    machine are imported afresh in every replay."""
    for path in [*(SOURCE / "workflows").rglob("*.py"), *(SOURCE / "machine").rglob("*.py")]:
        assert "imports_passed_through" not in path.read_text(), f"{path.name} passes its imports through"
    passed = STRICT_SANDBOX.restrictions.passthrough_modules
    engine = ("durable_agent_runner.workflows", "workflows", "durable_agent_runner.machine", "machine")
    assert [m for m in passed if m.startswith(engine)] == ["durable_agent_runner.workflows.types"]
    assert set(CONTRACTS) <= passed
