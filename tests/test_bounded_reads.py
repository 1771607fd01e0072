"""Every read the client, the CLI and the console make of Temporal has a deadline (`rpc_timeout`):
a query a worker does not answer, or a slow server, costs a bounded wait, then a clear error or a
read asked again, never a page or a command that waits for good. (A just-closed run's events
query once waited 20 s and more with no deadline, and the console's run page never showed the
run's end.) Walks the source for the calls of Temporal's client and handles that read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

PACKAGE = Path(__file__).resolve().parent.parent / "durable_agent_runner"
FACES = ("client", "cli", "console")
ALWAYS_RPC = {"query", "list_workflows", "count_workflows", "list_schedules"}  # Temporal's, by name
# Temporal's take no positional argument; the project's own helpers of these names take one.
WITHOUT_ARGS = {"describe", "fetch_history", "fetch_history_events"}
# Waits for a run's end that a person asked for, bounded by the caller's own `wait` (asyncio).
WAITS_FOR_THE_END = {("client/evals.py", "wait"), ("client/handles.py", "_outcome")}


def unbounded_reads(path: Path, name: str) -> list[str]:
    found = []
    for fn in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or (name, fn.name) in WAITS_FOR_THE_END:
            continue
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            call, on = node.func.attr, ast.unparse(node.func.value)
            rpc = call in ALWAYS_RPC or (call in WITHOUT_ARGS and not node.args)
            rpc = rpc or (call == "result" and not node.args and on.endswith("handle"))  # a workflow's result
            if rpc and not any(k.arg in ("rpc_timeout", None) for k in node.keywords):
                found.append(f"{name}:{node.lineno}: {call}() in {fn.name}")
    return sorted(set(found))


def test_every_read_of_temporal_has_a_deadline() -> None:
    found = []
    for face in FACES:
        for path in sorted((PACKAGE / face).rglob("*.py")):
            found += unbounded_reads(path, str(path.relative_to(PACKAGE)))
    assert found == []


def test_the_walk_finds_a_read_with_no_deadline(tmp_path: Path) -> None:
    source = tmp_path / "reads.py"
    source.write_text(
        "async def f(client, handle, rows):\n"
        "    await handle.query('agent.status', rpc_timeout=READ)\n"  # bounded
        "    await handle.describe()\n"
        "    await self._handle.result()\n"
        "    await updates.describe(handle)\n"  # the project's helper: it bounds its own read
        "    [w async for w in client.list_workflows('x')]\n"
    )
    assert unbounded_reads(source, "reads.py") == [
        "reads.py:3: describe() in f",
        "reads.py:4: result() in f",
        "reads.py:6: list_workflows() in f",
    ]
