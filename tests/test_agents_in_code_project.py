"""A team's project, laid out as Temporal teams lay one out (its own `workflows/` and
`activities/`, a `worker.py` with the AgentPlugin, a starter), written from
docs/agents-in-code.md as it stands: its workflow chains two agents and gathers three. The worker
is SIGKILLed once the first agent has finished and started again; the report is saved, and no
agent that had finished was asked again."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "agents-in-code.md"
AGENTS = ("outline", "writer", "facts", "style", "legal")
# Offline, each agent gets a fake_llm script of its own (its model), so requests count per agent.
OFFLINE_MODELS = """
import os as _os

outline, writer, facts, style, legal = (
    a.model_copy(update={"model": f"script:{_os.environ['SCRIPTS']}-{a.name}"})
    for a in (outline, writer, facts, style, legal)
)
"""

pytestmark = pytest.mark.asyncio


def project_files() -> dict[str, str]:
    """The page's Python blocks that name their file on their first line (`# worker.py: ...`)."""
    files = {}
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S):
        first = block.splitlines()[0]
        if found := re.fullmatch(r"# ([\w/]+\.py): .*", first):
            files[found.group(1)] = block
    return files


def write_project(root: Path) -> None:
    files = project_files()
    assert set(files) == {"my_agents.py", "activities/notes.py", "workflows/report.py", "worker.py", "starter.py"}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + (OFFLINE_MODELS if name == "my_agents.py" else ""))
    for package in ("workflows", "activities"):
        (root / package / "__init__.py").write_text("")


def start(project: Path, env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, *args], cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_until(check: Any, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen; the processes printed:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


async def test_a_teams_project_survives_a_sigkilled_worker_without_rerunning_finished_agents(
    temporal_server: Any, llm: Any, client: Client, tmp_path: Path
) -> None:
    project = tmp_path / "reports-team"
    write_project(project)
    prefix = uuid.uuid4().hex[:8]
    llm.add_script(f"{prefix}-outline", [{"content": "1. source 2. course 3. mouth"}])
    llm.add_script(f"{prefix}-writer", [{"content": "Rivers run from their source to the sea."}])
    for name in ("facts", "style", "legal"):
        llm.add_script(f"{prefix}-{name}", [{"json": {"ok": True, "note": f"{name} fine"}}])
    writer_model = f"script:{prefix}-writer"
    llm.add_faults([{"kind": "delay", "ms": 3000, "count": 4, "model": writer_model}])  # the writer takes a while
    queue, report_id = f"reports-{prefix}", f"report-{prefix}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEMPORAL_PROFILE")}
    env |= {"TEMPORAL_ADDRESS": temporal_server.target, "TASK_QUEUE": queue, "SCRIPTS": prefix,
            "LLM_BASE_URL": llm.base_url, "LLM_MODEL": "demo", "LLM_API_KEY": "", "PYTHONUNBUFFERED": "1"}  # fmt: skip
    worker_log, starter_log = tmp_path / "worker.log", tmp_path / "starter.log"

    def polling(times: int) -> bool:
        return worker_log.read_text().count("worker polling") >= times if worker_log.exists() else False

    first = start(project, env, worker_log, "worker.py")
    starter = None
    second = None
    try:
        wait_until(lambda: polling(1), 60, "the worker's start", worker_log)
        starter = start(project, env, starter_log, "starter.py", report_id, "rivers of Europe")
        outline = client.get_workflow_handle(f"{report_id}/outline-1")
        deadline = time.monotonic() + 60
        while True:  # the first agent has finished, and the writer's model call is in flight
            try:
                done = (await outline.describe()).status == WorkflowExecutionStatus.COMPLETED
            except Exception:  # not started yet
                done = False
            if done and any(r["model"] == writer_model for r in llm.requests()):
                break
            assert time.monotonic() < deadline, f"the chain did not get going:\n{worker_log.read_text()[-3000:]}"
            await asyncio.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        second = start(project, env, worker_log, "worker.py")
        deadline = time.monotonic() + 120
        while starter.poll() is None:
            assert time.monotonic() < deadline, f"no report:\n{worker_log.read_text()[-3000:]}"
            await asyncio.sleep(0.2)
    finally:
        for proc in (first, second, starter):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    assert starter.returncode == 0, starter_log.read_text()[-3000:]
    saved = starter_log.read_text().strip().splitlines()[-1]
    assert saved == f"saved reports/{report_id}.md"
    report = (project / "reports" / f"{report_id}.md").read_text()
    assert report.startswith("Rivers run from their source to the sea.")
    assert "- ok: facts fine\n- ok: style fine\n- ok: legal fine" in report  # the typed reviews, in order
    asked = Counter(r["model"].removeprefix(f"script:{prefix}-") for r in llm.requests() if prefix in r["model"])
    # Each agent that finished was asked once; the writer twice: its first call died with the worker.
    assert asked == {"outline": 1, "writer": 2, "facts": 1, "style": 1, "legal": 1}
    history = await client.get_workflow_handle(report_id).fetch_history()
    children = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id for e in history.events
                if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]  # fmt: skip
    assert children == [f"{report_id}/{name}-1" for name in AGENTS]  # each agent started once
