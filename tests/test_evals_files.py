"""Datasets in code and in files: what loads, what is refused (one line naming the file, the case
and the field), the bounds, and a save → load round trip of random datasets."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from durable_agent_runner.evals import (
    MAX_CASES,
    Case,
    Contains,
    Dataset,
    DatasetError,
    EvaluatorSpec,
    MaxTurns,
    Regex,
    load_dataset,
    save_dataset,
)

ROOT = Path(__file__).resolve().parent.parent
GOOD = """\
name: weather
evaluators: [EqualsExpected]
cases:
- name: tokyo
  inputs: What is the weather in Tokyo?
  expected_output: sunny
  metadata: {difficulty: easy}
  evaluators:
  - Contains: {value: sunny, case_sensitive: false}
  - {MaxTurns: 3}
- name: typed
  inputs: {city: Paris, days: 2}
"""


def _write(tmp_path, text, name="cases.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _refused(path) -> str:
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(str(path))
    return message


def test_a_file_in_pydantic_evals_layout_loads_with_its_short_forms(tmp_path):
    d = load_dataset(_write(tmp_path, GOOD))
    assert d.name == "weather" and [c.name for c in d.cases] == ["tokyo", "typed"]
    tokyo = d.case("tokyo")
    assert tokyo.expected_output == "sunny" and tokyo.metadata == {"difficulty": "easy"}
    assert tokyo.evaluators == [
        EvaluatorSpec(name="Contains", kwargs={"value": "sunny", "case_sensitive": False}),
        EvaluatorSpec(name="MaxTurns", args=(3,)),
    ]
    assert d.case("typed").inputs == {"city": "Paris", "days": 2}
    assert d.evaluators == [EvaluatorSpec(name="EqualsExpected")]


def test_the_name_defaults_to_the_file_stem_and_unnamed_cases_are_numbered(tmp_path):
    d = load_dataset(_write(tmp_path, "cases: [{inputs: a}, {name: b, inputs: b}, {inputs: c}]", "smoke.yml"))
    assert d.name == "smoke" and [c.name for c in d.cases] == ["Case 1", "b", "Case 3"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("cases: [{name: a, inputs: x, expected: y}]", "case 'a' (#1), field expected: Extra inputs"),
        ("cases: [{name: a, inputs: x}, {name: b}]", "case 'b' (#2), field inputs: Field required"),
        ("cases: [{name: a, inputs: x, metadata: [1]}]", "case 'a' (#1), field metadata"),
        ("cases: [{name: a, inputs: x}]\nowner: me", "field owner: Extra inputs"),
        ("cases: [{name: a, inputs: x}, {name: a, inputs: y}]", "field cases: two cases are named 'a'"),
        ("cases: [{name: a, inputs: x, evaluators: [Nope]}]", "case 'a' (#1), field evaluators[0]: no evaluator named"),
        ("cases: [{name: a, inputs: x, evaluators: [Contians: x]}]", "'Contians' is registered (did you mean Contains"),
        ("cases: [{name: a, inputs: x, evaluators: [{Contains: {valu: x}}]}]", "Contains: valu: Extra inputs"),
        ("cases: [{name: a, inputs: x, evaluators: [{MaxTurns: -1}]}]", "field evaluators[0]: MaxTurns: turns"),
        ("evaluators: [{Regex: '(a+)+$'}]\ncases: []", "field evaluators[0]: Regex: pattern"),
        ("cases: [{name: a, inputs: x, evaluators: [{A: 1, B: 2}]}]", "case 'a' (#1), field evaluators[0]"),
        ("cases: [{name: a, inputs: x}]\nreport_evaluators: [ConfusionMatrix]", "field report_evaluators"),
        ("- just a list", "a dataset is a mapping"),
        ("cases: [{name: a, inputs: x}", "not YAML at line 1"),
        ("cases: [{name: a, inputs: !!python/object:os.system x}]", "not YAML"),
        ("cases: [{name: a, inputs: 2024-01-01}]", "a date is not a JSON value"),
        ("cases: [{name: a, inputs: !!binary aGk=}]", "a bytes is not a JSON value"),
        ("name: a\nname: b\ncases: [{inputs: x}]", "not YAML at line 2: 'name' is given twice"),  # kept 'b' silently
        ("cases:\n- name: a\n  inputs: x\n  inputs: y\n", "not YAML at line 4: 'inputs' is given twice"),
        ("base: &b {inputs: x}\ncases: [{<<: *b, name: a, inputs: y}]", "field base: Extra inputs"),  # merge, override
    ],
)
def test_bad_files_are_refused_in_one_line_naming_the_case_and_field(tmp_path, text, where):
    refused = _refused(_write(tmp_path, text))
    assert where in refused and "Value error" not in refused


def test_bad_json_files_are_refused_through_the_bounded_parser(tmp_path):
    assert "field cases[0]" not in _refused(_write(tmp_path, '{"cases": [', "d.json"))
    deep = '{"cases": [{"name": "a", "inputs": ' + "[" * 100 + "]" * 100 + "}]}"
    assert "nested deeper than 64 levels" in _refused(_write(tmp_path, deep, "deep.json"))
    assert "NaN" in _refused(_write(tmp_path, '{"cases": [{"name": "a", "inputs": NaN}]}', "nan.json"))
    twice = '{"name": "a", "cases": [{"name": "a", "inputs": "x", "inputs": "y"}]}'
    assert "not valid: 'inputs' is given twice in one object" in _refused(_write(tmp_path, twice, "twice.json"))


def test_size_count_and_alias_bombs_are_bounded(tmp_path):
    big = tmp_path / "big.json"
    with big.open("w") as f:
        f.write('{"cases": [{"name": "a", "inputs": "')
        f.write("x" * (16 * 1024 * 1024))
        f.write('"}]}')
    assert "larger than 16 MiB" in _refused(big)
    many = {"cases": [{"name": f"c{i}", "inputs": "x"} for i in range(MAX_CASES + 1)]}
    assert "more than 10,000 cases" in _refused(_write(tmp_path, json.dumps(many), "many.json"))
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)},"
        f" *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    assert "more than 100,000 values" in _refused(_write(tmp_path, bomb + "cases: []\n", "bomb.yaml"))
    with pytest.raises(DatasetError, match="cannot tell the format"):
        load_dataset(tmp_path / "x.txt")
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "missing.yaml")


def test_cases_in_code_take_evaluator_instances_and_refuse_duplicates_and_unknown_fields():
    case = Case(name="a", inputs="hi", evaluators=[Contains(value="x"), MaxTurns(turns=2), "EqualsExpected"])
    assert [s.model_dump() for s in case.evaluators] == [{"Contains": "x"}, {"MaxTurns": 2}, "EqualsExpected"]
    with pytest.raises(ValueError, match="two cases are named 'a'"):
        Dataset(name="d", cases=[case, case])
    with pytest.raises(ValueError, match="Extra inputs"):
        Case.model_validate({"name": "a", "inputs": "x", "expect": "y"})
    # A case is a payload: its JSON gives the same case back, evaluators in their short forms.
    d = Dataset(name="d", cases=[case], evaluators=[Regex(pattern="^h", case_sensitive=False)])
    assert Dataset.model_validate_json(d.model_dump_json()) == d


_names = st.text(string.ascii_letters + string.digits + " _-", min_size=1, max_size=20).filter(str.strip)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_specs = st.sampled_from(
    [
        EvaluatorSpec(name="EqualsExpected"),
        EvaluatorSpec(name="Contains", args=("x",)),
        EvaluatorSpec(name="Contains", kwargs={"value": "y", "case_sensitive": False}),
        EvaluatorSpec(name="Equals", kwargs={"value": {"a": [1, None]}}),
        EvaluatorSpec(name="CalledTool", kwargs={"name": "get_weather", "arguments": {"city": "Tokyo"}}),
        EvaluatorSpec(name="MaxCostUSD", args=(0.5,)),
    ]
)


@st.composite
def _datasets(draw):
    names = draw(st.lists(_names, min_size=0, max_size=5, unique=True))
    cases = [
        Case(
            name=n,
            inputs=draw(st.text(max_size=40) | _json.filter(lambda v: v is not None)),
            expected_output=draw(_json),
            metadata=draw(st.dictionaries(st.text(max_size=8), _json, max_size=3)),
            evaluators=draw(st.lists(_specs, max_size=3)),
        )
        for n in names
    ]
    return Dataset(name=draw(_names), cases=cases, evaluators=draw(st.lists(_specs, max_size=2)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dataset=_datasets(), fmt=st.sampled_from(["yaml", "json"]))
def test_save_then_load_gives_the_same_dataset(tmp_path, dataset, fmt):
    path = tmp_path / f"d.{fmt}"
    save_dataset(dataset, path)
    assert load_dataset(path) == dataset
    if fmt == "yaml":  # plain YAML: no tags a reader needs our code for
        assert "!!" not in path.read_text() and yaml.safe_load(path.read_text())["name"] == dataset.name


def test_a_dataset_that_cannot_be_written_is_one_line_naming_the_file(tmp_path):
    """Before: `eval add-case /proc/x.yaml RUN` printed `FileNotFoundError: [Errno 2] …`, exit 1."""
    dataset = Dataset(name="d", cases=[Case(name="c", inputs="hi")])
    for path in (tmp_path / "no-such-folder" / "d.yaml", tmp_path):
        with pytest.raises(DatasetError, match=f"^{path}: cannot write: "):
            save_dataset(dataset, path, "yaml")


def test_the_docs_example_runs_and_its_error_line_is_what_a_user_sees(tmp_path, capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "evals.md").read_text()
    example = page.split("<!-- evals-example: start -->\n```python\n")[1].split("```\n<!-- evals-example: end -->")[0]
    exec(compile(example, "docs/evals.md", "exec"), {"__name__": "evals_docs_example"})
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "MaxTurns True turns 2 (at most 4)",
        "Contains True ",
        "says_city True looked for Tokyo",
        'CalledTool True get_weather with {"city": "Tokyo"} called 1 times (want 1..)',
    ]
    path = _write(tmp_path, "cases:\n- name: tokyo\n  inputs: q\n  evaluators: [{Contains: {valu: sunny}}]\n")
    shown = "cases.yaml: case 'tokyo' (#1), field evaluators[0]: Contains: valu: Extra inputs are not permitted"
    assert _refused(path).endswith(shown) and shown in page


_KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5), st.lists(_KEYS, min_size=1, max_size=5))
def test_a_mapping_reads_back_as_written_and_a_key_written_twice_is_refused(value, keys):
    """config/files.yaml_once: what safe_dump writes reads back whole, as safe_load reads it; a
    mapping written with one key twice (hand-written YAML) is refused naming the key and its line."""
    import yaml

    from durable_agent_runner.config.files import yaml_once

    text = yaml.safe_dump(value, sort_keys=False)
    assert yaml_once(text) == yaml.safe_load(text) == value
    written = "".join(f"{k}: {i}\n" for i, k in enumerate(keys))
    twice = next(((i, k) for i, k in enumerate(keys) if k in keys[:i]), None)
    if twice is None:
        assert yaml_once(written) == {k: i for i, k in enumerate(keys)}
    else:
        with pytest.raises(yaml.YAMLError) as caught:
            yaml_once(written)
        assert caught.value.problem == f"{twice[1]!r} is given twice"  # type: ignore[attr-defined]
        assert caught.value.problem_mark.line == twice[0]  # type: ignore[attr-defined]


def test_add_case_keeps_a_hand_written_file_s_comments_and_layout(tmp_path):
    """`eval add-case` into a person's YAML file appends the case and leaves every line they
    wrote as it was (the shipped example's comments, its order, its quoting), where the whole
    file was written again without its comments."""
    from durable_agent_runner.client.eval_cases import add_case

    path = tmp_path / "weather.yaml"
    written = (ROOT / "examples" / "weather_eval.yaml").read_text(encoding="utf-8")
    path.write_text(written, encoding="utf-8")
    grown = add_case(path, Case(name="incident 7", inputs="Weather in Oslo?", expected_output="cold"))
    text = path.read_text(encoding="utf-8")
    assert text.startswith(written) and "# The demo agent's eval" in text
    assert [c.name for c in grown.cases][-1] == "incident 7" and load_dataset(path) == grown
    # a new file's `cases: []` opens the block, its comments kept
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(
        "# incidents of the week\nname: incidents\ncases: []  # from production\nevaluators: [EqualsExpected]\n"
    )
    started = add_case(fresh, Case(name="one", inputs="hi", expected_output="ho"))
    assert fresh.read_text().startswith(
        "# incidents of the week\nname: incidents\ncases:  # from production\n- name: one\n"
    )
    assert load_dataset(fresh) == started and "evaluators: [EqualsExpected]" in fresh.read_text()
    # an inline list of cases has no block to extend: written whole, as before (and still read back)
    inline = tmp_path / "inline.yaml"
    inline.write_text("name: x  # mine\ncases: [{name: a, inputs: hi}]\n", encoding="utf-8")
    assert load_dataset(inline).cases[0].name == "a"
    again = add_case(inline, Case(name="b", inputs="ho"))
    assert load_dataset(inline) == again and [c.name for c in again.cases] == ["a", "b"]


@settings(max_examples=30, deadline=None)
@given(
    dataset=_datasets().filter(lambda d: bool(d.cases)),
    case=_datasets().filter(lambda d: bool(d.cases)).map(lambda d: d.cases[0]),
    indent=st.sampled_from([0, 2, 4]),
    comments=st.lists(st.sampled_from(["# a note", "  # an indented note", ""]), max_size=3),
)
def test_a_case_appended_to_a_yaml_file_reads_back_and_keeps_each_line(dataset, case, indent, comments):
    """Whatever the cases and however the file indents them, with comments and blank lines after
    them: the text one case longer reads back as the dataset with that case last, and holds every
    line it held; or it is not extended (None) and the file is written whole."""
    from durable_agent_runner.evals.files import dataset_to_value, with_case_appended

    assume(case.name not in {c.name for c in dataset.cases})  # a name given twice is refused before
    value = dataset_to_value(dataset)
    head = yaml.safe_dump({"name": value["name"]}, sort_keys=False)  # escaped: U+0085 would not read back
    body = yaml.safe_dump(value["cases"], sort_keys=False)
    cases = "".join(" " * indent + line + "\n" for line in body.splitlines())
    rest = (
        yaml.safe_dump({k: v for k, v in value.items() if k == "evaluators"}, sort_keys=False)
        if "evaluators" in value
        else ""
    )
    text = head + "cases:  # the cases\n" + cases + "".join(c + "\n" for c in comments) + rest
    assert yaml.safe_load(text) == value  # the layout itself is valid YAML
    grown = with_case_appended(text, case)
    if grown is None:
        return
    expected = Dataset(name=dataset.name, cases=[*dataset.cases, case], evaluators=dataset.evaluators)
    assert dataset_from_text(grown) == expected
    kept = grown.splitlines()
    assert all(line in kept for line in text.splitlines())


def dataset_from_text(text: str) -> Dataset:
    from durable_agent_runner.evals.files import dataset_from_value

    return dataset_from_value(yaml.safe_load(text), "test", "test")
