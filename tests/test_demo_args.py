"""`bash scripts/demo.sh`'s arguments, checked before it installs or starts anything.

Pure: each case ends before the virtualenv is made or a server starts (the fresh-clone proof runs
the demo itself)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    # VENV points nowhere: had the demo gone on to install, it would fail, not take minutes.
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "VENV": "/nonexistent/venv"}
    return subprocess.run(
        ["bash", "scripts/demo.sh", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )


def test_help_prints_the_usage_and_starts_nothing() -> None:
    done = demo("--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("One command from a fresh clone to a finished agent run")
    assert "--example support_team" in done.stdout and "bash scripts/stop.sh" in done.stdout


@pytest.mark.parametrize("option", ["--no-run", "-x", "--exmaple"])
def test_an_unknown_option_is_one_line_not_a_prompt(option: str) -> None:
    """Before, `--no-run` became the prompt: the demo started every server, then the run failed
    on `unrecognized arguments: --no-run`."""
    done = demo(option, "support_team")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"error: unknown option '{option}' (known: --example NAME, --model MODULE:ATTR --agent NAME, --help; "
        "a prompt that starts with '-' goes after --)"
    )


def test_an_unknown_example_is_refused_before_anything_starts() -> None:
    done = demo("--example", "nope")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: unknown example 'nope'; known: support_team, mcp_agent"
