"""The registry of workflow patches (workflows/patches.py) holds for every entry: the workflow code
asks exactly the patches it lists, by its names, at the step of their life the package's version
is at; each patch's history records its marker and replays; each has a plan to its removal, and
docs/patches.md shows that plan."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from durable_agent_runner import __version__
from durable_agent_runner.workflows import patches
from durable_agent_runner.workflows.patches import PATCHES, Patch, release
from tests.helpers import marker_ids

SOURCE = Path(__file__).resolve().parents[1]
WORKFLOWS = SOURCE / "workflows"
MACHINE = SOURCE / "machine"  # the machines ask 1.x patches through `ctx.patched(ID)` and `facts.patched(ID)`
HISTORIES = SOURCE / "tests" / "histories"
VERSIONS = "workflows/versions.py"
ASKS = ("patched", "patched_2x", "deprecate_patch")  # workflow.patched(ID), versions.patched_2x(ID), ...
ASKERS = ("workflow", "versions", "ctx", "facts")
# The registry's names for the ids: the code asks a patch by one of them, never by its text.
NAMES = {name: value for name, value in vars(patches).items() if name.endswith("_PATCH") and isinstance(value, str)}


def asked(source: str, where: str) -> list[tuple[str, str]]:
    """(how, id) for each `workflow.patched(...)` / `workflow.deprecate_patch(...)` in the source,
    each `versions.patched(...)` (workflows/versions.py: how the workflows ask a 1.x patch), and
    each `ctx.patched(...)` / `facts.patched(...)` (the call machine's context and the turn
    machine's facts, which the workflow fills with `versions.patched`). The argument must be one
    of the registry's names (`X_PATCH` or `t.X_PATCH`): a literal or an unknown name fails,
    naming the line. versions.py alone asks on the others' behalf (`workflow.patched(patch_id)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ASKS):
            continue
        if not (isinstance(node.func.value, ast.Name) and node.func.value.id in ASKERS):
            continue
        (arg,) = node.args
        if where == VERSIONS and isinstance(arg, ast.Name) and arg.id == "patch_id":
            continue
        name = arg.id if isinstance(arg, ast.Name) else arg.attr if isinstance(arg, ast.Attribute) else None
        how = ast.unparse(arg)
        assert name in NAMES, f"{where}:{node.lineno}: asks a patch by {how}, not a name of workflows/patches.py"
        found.append(("patched" if node.func.attr == "patched_2x" else node.func.attr, NAMES[name]))
    return found


@functools.cache  # the code does not change during a run of the tests: scanned once, not per patch
def asked_in_workflows() -> dict[str, set[str]]:
    """Each patch id the workflow code asks, and how (patched / deprecate_patch)."""
    ids: dict[str, set[str]] = {}
    for path in sorted([*WORKFLOWS.rglob("*.py"), *MACHINE.rglob("*.py")]):
        for how, patch_id in asked(path.read_text(), str(path.relative_to(SOURCE))):
            ids.setdefault(patch_id, set()).add(how)
    return ids


def test_the_scan_refuses_a_patch_asked_by_its_text_or_an_unknown_name() -> None:
    assert asked("workflow.patched(IN_DOUBT_PATCH)\nworkflow.deprecate_patch(t.CALL_AHEAD_PATCH)", "x") == [
        ("patched", patches.IN_DOUBT_PATCH),
        ("deprecate_patch", patches.CALL_AHEAD_PATCH),
    ]
    for call in ('workflow.patched("in-doubt-1.1")', "workflow.patched(OTHER_PATCH)"):
        with pytest.raises(AssertionError, match=r"not a name of workflows/patches\.py"):
            asked(call, "x.py")


def test_the_workflow_code_asks_exactly_the_registered_patches() -> None:
    registered = [p.id for p in PATCHES]
    assert len(set(registered)) == len(registered), "a patch id is registered twice"
    assert set(NAMES.values()) == set(registered), "each id the registry names has an entry, and only those"
    assert set(asked_in_workflows()) == set(registered)


def test_only_versions_asks_temporal_and_every_execution_asks_the_release_first() -> None:
    """A 1.x patch is asked through workflows/versions.py, so a 2.0 run takes it without a
    marker; and the workflows that ask 1.x patches ask the release in their init, first."""
    for path in sorted(WORKFLOWS.rglob("*.py")):
        where = str(path.relative_to(SOURCE))
        if where != VERSIONS:
            assert "workflow" not in {how for how, _ in asked_by(path.read_text(), where)}, where
    for where, cls in (("workflows/agent.py", "AgentRun"), ("workflows/eval_run.py", "EvalRun")):
        tree = ast.parse((SOURCE / where).read_text())
        (defn,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
        (init,) = [n for n in defn.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        assert ast.unparse(init.body[0]) == "versions.started_on_2_0()", f"{where}: the init asks the release first"


def asked_by(source: str, where: str) -> list[tuple[str, str]]:
    """(who, id): who asked each patch in the source (workflow, versions, ctx, facts)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ASKS:
            if isinstance(node.func.value, ast.Name):
                found.append((node.func.value.id, ast.unparse(node.args[0]) if node.args else ""))
    return found


def test_the_patch_ids_are_written_once() -> None:
    """No module of workflows/ or machine/ but the registry writes a patch id as text."""
    ids = {p.id for p in PATCHES}
    for path in sorted([*WORKFLOWS.rglob("*.py"), *MACHINE.rglob("*.py")]):
        if path.name == "patches.py" and path.parent == WORKFLOWS:
            continue
        texts = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)}
        written = sorted(ids & texts)
        assert not written, f"{path.relative_to(SOURCE)} writes {written}: use workflows/patches.py's name"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_each_patch_is_asked_as_its_life_says_at_this_version(patch: Patch) -> None:
    """Before `deprecate_in` the code asks `patched`; from it on, `deprecate_patch`; from
    `remove_in` on, nothing (and the entry goes)."""
    now = release(__version__)
    assert now, f"the package's version {__version__!r} is not a release"
    assert now < release(patch.remove_in), f"{patch.id}: {__version__} is at its removal ({patch.remove_in}): remove it"
    deprecated = patch.deprecate_in is not None and now >= release(patch.deprecate_in)
    assert asked_in_workflows()[patch.id] == {"deprecate_patch" if deprecated else "patched"}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_each_patch_has_a_plan_to_its_removal(patch: Patch) -> None:
    added, removed = release(patch.added_in), release(patch.remove_in)
    assert added and removed and added < removed, patch
    if patch.deprecate_in is not None:
        assert added < release(patch.deprecate_in) < removed, patch
    assert patch.plan.strip() and patch.changes.strip(), patch
    assert patch.id.endswith("-" + patch.added_in), f"{patch.id}: an id names the release that added it"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_each_patch_s_history_records_its_marker(patch: Patch) -> None:
    """Each patch's history records its marker; tests/test_workflow.py replays it, with every
    checked-in history, under the current code (one replayer for all: here it was each again)."""
    path = HISTORIES / f"{patch.history}.json"
    assert path.is_file(), f"{patch.id}: no history {path.relative_to(SOURCE)}"
    history = WorkflowHistory.from_json(patch.history, path.read_text())
    assert patch.id in marker_ids(history), f"{path.name} records no marker of {patch.id}"


def test_the_docs_table_is_the_registry() -> None:
    """docs/patches.md has one row per patch, with the registry's releases and history."""
    page = (SOURCE / "docs" / "patches.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z0-9.-]+)` \|.*$", page, re.M)}
    assert set(rows) == {p.id for p in PATCHES}
    for p in PATCHES:
        cells = [c.strip() for c in rows[p.id].strip("|").split("|")]
        deprecate = p.deprecate_in or "—"
        assert cells[1:5] == [p.added_in, f"`{p.history}`", deprecate, p.remove_in], rows[p.id]
    assert "patches.md" in (SOURCE / "mkdocs.yml").read_text()
    assert "(patches.md)" in (SOURCE / "docs" / "index.md").read_text()


def release_of(path: Path) -> str:
    """The release a history was recorded on, from its name: weather_2_0.call_1_0.json -> 2_0,
    eval_lanes_2_0_1.json -> 2_0_1."""
    found = re.search(r"_(\d+(?:_\d+)+)$", path.name.split(".")[0])
    return found.group(1) if found else ""


FRESH = sorted(p for p in HISTORIES.glob("*.json") if release_of(p).startswith("2_"))
VERSIONED = {"AgentRun", "EvalRun"}  # the workflows that ask 1.x patches, and so the release
PATCHES_2X = {p.id for p in PATCHES if release(p.added_in) > (2, 0)}  # asked by 2.x runs, after the release


def test_2_0_is_a_new_version_whose_histories_are_fresh() -> None:
    """Each history recorded on 2.x holds the release's marker, recorded in its first workflow
    task before any command, and no 1.x marker (a 2.x patch's marker may follow the release's);
    no 1.x history holds the release's marker."""
    assert len(FRESH) >= 10, [p.name for p in FRESH]
    kinds = set()
    for path in FRESH:
        history = WorkflowHistory.from_json(path.stem, path.read_text())
        kind = history.events[0].workflow_execution_started_event_attributes.workflow_type.name
        kinds.add(kind)
        if kind not in VERSIONED:
            assert marker_ids(history) == [], path.name
            continue
        first, *later = marker_ids(history)
        assert first == patches.RELEASE_2_PATCH and set(later) <= PATCHES_2X, f"{path.name}: {marker_ids(history)}"
        completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        done = next(i for i, e in enumerate(history.events) if e.event_type == completed)
        first_command = history.events[done + 1]  # the first workflow task's first command
        assert first_command.HasField("marker_recorded_event_attributes"), f"{path.name}: the release is asked first"
    assert kinds >= VERSIONED, kinds
    for path in sorted(HISTORIES.glob("*.json")):
        if path not in FRESH:
            recorded = WorkflowHistory.from_json(path.stem, path.read_text())
            assert patches.RELEASE_2_PATCH not in marker_ids(recorded), path.name
