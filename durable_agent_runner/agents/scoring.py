"""An agent's online evaluators (`Agent(evaluators=[...], eval_sample=0.1)`): evaluator
instances, names or specs, kept as specs (evals/registry.py's short forms) so the frozen agent is
plain data, and checked when the agent is made: an unregistered name or a bad argument is refused
there, not found out by the first sampled run."""

from __future__ import annotations

from pydantic import JsonValue, ValidationError

from durable_agent_runner.evals.registry import EvaluatorSpec, EvaluatorSpecError, build


def live_specs(value: object) -> list[JsonValue]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError("evaluators is a list of evaluators: instances, names, or {Name: arguments}")
    specs: list[JsonValue] = []
    for given in value:
        try:
            spec = EvaluatorSpec.model_validate(given)
            build(spec)
        except (ValidationError, EvaluatorSpecError) as err:
            raise ValueError(f"evaluator {given!r}: {err}") from None
        specs.append(spec.model_dump(mode="json"))
    return specs
