"""The README's eval (tour step 6): examples/weather_eval.yaml on the demo agent and the demo's
offline model passes, case by case, as `client.py eval run` prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_evals_cli import client_py

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "weather_eval.yaml"


async def test_the_readme_eval_passes_on_the_demo_agent(temporal_server: Any, task_queue: str, worker_factory: Any):
    async with worker_factory():
        code, out, err = await client_py(
            temporal_server, task_queue, "eval", "run", str(EXAMPLE), "--agent", "demo", "--json"
        )
    assert code == 0, err
    report = json.loads(out)["report"]
    rows = {r["case"]: r for r in report["rows"]}
    assert set(rows) == {"paris", "tokyo and rome", "berlin in fahrenheit"}
    assert all(r["passed"] for r in rows.values()), rows
    assert rows["paris"]["scores"] == {"MaxTurns": True, "CalledTool": True, "Contains": True}
