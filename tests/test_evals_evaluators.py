"""The built-in evaluators' verdicts and bounds, custom evaluators by name, and one that raises
being errored on its own case, never failing the evaluation."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable_agent_runner.evals import (
    CalledTool,
    Case,
    Contains,
    Dataset,
    Equals,
    EqualsExpected,
    EvaluationReason,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    EvaluatorSpec,
    EvaluatorSpecError,
    IsInstance,
    MatchesSchema,
    MaxCostUSD,
    MaxDuration,
    MaxSeconds,
    MaxTokens,
    MaxTurns,
    Regex,
    RunFacts,
    ToolCallFact,
    build,
    evaluate_case,
    register,
    run_evaluator,
    to_spec,
)


def ctx(output="The weather in Tokyo is Sunny.", output_json=None, **kw) -> EvaluatorContext:
    return EvaluatorContext(case_name="c", inputs="q", output=output, output_json=output_json, **kw)


def verdict(evaluator: Evaluator, context: EvaluatorContext) -> bool | float | str:
    (result,) = run_evaluator(to_spec(evaluator), context)
    assert result.error is None, result.error
    assert result.value is not None
    return result.value


FACTS = RunFacts(
    turns=3,
    input_tokens=100,
    output_tokens=20,
    usd=0.012,
    seconds=4.5,
    tool_calls=[
        ToolCallFact(name="get_weather", arguments={"city": "Tokyo", "units": "C"}),
        ToolCallFact(name="get_weather", arguments={"city": "Paris"}),
        ToolCallFact(name="send_email", arguments={"to": "a@b.c"}),
    ],
)


def test_equals_and_equals_expected_compare_the_text_or_its_json():
    assert verdict(EqualsExpected(), ctx("sunny", expected_output="sunny")) is True
    assert verdict(EqualsExpected(), ctx("rain", expected_output="sunny")) is False
    assert verdict(EqualsExpected(), ctx('{"a": 1}', {"a": 1}, expected_output={"a": 1})) is True
    assert verdict(EqualsExpected(), ctx("anything")) is True  # nothing to compare, as pydantic-evals
    assert verdict(Equals(value=[1, 2]), ctx("[1, 2]", [1, 2])) is True
    assert verdict(Equals(value="x"), ctx("y")) is False
    # JSON equality: 1 is 1.0, but true is not 1, though Python says True == 1
    assert verdict(Equals(value=1), ctx("1.0", 1.0)) is True
    assert verdict(Equals(value=True), ctx("1", 1)) is False
    assert verdict(Equals(value={"ok": 1}), ctx('{"ok": true}', {"ok": True})) is False
    assert verdict(Contains(value={"ok": True}), ctx('{"ok": 1}', {"ok": 1})) is False
    assert verdict(Contains(value=1), ctx("[true]", [True])) is False


def test_contains_text_items_and_subsets():
    assert verdict(Contains(value="Sunny"), ctx()) is True
    assert verdict(Contains(value="sunny"), ctx()) is False
    assert verdict(Contains(value="sunny", case_sensitive=False), ctx()) is True
    obj = ctx('{"city": "Tokyo", "t": 21}', {"city": "Tokyo", "t": 21})
    assert verdict(Contains(value={"city": "Tokyo"}), obj) is True
    assert verdict(Contains(value={"city": "Paris"}), obj) is False
    assert verdict(Contains(value=2), ctx("[1, 2]", [1, 2])) is True
    assert verdict(Contains(value=21, as_strings=True), obj) is True


def test_contains_says_when_the_value_cannot_be_in_a_text_output():
    (r,) = run_evaluator(EvaluatorSpec.model_validate({"Contains": {"value": [1, 2]}}), ctx("1, 2 and more"))
    assert r.value is False
    assert r.reason == "cannot look for the list [1, 2] in the output, a str: give it as text, or set as_strings: true"
    (r,) = run_evaluator(EvaluatorSpec.model_validate({"Contains": {"value": 3}}), ctx("3", 3))
    assert r.reason == "cannot look for the int 3 in the output, a int: give it as text, or set as_strings: true"
    assert verdict(Contains(value=[1, 2], as_strings=True), ctx("[1, 2] and more")) is True


def test_is_instance_names_the_json_type_or_the_output_type():
    assert verdict(IsInstance(type_name="str"), ctx()) is True
    assert verdict(IsInstance(type_name="dict"), ctx("{}", {})) is True
    assert verdict(IsInstance(type_name="Forecast"), ctx("{}", {}, output_type_name="Forecast")) is True
    assert verdict(IsInstance(type_name="int"), ctx()) is False


@pytest.mark.parametrize(
    ("evaluator", "ok"),
    [
        (MaxTurns(turns=3), True),
        (MaxTurns(turns=2), False),
        (MaxTokens(tokens=120), True),
        (MaxTokens(tokens=119), False),
        (MaxCostUSD(usd=0.02), True),
        (MaxCostUSD(usd=0.01), False),
        (MaxSeconds(seconds=5), True),
        (MaxDuration(seconds=4), False),
    ],
)
def test_budgets_are_at_most(evaluator, ok):
    assert verdict(evaluator, ctx(facts=FACTS)) is ok


def test_max_duration_takes_a_timedelta_as_pydantic_evals_does():
    from datetime import timedelta

    assert MaxDuration(seconds=timedelta(seconds=2)).seconds == 2.0
    assert MaxDuration.model_validate({"seconds": "PT1M30S"}).seconds == 90.0  # its ISO 8601 in a file


def test_called_tool_counts_calls_whose_arguments_include_the_subset():
    facts = ctx(facts=FACTS)
    assert verdict(CalledTool(name="get_weather"), facts) is True
    assert verdict(CalledTool(name="get_weather", arguments={"city": "Tokyo"}), facts) is True
    assert verdict(CalledTool(name="get_weather", arguments={"city": "Rome"}), facts) is False
    assert verdict(CalledTool(name="get_weather", max_times=1), facts) is False
    assert verdict(CalledTool(name="get_weather", min_times=2, max_times=2), facts) is True
    assert verdict(CalledTool(name="delete_all", min_times=0, max_times=0), facts) is True
    (r,) = run_evaluator(to_spec(CalledTool(name="get_weather", arguments={"city": "Rome"})), facts)
    assert r.reason == "get_weather with {\"city\": \"Rome\"} called 0 times (want 1..)"


def test_regex_matches_and_refuses_catastrophic_patterns():
    assert verdict(Regex(pattern=r"Tokyo is \w+"), ctx()) is True
    assert verdict(Regex(pattern=r"^sunny", case_sensitive=False), ctx("Sunny")) is True
    assert verdict(Regex(pattern=r"Sunny", fullmatch=True), ctx()) is False
    for bad in [r"(a+)+$", r"(x*y)*", r"(\w+\s?)*$", r"(a)\1", "(", "x" * 1001]:
        with pytest.raises(ValueError):
            Regex(pattern=bad)


def test_regex_searches_a_bounded_text_fast():
    started = time.monotonic()
    (r,) = run_evaluator(to_spec(Regex(pattern=r"a*b")), ctx("a" * 10_000_000))
    assert r.value is False and "first 20,000 characters" in (r.reason or "")
    assert time.monotonic() - started < 2


def test_matches_schema_given_or_from_the_output_type():
    schema = {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]}
    assert verdict(MatchesSchema(json_schema=schema), ctx('{"t": 1}', {"t": 1})) is True
    (r,) = run_evaluator(to_spec(MatchesSchema(json_schema=schema)), ctx('{"t": "hot"}', {"t": "hot"}))
    assert r.value is False and r.reason == "at t: 'hot' is not of type 'number'"
    assert verdict(MatchesSchema(), ctx("not json", output_schema=schema)) is False
    assert verdict(MatchesSchema(), ctx('{"t": 2}', {"t": 2}, output_schema=schema)) is True
    (r,) = run_evaluator(EvaluatorSpec(name="MatchesSchema"), ctx())
    assert r.error is not None and "no schema" in r.error
    with pytest.raises(ValueError, match="not a JSON schema"):
        MatchesSchema(json_schema={"type": 12})


@register
def mentions_city(ctx: EvaluatorContext, city: str = "Tokyo") -> EvaluationReason:
    return EvaluationReason(value=city in ctx.output, reason=f"looked for {city}")


@register(name="Politeness")
class Politeness(Evaluator):
    threshold: float = 0.5

    def evaluate(self, ctx: EvaluatorContext) -> float:
        return 0.9 if "please" in ctx.output.lower() else 0.1


@register
def tone(ctx: EvaluatorContext) -> str:
    return "formal"


@register
def broken(ctx: EvaluatorContext) -> bool:
    raise KeyError("the grader's dictionary has no 'x'\nsecond line")


@register
def wrong_type(ctx: EvaluatorContext) -> bool:
    return [1]  # type: ignore[return-value]


def test_custom_functions_and_classes_are_named_in_specs_and_return_any_kind():
    c = ctx()
    (r,) = run_evaluator(EvaluatorSpec.model_validate({"mentions_city": {"city": "Paris"}}), c)
    assert (r.name, r.value, r.reason, r.kind) == ("mentions_city", False, "looked for Paris", "pass")
    (r,) = run_evaluator(EvaluatorSpec.model_validate("mentions_city"), c)
    assert r.value is True
    (r,) = run_evaluator(EvaluatorSpec.model_validate({"Politeness": 0.7}), ctx("Please help"))
    assert (r.value, r.kind) == (0.9, "score")
    (r,) = run_evaluator(EvaluatorSpec.model_validate("tone"), c)
    assert (r.value, r.kind) == ("formal", "label")
    with pytest.raises(EvaluatorSpecError, match="mentions_city: got an unexpected keyword argument 'town'"):
        build(EvaluatorSpec.model_validate({"mentions_city": {"town": "x"}}))
    with pytest.raises(ValueError, match="already registered"):
        register(tone, name="Politeness")


def test_an_evaluator_that_raises_is_errored_on_its_case_and_the_rest_still_run():
    case = Case(name="c", inputs="q", evaluators=["broken", "wrong_type", "Nope", Contains(value="Tokyo")])
    dataset = Dataset(name="d", cases=[case], evaluators=[MaxTurns(turns=5)])
    results = evaluate_case(case, dataset, ctx(facts=FACTS))
    assert [(r.name, r.kind) for r in results] == [
        ("MaxTurns", "pass"),
        ("broken", "error"),
        ("wrong_type", "error"),
        ("Nope", "error"),
        ("Contains", "pass"),
    ]
    assert (results[1].error or "").startswith("KeyError: \"the grader's dictionary has no 'x'")
    assert "\n" not in (results[1].error or "")
    assert "returned a list" in (results[2].error or "")
    assert "no evaluator named 'Nope'" in (results[3].error or "")
    # Results are payloads too: what a scoring activity would return.
    assert [EvaluationResult.model_validate_json(r.model_dump_json()) for r in results] == results


def test_evaluation_name_renames_the_result():
    (r,) = run_evaluator(EvaluatorSpec.model_validate({"Contains": {"value": "x", "evaluation_name": "has_x"}}), ctx())
    assert r.name == "has_x"


@given(st.text(max_size=200), st.text(max_size=20))
def test_contains_agrees_with_in_on_any_text(output, needle):
    assert verdict(Contains(value=needle), ctx(output)) is (needle in output)


def test_the_package_names_what_its_modules_define_and_gives_each_on_first_use():
    """evals/__init__.py imports its names on first use: each is the object its module (the typed
    import) defines, and `__all__` names them all."""
    import ast
    import importlib
    from pathlib import Path

    import durable_agent_runner.evals as evals

    tree = ast.parse(Path(evals.__file__).read_text())
    typed = {
        alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }
    assert sorted(typed) == sorted(evals.__all__)
    for name, module in typed.items():
        assert getattr(evals, name) is getattr(importlib.import_module(f"durable_agent_runner.evals.{module}"), name)


def test_a_process_that_imports_the_registry_alone_still_builds_the_built_in_evaluators():
    """Nothing imported evaluators.py or judge.py: the registry loads them before it looks a name up."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from durable_agent_runner.evals.registry import EvaluatorSpec, build, registered\n"
        "assert 'durable_agent_runner.evals.evaluators' not in sys.modules\n"
        "print(type(build(EvaluatorSpec.model_validate({'Contains': 'x'}))).__name__, 'LLMJudge' in registered())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["Contains", "True"]
