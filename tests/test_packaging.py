"""What installing the package gives: one top-level name in site-packages (no `client` or `worker`
module to clash with a user's own), and the CLI and a worker as commands that run the same code
as the repo's `client.py` and `worker.py`."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import durable_agent_runner

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_the_wheel_installs_the_package_alone_and_declares_the_commands(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"durable_agent_runner"}, top  # no client.py, worker.py, workflows or activities
    assert "durable_agent_runner/__main__.py" in names and "durable_agent_runner/cli/main.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "durable-agent-runner = durable_agent_runner.cli.main:script" in scripts
    assert "durable-agent-runner-worker = durable_agent_runner.worker.main:script" in scripts


def test_the_command_the_module_and_the_repo_shell_are_one_cli(tmp_path: Path) -> None:
    """Run from outside the repo, so only what is installed can answer."""
    ways = {
        "durable-agent-runner": [str(BIN / "durable-agent-runner")],
        "python -m durable_agent_runner": [sys.executable, "-m", "durable_agent_runner"],
        "client.py": [sys.executable, str(ROOT / "client.py")],
    }
    helps = {}
    for prog, command in ways.items():
        done = subprocess.run([*command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith(f"usage: {prog} "), (prog, done.stderr)
        helps[prog] = " ".join(done.stdout.split("positional arguments:")[1].split())  # the commands
    assert len(set(helps.values())) == 1 and "export" in helps["client.py"] and "console" in helps["client.py"]
    bad = subprocess.run(
        [*ways["durable-agent-runner"], "list", "--limit", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("durable-agent-runner: error: argument --limit"), bad.stderr


def test_the_worker_command_and_module_run_the_repos_worker(tmp_path: Path) -> None:
    for prog, command in {
        "durable-agent-runner-worker": [str(BIN / "durable-agent-runner-worker")],
        "python -m durable_agent_runner.worker": [sys.executable, "-m", "durable_agent_runner.worker"],
    }.items():
        done = subprocess.run([*command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith(f"usage: {prog} "), (prog, done.stderr)
        assert "--tools MODULE" in done.stdout
        # Which release a worker runs: what to check before a marker's run needs a newer one (docs/patches.md)
        version = subprocess.run([*command, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert version.stdout == f"durable-agent-runner {durable_agent_runner.__version__}\n", (prog, version)
