"""What a model call costs, in US dollars, from a price table per model.

Prices are per million tokens: input, cached input (tokens the provider served from its prompt
cache, billed lower), cache writes (tokens written to the cache: Anthropic bills them higher),
output, and reasoning (billed as output unless a price says otherwise). The table ships the list
prices of common OpenAI, Anthropic and Gemini models as of late 2025 (check them: prices change;
Anthropic's 1-hour cache writes cost 2x input, not the 5-minute 1.25x listed; Gemini's prices are
those of prompts up to 200k tokens). `LLM_PRICES` names a JSON file whose entries override or extend it:

    {"gpt-4.1": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
     "claude-sonnet-4-5": {"input": 3, "cached_input": 0.3, "cache_write": 6, "output": 15},
     "my-vllm-model": {"input": 0, "output": 0}}

A model is priced by its own name, without the provider's prefix ("anthropic:claude-sonnet-4-5"
is "claude-sonnet-4-5").

A model's dated variant (`gpt-4.1-2025-04-14`) and a provider prefix (`openai/gpt-4.1`) find the
base entry. A call to a model the table lacks costs nothing and is counted in `Usage.unpriced`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable_agent_runner.config.env import WorkerSettings
from durable_agent_runner.workflows.types import Usage, split_model


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)  # None: the input price
    cache_write: float | None = Field(default=None, ge=0)  # None: the input price
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
        "gemini-2.5-pro": (1.25, 0.125, 10.0),
        "gemini-2.5-flash": (0.30, 0.03, 2.50),
        "gemini-2.5-flash-lite": (0.10, 0.01, 0.40),
        "gemini-2.0-flash": (0.10, 0.025, 0.40),
    }.items()
} | {
    name: Price(input=i, cached_input=c, cache_write=w, output=o)
    for name, (i, c, w, o) in {
        "claude-opus-4-5": (5.0, 0.50, 6.25, 25.0),
        "claude-opus-4-1": (15.0, 1.50, 18.75, 75.0),
        "claude-sonnet-4-5": (3.0, 0.30, 3.75, 15.0),
        "claude-sonnet-4": (3.0, 0.30, 3.75, 15.0),
        "claude-haiku-4-5": (1.0, 0.10, 1.25, 5.0),
        "claude-3-5-haiku": (0.80, 0.08, 1.0, 4.0),
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
        """The price of a model string ("anthropic:claude-sonnet-4-5" is "claude-sonnet-4-5");
        None for a model the table lacks, or a string that names no model ("anthropic:")."""
        try:
            _, name = split_model(model)
        except ValueError:
            return None
        name = name.rsplit("/", 1)[-1]
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
        written = min(usage.cache_write_tokens, usage.input_tokens - cached)
        reasoning = min(usage.reasoning_tokens, usage.output_tokens)
        cost = (
            (usage.input_tokens - cached - written) * price.input
            + cached * (price.input if price.cached_input is None else price.cached_input)
            + written * (price.input if price.cache_write is None else price.cache_write)
            + (usage.output_tokens - reasoning) * price.output
            + reasoning * (price.output if price.reasoning is None else price.reasoning)
        ) / PER
        return usage.model_copy(update={"cost_usd": round(cost, 8), "unpriced": 0})
