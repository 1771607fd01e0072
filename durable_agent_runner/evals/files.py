"""Datasets in YAML or JSON files, in pydantic-evals' case-file layout:

    name: weather                   # default: the file's stem
    evaluators: [EqualsExpected]    # every case's
    cases:
    - name: tokyo
      inputs: What is the weather in Tokyo?
      expected_output: sunny
      metadata: {difficulty: easy}
      evaluators:
      - Contains: {value: sunny, case_sensitive: false}

A file is outside data: bounded in size, YAML read with safe_load only (no tags that build
objects), JSON through the project's bounded parser, and every refusal one `DatasetError` line
naming the file, the case and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from durable_agent_runner.config.files import repeated_key, yaml_once
from durable_agent_runner.machine.bounds import OutsideDataError, check_value, parse_json
from durable_agent_runner.machine.texts import said

from .cases import MAX_CASES, Case, Dataset
from .context import one_line
from .registry import EvaluatorSpec, EvaluatorSpecError, build, first_error

MAX_FILE_BYTES = 16 * 1024 * 1024
_MAX_DEPTH = 64
Format = Literal["yaml", "json"]


class DatasetError(ValueError):
    """A dataset file refused: one line naming the file, the case and the field."""


def _format(path: Path, fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".json":
        return "json"
    raise DatasetError(f"{path}: cannot tell the format from {suffix or 'no suffix'!r}: use .yaml, .yml or .json")


def _read(path: Path, fmt: Format) -> object:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise DatasetError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise DatasetError(f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path}: not UTF-8 (at byte {err.start})") from None
    try:
        if fmt == "json":
            value = parse_json(text, max_chars=MAX_FILE_BYTES, max_depth=_MAX_DEPTH, max_items=None)
            if (key := repeated_key(text)) is not None:  # JSON keeps the last without a word
                raise DatasetError(f"{path}: not valid: {key!r} is given twice in one object")
            return value
        value = yaml_once(text)  # a key given twice is refused
        # safe_load builds only plain values, but also dates, bytes and sets, and aliases can
        # multiply a small file into a huge value: the project's bounds check what it built.
        check_value(value, max_chars=MAX_FILE_BYTES, max_depth=_MAX_DEPTH)
        return value
    except OutsideDataError as err:
        raise DatasetError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise DatasetError(one_line(f"{path}: not YAML{where}: {problem}", 300)) from None
    except RecursionError:
        raise DatasetError(f"{path}: nested deeper than {_MAX_DEPTH} levels") from None


def _where(data: object, loc: tuple[int | str, ...]) -> str:
    """'case 'name' (#3), field evaluators[0]' for a pydantic error location."""
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        cases = data.get("cases") if isinstance(data, dict) else None
        case = cases[loc[1]] if isinstance(cases, list) and loc[1] < len(cases) else None
        name = case.get("name") if isinstance(case, dict) else None
        label = f"case {name!r} (#{loc[1] + 1})" if isinstance(name, str) else f"case #{loc[1] + 1}"
        return f"{label}, field {_field(loc[2:]) or '(the case)'}"
    return f"field {_field(loc) or '(the dataset)'}"


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def dataset_from_value(data: object, source: str, default_name: str) -> Dataset:
    """A dataset from a value read from `source` (a file's name, for the error). Raises DatasetError."""
    if not isinstance(data, dict):
        raise DatasetError(f"{source}: a dataset is a mapping with a `cases` list, not a {type(data).__name__}")
    data = {"name": default_name, **data} if data.get("name") is None else dict(data)
    data.pop("$schema", None)  # pydantic-evals' pointer to its JSON schema of the file
    if data.get("report_evaluators"):
        raise DatasetError(f"{source}: field report_evaluators: report evaluators are not supported (yet)")
    data.pop("report_evaluators", None)
    if isinstance(data.get("cases"), list) and len(data["cases"]) > MAX_CASES:
        raise DatasetError(f"{source}: more than {MAX_CASES:,} cases")
    try:
        dataset = Dataset.model_validate(data)
    except ValidationError as err:
        first = first_error(err)
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        msg = one_line(f"{source}: {_where(data, first['loc'])}: {said(first)}{more}", 500)
        raise DatasetError(msg) from None
    _check_specs(dataset, source)
    return dataset


def _check_specs(dataset: Dataset, source: str) -> None:
    """Every evaluator a file names is registered and takes the arguments given, at load."""

    def check(spec: EvaluatorSpec, where: str) -> None:
        try:
            build(spec)
        except EvaluatorSpecError as err:
            raise DatasetError(one_line(f"{source}: {where}: {err}", 500)) from None

    for i, spec in enumerate(dataset.evaluators):
        check(spec, f"field evaluators[{i}]")
    for n, case in enumerate(dataset.cases, 1):
        for i, spec in enumerate(case.evaluators):
            check(spec, f"case {case.name!r} (#{n}), field evaluators[{i}]")


def load_dataset(path: str | Path, fmt: Format | None = None) -> Dataset:
    """The dataset in a YAML or JSON file (the format from its suffix unless `fmt`). Raises
    DatasetError, one line naming the file, and the case and field when one is at fault."""
    path = Path(path)
    kind = _format(path, fmt)
    return dataset_from_value(_read(path, kind), str(path), path.stem)


def case_to_value(case: Case) -> dict[str, Any]:
    """One case in the file layout: empty fields left out, evaluators in their short forms."""
    c: dict[str, Any] = {"name": case.name, "inputs": case.inputs}
    if case.expected_output is not None:
        c["expected_output"] = case.expected_output
    if case.metadata:
        c["metadata"] = case.metadata
    if case.evaluators:
        c["evaluators"] = [s.model_dump(mode="json") for s in case.evaluators]
    if case.from_run is not None:
        c["from_run"] = case.from_run.model_dump(mode="json")
    return c


def dataset_to_value(dataset: Dataset) -> dict[str, Any]:
    """The dataset in the file layout: empty fields left out, evaluators in their short forms."""
    out: dict[str, Any] = {"name": dataset.name}
    out["cases"] = [case_to_value(case) for case in dataset.cases]
    if dataset.evaluators:
        out["evaluators"] = [s.model_dump(mode="json") for s in dataset.evaluators]
    return out


def save_dataset(dataset: Dataset, path: str | Path, fmt: Format | None = None) -> None:
    """Write `dataset` to a YAML or JSON file (the format from its suffix unless `fmt`)."""
    path = Path(path)
    value = dataset_to_value(dataset)
    if _format(path, fmt) == "yaml":
        text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
        # PyYAML writes some line breaks (U+0085, U+2028) raw, and reads them back as breaks:
        # when the readable form does not read back the same, the escaped form is written.
        if yaml.safe_load(text) != value:
            text = yaml.safe_dump(value, sort_keys=False, allow_unicode=False)
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    write_text(path, text)


def write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise DatasetError(f"{path}: cannot write: {err.strerror or err}") from None


def yaml_file(path: Path) -> bool:
    return _format(path, None) == "yaml"


CASES_KEY = re.compile(r"^cases:[ \t]*(?:#.*)?$", re.M)  # `cases:` opening a block, at the top level
CASES_EMPTY = re.compile(r"^cases:[ \t]*\[\][ \t]*(#.*)?$", re.M)


def with_case_appended(text: str, case: Case) -> str | None:
    """A YAML dataset's `text` with `case` after its last case, every other line as written
    (comments, order, quoting; `cases: []` opens a block); None when its layout is not one this
    extends (cases listed inline, say), or when the result would not read back as exactly that:
    then the whole file is written again instead (`save_dataset`)."""
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(expected, dict) or not isinstance(expected.get("cases"), list):
        return None
    expected["cases"].append(case_to_value(case))
    empty = CASES_EMPTY.search(text)  # `cases: []`, as a new file begins: the block it opens
    if empty is not None:
        text = text[: empty.start()] + "cases:" + (f"  {empty[1]}" if empty[1] else "") + text[empty.end() :]
    opened = CASES_KEY.search(text)
    if opened is None:
        return None
    lines = text[opened.end() :].split("\n")[1:]
    block = 0  # lines of the block, up to its last case's last line
    indent: str | None = None
    for i, line in enumerate(lines):
        if line.strip() and not line.startswith((" ", "\t", "-", "#")):
            break  # the next top-level key
        if line.strip() and not line.lstrip().startswith("#"):
            block = i + 1
            if indent is None and line.lstrip().startswith("- "):
                indent = line[: len(line) - len(line.lstrip())]
    if indent is None and empty is None:
        return None
    indent = indent or ""
    head = text[: opened.end()] + "\n" + "".join(line + "\n" for line in lines[:block])
    for readable in (True, False):  # as save_dataset: escaped when the readable form does not read back
        item = yaml.safe_dump([case_to_value(case)], sort_keys=False, allow_unicode=readable)
        grown = head + "".join(indent + line + "\n" for line in item.splitlines()) + "\n".join(lines[block:])
        try:
            if yaml.safe_load(grown) == expected:
                return grown
        except yaml.YAMLError:
            pass
    return None
