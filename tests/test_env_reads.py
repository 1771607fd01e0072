"""Every environment variable is read once, by the settings (durable_agent_runner/config/env.py),
and passed down: no other product module reads the environment (issue 32, item 3)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = [
    ROOT / "durable_agent_runner",
    ROOT / "workflows",
    ROOT / "machine",
    ROOT / "activities",
    ROOT / "worker.py",
    ROOT / "client.py",
]
SETTINGS = ROOT / "durable_agent_runner" / "config" / "env.py"
READERS = {"environ", "environb", "getenv", "getenvb"}  # os's ways to read the environment


def sources() -> Iterator[Path]:
    seen: set[Path] = set()
    for top in PRODUCT:
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            real = path.resolve()  # durable_agent_runner/workflows and /activities are links to the top-level ones
            if real not in seen and real != SETTINGS.resolve():
                seen.add(real)
                yield path


def reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each read of the environment in code (not in docstrings or comments): `os.environ`,
    `os.getenv(...)`, and the names imported from os for it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in READERS:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                yield node.lineno, f"os.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix", "nt"):
            for alias in node.names:
                if alias.name in READERS:
                    yield node.lineno, f"from {node.module} import {alias.name}"


def test_only_the_settings_read_the_environment() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sources()
        for line, what in reads(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    ]
    assert not found, "environment read outside config/env.py (add it to the settings and pass it down):\n" + "\n".join(
        found
    )


def test_the_guard_sees_each_way_of_reading() -> None:
    code = "\n".join(
        [
            "import os",
            "from os import environ, getenv",
            'os.environ.get("A")',
            'os.getenv("B")',
            '"""os.environ, in words"""',
        ]
    )
    assert sorted(what for _, what in reads(ast.parse(code))) == [
        "from os import environ",
        "from os import getenv",
        "os.environ",
        "os.getenv",
    ]
