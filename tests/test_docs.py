"""The docs stay a short front door plus a site: README.md is short, every page in docs/ is in
mkdocs.yml's nav (so none is orphaned), and every relative link in README.md leads to a file.
Pure: reads files only. (`mkdocs build --strict` in scripts/test.sh checks the links between pages.)"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 320
# [text](target) or [text](target "title"): the target, up to a space or ")".
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def nav_pages(nav: Any) -> set[str]:
    """Every page named in a mkdocs nav: a list of strings, {title: page} or {title: [nested]}."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return {page for item in nav for page in nav_pages(item)}
    if isinstance(nav, dict):
        return {page for value in nav.values() for page in nav_pages(value)}
    return set()


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES}): move detail to docs/"


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    in_nav = nav_pages(config["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages, "docs/ has no pages"
    assert not pages - in_nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - in_nav)}"
    assert not in_nav - pages, f"nav entries with no page: {sorted(in_nav - pages)}"


def test_every_relative_link_in_the_readme_leads_to_a_file():
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    relative = [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]
    assert relative, "README.md links to no file: has the pattern broken?"
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


# Pages whose python blocks are sketches of code not written yet (signatures without bodies).
PLANS = {"design-2.0.md"}
PYTHON_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```", re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    found = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        if page.name in PLANS:
            continue
        for match in PYTHON_BLOCK.finditer(page.read_text()):
            found.append((page.name, textwrap.dedent(match.group(2))))
    return found


def test_every_python_example_in_the_docs_parses_and_imports_what_exists():
    """An example a reader copies is Python (top-level `await` allowed, as in a notebook or
    `python -m asyncio`), and each name it imports from the package is there: a rename that
    forgets the docs fails here, not in a reader's hands."""
    blocks = python_blocks()
    assert len(blocks) >= 40  # the docs' examples are found at all
    missing = []
    for page, code in blocks:
        tree = compile(code, page, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("durable_agent_runner"):
                module = importlib.import_module(str(node.module))
                missing += [
                    f"{page}: from {node.module} import {a.name}"
                    for a in node.names
                    if not hasattr(module, a.name) and importlib.util.find_spec(f"{node.module}.{a.name}") is None
                ]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("durable_agent_runner") and importlib.util.find_spec(a.name) is None:
                        missing.append(f"{page}: import {a.name}")
    assert not missing, missing


def demo_block(page: Path) -> list[str]:
    """The first fenced block of `page` that shows the demo's output (its `✓ Temporal` line on)."""
    blocks = re.findall(r"```\n(✓ Temporal dev server.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert blocks, f"{page.name} shows no demo output"
    return blocks[0].splitlines()


def test_the_demo_s_output_is_shown_alike_and_as_the_demo_prints_it():
    """README and Getting started show one demo: the same lines, each a line `scripts/demo.sh`
    prints (its ✓ lines and the run's links; the answer and ids vary), so a new line of the
    demo's (the console's, say) is not missing from one of them."""
    shown = demo_block(README)
    assert demo_block(DOCS / "getting-started.md") == shown
    demo = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    said = [line for line in shown if line.startswith(("✓", "run id:", "web UI:", "console:", "status:"))]
    assert len(said) >= 7, said
    for line in said:
        head = re.split(r"[ :]\S*(?:http|\.venv|\.state|demo-)", line, maxsplit=1)[0]
        assert head.strip() and head.split(" (")[0] in demo, f"scripts/demo.sh prints no line like {line!r}"
