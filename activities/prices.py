"""What a model call costs, in US dollars, from a price table per model.

Prices are per million tokens: input, cached input (tokens the provider served from its prompt
cache, billed lower), output, and reasoning (billed as output unless a price says otherwise).
The table ships the list prices of common OpenAI models as of 2025 (check them: prices change);
`LLM_PRICES` names a JSON file whose entries override or extend it:

    {"gpt-4.1": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
     "my-vllm-model": {"input": 0, "output": 0}}

A model's dated variant (`gpt-4.1-2025-04-14`) and a provider prefix (`openai/gpt-4.1`) find the
base entry. A call to a model the table lacks costs nothing and is counted in `Usage.unpriced`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable_agent_runner.config.env import WorkerSettings
from durable_agent_runner.workflows.types import Usage


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)  # None: the input price
    reasoning: float | None = Field(default=None, ge=0)  # None: the output price


DEFAULT_PRICES: dict[str, Price] = {
    name: Price(input=i, cached_input=c, output=o)
    for name, (i, c, o) in {
        "gpt-5": (1.25, 0.125, 10.0),
        "gpt-5-mini": (0.25, 0.025, 2.0),
        "gpt-5-nano": (0.05, 0.005, 0.40),
        "gpt-4.1": (2.0, 0.50, 8.0),
        "gpt-4.1-mini": (0.40, 0.10, 1.60),
        "gpt-4.1-nano": (0.10, 0.025, 0.40),
        "gpt-4o": (2.50, 1.25, 10.0),
        "gpt-4o-mini": (0.15, 0.075, 0.60),
        "o3": (2.0, 0.50, 8.0),
        "o4-mini": (1.10, 0.275, 4.40),
    }.items()
}
PER = 1_000_000


class PriceTable:
    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PriceTable:
        """The shipped table with `LLM_PRICES`'s entries on top (as the settings read it,
        config/env.py); ValueError says what is wrong."""
        return cls.from_path(WorkerSettings.load(env).llm_prices)

    @classmethod
    def from_path(cls, path: str | None) -> PriceTable:
        """The shipped table with the entries of the JSON file at `path` (LLM_PRICES) on top."""
        table = dict(DEFAULT_PRICES)
        if not path:
            return cls(table)
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ValueError(f"LLM_PRICES={path}: cannot read a JSON price table ({err})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"LLM_PRICES={path}: expected an object of model → prices")
        for model, entry in raw.items():
            try:
                table[model] = Price.model_validate(entry)
            except ValidationError as err:
                problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in err.errors())
                raise ValueError(f"LLM_PRICES={path}: model {model!r}: {problem}") from None
        return cls(table)

    def price(self, model: str) -> Price | None:
        name = model.rsplit("/", 1)[-1]
        if name in self.prices:
            return self.prices[name]
        base = max((k for k in self.prices if name.startswith(k + "-")), key=len, default=None)
        return self.prices[base] if base is not None else None

    def priced(self, usage: Usage, model: str) -> Usage:
        """`usage` with what it cost (or counted as unpriced)."""
        price = self.price(model)
        if price is None:
            return usage.model_copy(update={"cost_usd": 0.0, "unpriced": usage.requests or 1})
        cached = min(usage.cached_tokens, usage.input_tokens)
        reasoning = min(usage.reasoning_tokens, usage.output_tokens)
        cost = (
            (usage.input_tokens - cached) * price.input
            + cached * (price.input if price.cached_input is None else price.cached_input)
            + (usage.output_tokens - reasoning) * price.output
            + reasoning * (price.output if price.reasoning is None else price.reasoning)
        ) / PER
        return usage.model_copy(update={"cost_usd": round(cost, 8), "unpriced": 0})
