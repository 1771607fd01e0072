"""pydantic-evals' case files load here as they are, and ours load in pydantic-evals, written and
read by its own `Dataset.to_file` / `from_file` (a dev-only dependency: never the runtime path)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_evals import Case as PECase
from pydantic_evals import Dataset as PEDataset
from pydantic_evals import evaluators as pe

from durable_agent_runner.evals import (
    Case,
    Contains,
    Dataset,
    Equals,
    EqualsExpected,
    EvaluatorContext,
    IsInstance,
    LLMJudge,
    MaxDuration,
    RunFacts,
    evaluate_case,
    load_dataset,
    save_dataset,
)

THEIRS = PEDataset[object, object, dict](
    name="weather",
    cases=[
        PECase(
            name="tokyo",
            inputs="What is the weather in Tokyo?",
            expected_output="sunny",
            metadata={"difficulty": "easy"},
            evaluators=(
                pe.Contains("sunny", case_sensitive=False),
                pe.Equals({"a": 1}),
                pe.LLMJudge(rubric="Says the weather", include_input=True, score={"include_reason": False}),
            ),
        ),
        PECase(inputs={"city": "Paris", "days": 2}),
    ],
    evaluators=[pe.EqualsExpected(), pe.MaxDuration(2.5), pe.IsInstance("str"), pe.MaxDuration(timedelta(minutes=1))],
)


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_a_file_pydantic_evals_wrote_loads_here(tmp_path, suffix):
    path = tmp_path / f"weather.{suffix}"
    THEIRS.to_file(path)  # with its `$schema` reference and its JSON schema file beside it
    assert (tmp_path / "weather_schema.json").exists()
    ours = load_dataset(path)
    assert ours.name == "weather" and [c.name for c in ours.cases] == ["tokyo", "Case 2"]
    tokyo = ours.case("tokyo")
    assert (tokyo.inputs, tokyo.expected_output, tokyo.metadata) == (
        "What is the weather in Tokyo?",
        "sunny",
        {"difficulty": "easy"},
    )
    assert ours.case("Case 2").inputs == {"city": "Paris", "days": 2} and ours.case("Case 2").metadata == {}
    assert [s.model_dump() for s in tokyo.evaluators] == [
        {"Contains": {"value": "sunny", "case_sensitive": False}},
        {"Equals": {"value": {"a": 1}}},
        {"LLMJudge": {"rubric": "Says the weather", "include_input": True, "score": {"include_reason": False}}},
    ]
    assert [s.model_dump() for s in ours.evaluators] == [
        "EqualsExpected",
        {"MaxDuration": 2.5},
        {"IsInstance": "str"},
        {"MaxDuration": "PT1M"},  # a timedelta, as pydantic-evals writes it: read as 60 seconds
    ]
    ctx = EvaluatorContext(case_name="tokyo", inputs=tokyo.inputs, output="Sunny", expected_output="sunny")
    got = {r.name: r.value for r in evaluate_case(tokyo, ours, ctx) if r.error is None}
    assert got == {"EqualsExpected": False, "MaxDuration": True, "IsInstance": True, "Contains": True, "Equals": False}
    ctx = ctx.model_copy(update={"facts": RunFacts(seconds=30)})
    assert [r.value for r in evaluate_case(tokyo, ours, ctx) if r.name == "MaxDuration"] == [False, True]


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_a_file_saved_here_loads_in_pydantic_evals(tmp_path, suffix):
    ours = Dataset(
        name="weather",
        cases=[
            Case(
                name="tokyo",
                inputs="weather?",
                expected_output="sunny",
                metadata={"k": [1, 2]},
                evaluators=[Contains(value="sun", case_sensitive=False), Equals(value={"a": 1})],
            ),
            Case(name="typed", inputs={"city": "Paris"}, evaluators=[LLMJudge(rubric="polite", include_input=True)]),
        ],
        evaluators=[EqualsExpected(), MaxDuration(seconds=3), IsInstance(type_name="str")],
    )
    path = tmp_path / f"ours.{suffix}"
    save_dataset(ours, path)
    theirs = PEDataset[object, object, dict].from_file(path)
    assert theirs.name == "weather" and [c.name for c in theirs.cases] == ["tokyo", "typed"]
    assert theirs.cases[0].metadata == {"k": [1, 2]} and theirs.cases[1].inputs == {"city": "Paris"}
    assert theirs.cases[0].evaluators == [pe.Contains("sun", case_sensitive=False), pe.Equals({"a": 1})]
    assert theirs.cases[1].evaluators == [pe.LLMJudge(rubric="polite", include_input=True)]
    assert theirs.evaluators == [pe.EqualsExpected(), pe.MaxDuration(3), pe.IsInstance("str")]
    # and back again, through pydantic-evals' writer
    theirs.to_file(tmp_path / f"again.{suffix}")
    assert load_dataset(tmp_path / f"again.{suffix}").model_copy(update={"name": "weather"}) == ours
