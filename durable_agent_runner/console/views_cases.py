"""The run page's "Make a case" form: the run, before model call N, into a dataset file of the
console's datasets folder (`client.py console --datasets DIR`), as `client.py eval add-case` does."""

from __future__ import annotations

import re
from pathlib import Path

from durable_agent_runner.console.security import Refused

# A dataset's name in the form: a file name in the datasets folder, never a path.
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def case_form(base: str, turn: int) -> str:
    return f"""<form class="act" method="post" action="{base}/case"><b>Make a case</b>
<label>Dataset <input name="dataset" size="14" value="incidents" pattern="{DATASET_NAME.pattern}" required></label>
<label>before model call <input name="at_turn" size="4" value="{max(turn, 1)}" inputmode="numeric"></label>
<label>Expected <input name="expected" maxlength="4000"></label><button>Add case</button>
<span class="msg" role="status"></span></form>"""


def dataset_path(folder: Path, name: str) -> Path:
    """`folder/NAME.yaml` for a name the form sent; Refused (400) for anything but a plain name."""
    name = name.strip().removesuffix(".yaml")
    if not DATASET_NAME.fullmatch(name) or ".." in name:
        raise Refused(400, "dataset: a name of letters, digits, '_', '-' and '.', not a path")
    return folder / f"{name}.yaml"
