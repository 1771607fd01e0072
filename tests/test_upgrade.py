"""Runs started on the last 1.x release finish on this code (tests/upgrade_check.py): a run waiting
for approval and a session, started by a worker of 1.4.9's code, are listed by `--started-on-1x`,
finish on a worker of this code on their 1.x path, and the session becomes 2.0 when it continues
as new."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import upgrade_check

pytestmark = pytest.mark.server  # it starts a dev server and two workers of its own


def have(rev: str) -> bool:
    found = subprocess.run(["git", "-C", str(upgrade_check.ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], check=False)
    return found.returncode == 0


@pytest.mark.skipif(not have(upgrade_check.LAST_1X), reason="the repo's history (1.4.9's commit) is not here")
async def test_runs_started_on_1x_finish_on_2_0_and_a_session_moves_to_2_0_when_it_continues(tmp_path: Path):
    old = tmp_path / "code-1x"
    subprocess.run(
        ["git", "-C", str(upgrade_check.ROOT), "worktree", "add", "--detach", str(old), upgrade_check.LAST_1X],
        check=True,
        capture_output=True,
    )
    try:
        await upgrade_check.check(old, tmp_path)
    finally:
        subprocess.run(["git", "-C", str(upgrade_check.ROOT), "worktree", "remove", "--force", str(old)], check=False)
