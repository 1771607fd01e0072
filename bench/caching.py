"""Section 7, prompt caching on Anthropic's wire: a 20-turn run of an agent with a 10,000-token
system prompt and a tool, once with the runner's `cache_control` marks (the default) and once
with `prompt_cache="off"`, against fake_llm's Anthropic side, which counts a cache read as the API
does (the longest prefix an earlier request marked). Figures per model call come from the run's
own `model_finished` events: what a user's `status --json` and export show."""

from __future__ import annotations

import uuid
from typing import Any

from bench.stack import Stack
from durable_agent_runner.activities.prices import DEFAULT_PRICES, PER
from durable_agent_runner.workflows import types as t

TURNS = 20
SYSTEM_TOKENS = 10_000
PRICED_AS = "claude-sonnet-4-5"  # the price table's Anthropic entry whose ratios (1.25x write, 0.1x read) it uses
TARGET_READS = 0.90  # of input tokens, from turn 2 on
TARGET_COST = 0.30  # input cost with caching over without


def input_cost(usage: t.Usage) -> float:
    """US dollars for the call's input at PRICED_AS's prices: plain, cache writes, cache reads."""
    p = DEFAULT_PRICES[PRICED_AS]
    plain = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    write = p.cache_write if p.cache_write is not None else p.input
    read = p.cached_input if p.cached_input is not None else p.input
    return (plain * p.input + usage.cache_write_tokens * write + usage.cached_tokens * read) / PER


async def _calls(stack: Stack, queue: str, agent: str) -> list[t.Usage]:
    assert stack.client is not None
    handle = await stack.client.start_workflow(
        t.WORKFLOW_NAME,
        t.RunInput(
            prompt="Work through the checklist.", agent=agent, model=f"anthropic:loop:{TURNS}:200", max_turns=TURNS + 1
        ),
        id=f"bench-cache-{agent}-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=t.RunResult,
    )
    await handle.result()
    page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(limit=10_000), result_type=t.EventsPage)
    return [e.usage for e in page.events if e.kind == t.EventKind.MODEL_FINISHED and e.usage is not None]


async def caching(stack: Stack, log: Any) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    async with stack.worker(mode="inproc") as worker:
        for label, agent in (("cache_control marks (default)", "cache_reader"), ('prompt_cache="off"', "plain_reader")):
            log(f"caching: {TURNS}-turn run, {label}")
            calls = await _calls(stack, worker.queue, agent)
            later = calls[1:]
            rows[label] = {
                "calls": len(calls),
                "input_tokens": sum(u.input_tokens for u in calls),
                "cache_reads": sum(u.cached_tokens for u in calls),
                "cache_writes": sum(u.cache_write_tokens for u in calls),
                "reads_from_turn_2": sum(u.cached_tokens for u in later) / max(1, sum(u.input_tokens for u in later)),
                "lowest_turn_reads": min((u.cached_tokens / max(1, u.input_tokens) for u in later), default=0.0),
                "input_usd": round(sum(input_cost(u) for u in calls), 6),
            }
    cached, plain = rows["cache_control marks (default)"], rows['prompt_cache="off"']
    return {
        "rows": rows,
        "cost_ratio": cached["input_usd"] / plain["input_usd"] if plain["input_usd"] else None,
        "turns": TURNS,
        "system_tokens": SYSTEM_TOKENS,
        "priced_as": PRICED_AS,
        "targets": {"reads_from_turn_2": TARGET_READS, "cost_ratio": TARGET_COST},
    }


def report(data: dict[str, Any]) -> str:
    lines = [
        f"7. PROMPT CACHING ON ANTHROPIC'S WIRE  ({data['turns']}-turn run, a {data['system_tokens']:,}-token system "
        f"prompt and a tool; input priced as {data['priced_as']}: writes 1.25x, reads 0.1x input)",
        f"   {'setting':32} {'calls':>5} {'input tok':>10} {'reads':>9} {'writes':>8} {'reads t2+':>9} "
        f"{'lowest t2+':>10} {'input $':>9}",
    ]
    for label, r in data["rows"].items():
        lines.append(
            f"   {label:32} {r['calls']:>5} {r['input_tokens']:>10,} {r['cache_reads']:>9,} {r['cache_writes']:>8,} "
            f"{r['reads_from_turn_2']:>9.1%} {r['lowest_turn_reads']:>10.1%} {r['input_usd']:>9.4f}"
        )
    cached = data["rows"]["cache_control marks (default)"]
    ratio = data["cost_ratio"]
    reads_ok = cached["lowest_turn_reads"] >= data["targets"]["reads_from_turn_2"]
    cost_ok = ratio is not None and ratio <= data["targets"]["cost_ratio"]
    lines.append(
        f"   from turn 2 on, each call reads >= {data['targets']['reads_from_turn_2']:.0%} of its input from cache: "
        f"{'MEETS' if reads_ok else 'MISSES'}; input cost with caching / without: "
        f"{ratio:.3f}x -> {'MEETS' if cost_ok else 'MISSES'} the {data['targets']['cost_ratio']:g}x target"
    )
    return "\n".join(lines)
