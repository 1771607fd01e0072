"""The layout is a contract: what is installed, which way imports go, how large a module grows."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
OURS = ("durable_agent_runner",)  # what is installed at the top level (the commands are its scripts)
SHELLS = ("worker", "client")  # the repo's few-line shells over the package's commands
ENGINE = ("workflows", "activities", "machine")  # the repo's top-level folders, installed inside durable_agent_runner
MAX_LINES = 420  # "a module a reader holds in mind": about 400 lines


def test_the_installed_top_level_name_is_the_package_alone():
    """A user's project keeps its own `workflows` and `activities`: ours install inside the package."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = find_packages(str(ROOT), include=setuptools["packages"]["find"]["include"])
    top = {p.split(".")[0] for p in packages} | set(setuptools["py-modules"])
    assert top == set(OURS)
    assert {"durable_agent_runner.workflows", "durable_agent_runner.activities"} <= set(packages)
    assert "durable_agent_runner.testing.fake_llm" in packages and "durable_agent_runner.cli" in packages
    for name in ENGINE:  # the folders at the top of the repo are the code; the package links to them
        assert (ROOT / "durable_agent_runner" / name).resolve() == ROOT / name


def test_nothing_imports_the_engine_by_a_top_level_name():
    """`import workflows` would load a second copy of every class; the engine's __init__ refuses it."""
    for path in [
        *ROOT.glob("*.py"),
        *(p for d in ("durable_agent_runner", *ENGINE, "tests", "examples", "bench") for p in (ROOT / d).rglob("*.py")),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            assert not [n for n in names if n.split(".")[0] in ENGINE], f"{path}: imports {names}"


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.glob("*.py"):
        if path.stem in OURS + SHELLS:
            found[path.stem] = path
    for package in ("durable_agent_runner", *ENGINE):
        for path in (ROOT / package).rglob("*.py"):  # rglob does not follow the package's links
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[0] in ENGINE:
                parts = ("durable_agent_runner", *parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of ours that `module` imports when it is imported (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            out |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
            if base in known and not all(f"{base}.{a.name}" in known for a in node.names):
                out.add(base)
    out.discard(module)
    return out


def test_no_module_of_ours_imports_itself_back_through_others():
    modules = _modules()
    known = set(modules)
    graph = {m: _imports(p, m, known) for m, p in modules.items()}
    # Tarjan's strongly connected components: any of more than one module is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_no_module_grows_past_what_a_reader_holds_in_mind():
    long = {
        str(p.relative_to(ROOT)): n for p in _modules().values() if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_workflow_is_one_class_with_no_chain_in_one_short_file():
    """Issue 32: the run's workflow is one class with no inheritance, in a file of at most 400
    lines; its parts (workflows/) are held, not inherited. A class of the interpreter that
    inherited another would bring the chain back."""
    from durable_agent_runner.workflows.agent import AgentRun

    assert AgentRun.__bases__ == (object,)
    assert len((ROOT / "workflows" / "agent.py").read_text().splitlines()) <= 400
    inherits = {}
    for path in (ROOT / "workflows").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.bases:
                inherits[f"{path.name}:{node.name}"] = [ast.unparse(b) for b in node.bases]
    # Only plain data and exceptions may have a base: no class of the interpreter builds on another.
    allowed = {"steps.py:FallingBack": ["Exception"], "notify_steps.py:Wait": ["notify.About"]}
    assert {k: v for k, v in inherits.items() if k not in allowed} == {}, inherits


def test_the_cli_starts_without_loading_the_interpreter_or_the_agent_kit():
    """`client.py status` only reads types and rules: importing the CLI must not load the workflow
    classes (workflows/__init__.py gives them on first use), the Agent class, the MCP tools, the
    web server, the evaluators and jsonschema (evals/__init__.py gives them on first use) or, with
    tracing off, OpenTelemetry.
    Those were most of its ~1.6 s start-up, and the suite runs client.py hundreds of times."""
    heavy = [
        "durable_agent_runner.workflows.agent",
        "durable_agent_runner.agents.agent",
        "durable_agent_runner.activities.mcp_tools",
        "durable_agent_runner.telemetry",  # loaded when OTEL_* turns tracing on
        "uvicorn",  # loaded by `console` and `serve-hooks`
        "starlette",
        "durable_agent_runner.evals.evaluators",  # loaded by `eval run`, with a dataset's evaluators
        "jsonschema",
    ]
    probe = f"import sys, durable_agent_runner.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out
    from durable_agent_runner.workflows import AgentRun  # and the class is still there on first use

    assert AgentRun.__name__ == "AgentRun"


MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard"}


def _the_runs_state(node: ast.expr) -> bool:
    """Whether an expression reaches into the run's state: through an attribute `s` / `_s` (the
    workflow's `self._s`, a part's `self.s` or `self.steps.s`) or a local `s` or `session`."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr in ("s", "_s"):
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("s", "session")


def test_the_workflow_writes_nothing_of_the_runs_state_itself():
    """Issue 32: the workflow carries out steps and feeds back what happened; every change to the
    run's state is the machine's (a function or method of machine/). No module of the agent run's
    interpreter assigns to the state, or appends to, pops or updates what it holds."""
    writes = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name in ("eval_run.py", "score_run.py"):  # other workflows, with state of their own
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                targets = [node.func.value]
            for target in targets:
                for part in target.elts if isinstance(target, ast.Tuple) else [target]:
                    # Into the state: `s.phase = …`, `s.marks[3] = …` (binding `self.s = RunState()` holds it)
                    if isinstance(part, ast.Attribute | ast.Subscript) and _the_runs_state(part.value):
                        writes.append(f"{path.name}:{node.lineno}: {ast.unparse(part)}")
                    elif isinstance(node, ast.Call) and _the_runs_state(part):
                        writes.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}")
    assert not writes, writes


# The rules that decide a run's path, or write what a step did into the run: only the run machine
# (machine/run.py) calls them. The workflow feeds back what happened and carries out what it says.
RUN_MACHINE_RULES = {
    "turn": {"Turn"},
    "conversation": {"between", "answered", "failed", "ended", "steer"},
    "control": {"paused", "went_on", "gave_up", "breakpoint_ended"},
    "handoff": {"plan", "handed_off"},
    "memory": {"apply", "plan"},
    "drafts": {"took"},
    "progress": {"prompted", "answered", "live_tools"},
}


def test_the_workflow_decides_nothing_the_run_machine_decides():
    """Issue 32: one pure machine decides every step of a run. The workflow calls the run
    machine's `step` (and `record` for a call's transition) and nothing under it: no turn of its
    own, no session loop, no pause, handoff, compaction or breakpoint taken by hand."""
    calls = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name in ("eval_run.py", "score_run.py"):  # other workflows
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                func = node.func
                owner = ast.unparse(func.value).split(".")[-1] if isinstance(func, ast.Attribute) else ""
                name = func.attr if isinstance(func, ast.Attribute) else func.id
                owner = {"turn_machine": "turn"}.get(owner, owner)
                if name in RUN_MACHINE_RULES.get(owner, set()) or (not owner and name == "Turn"):
                    calls.append(f"{path.name}:{node.lineno} {ast.unparse(func)}")
    assert calls == [], calls


KEPT_RECORDS = {"session", "approvals", "doubts", "questions", "outside"}


def test_no_wait_of_the_workflow_holds_a_record_of_the_books_that_a_kept_state_replaces():
    """The machine's writes are values (machine/drafts.py): a record of the books it wrote is a new
    object once kept. An async step that bound one to a name would read the old one after a wait
    (a session's wait for a message did, and never woke: design-2.0.md, 1.4.9). Every wait reads
    the live books, `s.session`, each time."""
    held = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name in ("eval_run.py", "score_run.py"):  # other workflows
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    value = node.value
                    if isinstance(value, ast.Attribute) and value.attr in KEPT_RECORDS and _the_runs_state(value.value):
                        held.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert held == [], held


WORDS = {"decided", "resolved_doubt", "failed", "cancelled", "ended"}  # machine/progress.py's rules that tell


def test_the_interpreter_tells_no_event_of_its_own():
    """What reaches the run at the door (a decision, a resolution, a message, a pause, a resume,
    an edit), a guardrail's verdicts, a round of notifications and the run's end are each taken
    whole by a rule of the machine (machine/control.py, rules.py, notify.py, progress.py): no
    module of the agent run's interpreter tells an event or says words itself, so the pure driver,
    which calls the same rules, tells the same story. (The phases the machine decides, the
    interpreter sets: `set_phase`.)"""
    said = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name in ("eval_run.py", "score_run.py"):  # other workflows
            continue
        tree = ast.parse(path.read_text())
        taken = {  # a rule handed to `Steps.take` writes a draft: the machine's write, not the interpreter's
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "take"
            for arg in node.args
            for inner in ast.walk(arg)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and id(node) not in taken:
                owner = ast.unparse(node.func.value)
                if node.func.attr in ("event", "say", "abandon") or (owner == "progress" and node.func.attr in WORDS):
                    said.append(f"{path.name}:{node.lineno} {ast.unparse(node.func)}")
    assert said == [], said
