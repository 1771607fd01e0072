"""The built-in evaluators. Those pydantic-evals also has keep its names and fields, so its case
files load as they are: EqualsExpected, Equals, Contains, IsInstance, MaxDuration (and LLMJudge,
in judge.py). The rest are ours: Regex, MatchesSchema, CalledTool and the run's budgets.

Each is pure: a verdict from the context alone, bounded in the time it can take."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import lru_cache

import jsonschema
from pydantic import Field, JsonValue, TypeAdapter, field_validator

from .context import EvaluationReason, EvaluatorContext, one_line
from .registry import Evaluator, register

MAX_PATTERN_CHARS = 1_000
# Python's re has no timeout: the text it walks is bounded instead. A search is quadratic at
# worst for the patterns let through (`a*b` over 20,000 a's: about 0.3 s).
MAX_REGEX_TEXT_CHARS = 20_000
# A quantified group whose body is itself quantified, as in (a+)+ or (x*y)*: the shape of the
# patterns that backtrack exponentially. Refused at load, with what to write instead.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _equal(a: object, b: object) -> bool:
    """JSON equality: 1 == 1.0 as in JSON, but true is not 1 (Python's bool is an int)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if a != b:
        return False
    return type(a) is type(b) or (isinstance(a, int | float) and isinstance(b, int | float))


def _matches(value: object, ctx: EvaluatorContext) -> bool:
    """The output equals `value`: its text, or its parsed JSON."""
    return _equal(value, ctx.output) or (ctx.output_json is not None and _equal(value, ctx.output_json))


def _short(value: object, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return one_line(repr(text) if isinstance(value, str) else text, limit)


@register
class EqualsExpected(Evaluator):
    """The output equals the case's expected output (its text, or its JSON value). No expected
    output: passes, as in pydantic-evals (there is nothing to compare)."""

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        if ctx.expected_output is None:
            return EvaluationReason(value=True, reason="no expected output")
        ok = _matches(ctx.expected_output, ctx)
        return EvaluationReason(value=ok, reason=None if ok else f"expected {_short(ctx.expected_output)}")


@register
class Equals(Evaluator):
    """The output equals `value` (its text, or its JSON value)."""

    value: JsonValue

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        ok = _matches(self.value, ctx)
        return EvaluationReason(value=ok, reason=None if ok else f"output is {_short(ctx.output_value)}")


@register
class Contains(Evaluator):
    """The output contains `value`: a substring of its text, an item of its JSON list, or a subset
    of its JSON object's keys and values. `as_strings` compares both as text."""

    value: JsonValue
    case_sensitive: bool = True
    as_strings: bool = False

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        output = ctx.output_value
        if self.as_strings or (isinstance(self.value, str) and isinstance(output, str)):
            needle = self.value if isinstance(self.value, str) else json.dumps(self.value)
            hay = output if isinstance(output, str) else ctx.output
            if not self.case_sensitive:
                needle, hay = needle.casefold(), hay.casefold()
            ok = needle in hay
        elif isinstance(output, dict) and isinstance(self.value, dict):
            missing = [k for k, v in self.value.items() if k not in output or not _equal(output[k], v)]
            if missing:
                return EvaluationReason(value=False, reason=f"output differs at key {_short(missing[0])}")
            ok = True
        elif isinstance(output, list):
            ok = any(_equal(self.value, item) for item in output)
        elif isinstance(self.value, str):
            ok = self.value in ctx.output
        else:  # a number, a list or an object in a text (or a number's) output: said, not a bare "does not contain"
            kind = _JSON_TYPES.get(type(self.value), "value")
            return EvaluationReason(
                value=False,
                reason=f"cannot look for the {kind} {_short(self.value)} in the output, a "
                f"{_JSON_TYPES.get(type(output), 'str')}: give it as text, or set as_strings: true",
            )
        return EvaluationReason(value=ok, reason=None if ok else f"output does not contain {_short(self.value)}")


_DURATION = TypeAdapter(timedelta)
_JSON_TYPES = {str: "str", int: "int", float: "float", bool: "bool", dict: "dict", list: "list", type(None): "NoneType"}


@register
class IsInstance(Evaluator):
    """The output's type is `type_name`: the Python name of its JSON value's type (str, int,
    dict, ...), or the name of the agent's output_type when the output validated as it."""

    type_name: str

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        actual = _JSON_TYPES.get(type(ctx.output_value), "str")
        ok = self.type_name in (actual, ctx.output_type_name)
        return EvaluationReason(value=ok, reason=f"output is a {ctx.output_type_name or actual}")


class _AtMost(Evaluator):
    def _check(self, what: str, actual: float, limit: float) -> EvaluationReason:
        return EvaluationReason(value=actual <= limit, reason=f"{what} {actual:g} (at most {limit:g})")


@register
class MaxDuration(_AtMost):
    """The run took at most `seconds` (pydantic-evals' name; MaxSeconds is the same)."""

    seconds: float = Field(ge=0)

    @field_validator("seconds", mode="before")
    @classmethod
    def _timedelta(cls, v: object) -> object:
        if isinstance(v, str):  # pydantic-evals writes a timedelta as ISO 8601 ("PT2S")
            v = _DURATION.validate_python(v)
        return v.total_seconds() if isinstance(v, timedelta) else v

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        return self._check("seconds", ctx.facts.seconds, self.seconds)


@register
class MaxSeconds(MaxDuration):
    """The run took at most `seconds`."""


@register
class MaxTurns(_AtMost):
    turns: int = Field(ge=0)

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        return self._check("turns", ctx.facts.turns, self.turns)


@register
class MaxTokens(_AtMost):
    """The run used at most `tokens`, input and output together."""

    tokens: int = Field(ge=0)

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        return self._check("tokens", ctx.facts.tokens, self.tokens)


@register
class MaxCostUSD(_AtMost):
    usd: float = Field(ge=0)

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        return self._check("USD", ctx.facts.usd, self.usd)


# The built-ins an eval scores in its own workflow task, with no activity: pure, and cheap on any
# answer (a compare, a substring, a number). Regex and MatchesSchema can take long on a large
# answer, CalledTool reads the run's transcript, LLMJudge asks a model, and a team's own may do
# anything: a case with any of them is scored by the scoring activity (docs/eval-runs.md).
INLINE = frozenset(
    {
        "EqualsExpected",
        "Equals",
        "Contains",
        "IsInstance",
        "MaxDuration",
        "MaxSeconds",
        "MaxTurns",
        "MaxTokens",
        "MaxCostUSD",
    }
)


@lru_cache(maxsize=256)
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@register
class Regex(Evaluator):
    """The output's text matches `pattern` somewhere (re.search; `fullmatch` for all of it).
    Bounded: the pattern's length, no nested quantifiers or backreferences (the usual patterns
    that backtrack exponentially), and the text searched (its first MAX_REGEX_TEXT_CHARS). A
    quantified alternation whose branches overlap, as in (a|aa)+, is not caught: keep them out."""

    pattern: str = Field(max_length=MAX_PATTERN_CHARS)
    case_sensitive: bool = True
    fullmatch: bool = False

    @field_validator("pattern")
    @classmethod
    def _safe(cls, pattern: str) -> str:
        if _NESTED_QUANTIFIER.search(pattern):
            raise ValueError("a quantified group holds a quantifier (like (a+)+), which can take exponential time")
        if _BACKREFERENCE.search(pattern):
            raise ValueError("backreferences can take exponential time")
        try:
            _compiled(pattern, 0)
        except re.error as err:
            raise ValueError(f"not a regular expression: {err}") from None
        return pattern

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        compiled = _compiled(self.pattern, 0 if self.case_sensitive else re.IGNORECASE)
        text = ctx.output[:MAX_REGEX_TEXT_CHARS]
        found = compiled.fullmatch(text) if self.fullmatch else compiled.search(text)
        cut = f" (in its first {MAX_REGEX_TEXT_CHARS:,} characters)" if len(ctx.output) > MAX_REGEX_TEXT_CHARS else ""
        return EvaluationReason(value=found is not None, reason=f"{'matches' if found else 'no match'}{cut}")


@register
class MatchesSchema(Evaluator):
    """The output's JSON validates against `json_schema`, or, when none is given, against the
    agent's output_type's schema that the eval passes in the context."""

    json_schema: dict[str, JsonValue] | None = None

    @field_validator("json_schema")
    @classmethod
    def _valid(cls, schema: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if schema is not None:
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as err:
                raise ValueError(f"not a JSON schema: {one_line(err.message, 200)}") from None
        return schema

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        schema = self.json_schema if self.json_schema is not None else ctx.output_schema
        if schema is None:
            raise ValueError("no schema: give json_schema, or run the case with an agent that has an output_type")
        if ctx.output_json is None and ctx.output.strip() != "null":
            return EvaluationReason(value=False, reason="the output is not JSON")
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(ctx.output_json))
        if error is None:
            return EvaluationReason(value=True)
        where = "/".join(str(p) for p in error.absolute_path) or "(the output)"
        return EvaluationReason(value=False, reason=one_line(f"at {where}: {error.message}", 300))


@register
class CalledTool(Evaluator):
    """The run called tool `name` between `min_times` and `max_times` times, counting only the
    calls whose arguments include every key and value of `arguments` (when given)."""

    name: str
    arguments: dict[str, JsonValue] | None = None
    min_times: int = Field(default=1, ge=0)
    max_times: int | None = Field(default=None, ge=0)

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        wanted = self.arguments or {}
        calls = [c for c in ctx.facts.tool_calls if c.name == self.name]
        matching = [c for c in calls if all(k in c.arguments and c.arguments[k] == v for k, v in wanted.items())]
        n = len(matching)
        ok = n >= self.min_times and (self.max_times is None or n <= self.max_times)
        span = f"{self.min_times}..{'' if self.max_times is None else self.max_times}"
        which = f" with {_short(wanted, 200)}" if wanted else ""
        return EvaluationReason(value=ok, reason=f"{self.name}{which} called {n} times (want {span})")
