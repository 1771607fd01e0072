"""Section 8's other side: the same eval without durability, as a team would write it today.

pydantic-evals' `Dataset.evaluate` runs a plain agent loop in one process: raw httpx to the same
fake model (Chat Completions, the same `loop:<N>` script), the same `pad` tool run in-process,
and the same evaluator (`Contains`). Nothing is recorded, so nothing survives: `killed_at` cancels
the evaluation once that many cases are done (what a SIGKILL leaves of it: nothing) and runs it
again from the first case, as pydantic-evals, with no resume, must."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import Contains

from tests.fixtures.agents import pad

PAD_TOOL = {
    "type": "function",
    "function": {
        "name": "pad",
        "description": "Return `size` characters of text for step i.",
        "parameters": {
            "type": "object",
            "properties": {"i": {"type": "integer"}, "size": {"type": "integer"}},
            "required": ["i", "size"],
        },
    },
}


async def agent_loop(http: httpx.AsyncClient, model: str, prompt: str, max_turns: int = 10) -> str:
    """Call the model; run the tools it asks for and call again; return its text when it asks none."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Loop."}, {"role": "user", "content": prompt}]
    for _ in range(max_turns):
        reply = await http.post("chat/completions", json={"model": model, "messages": messages, "tools": [PAD_TOOL]})
        reply.raise_for_status()
        message = reply.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message.get("content") or "")
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": pad.fn(**args)})
    raise RuntimeError(f"no answer in {max_turns} turns")


def dataset(cases: int, turns: int) -> Dataset[str, str, Any]:
    return Dataset(
        name=f"{cases} cases of a {turns}-turn loop",
        cases=[Case(name=f"case-{i:03d}", inputs=f"Work through item {i}.") for i in range(cases)],
        evaluators=[Contains(value=f"done after {turns} turns")],
    )


async def plain_eval(
    base_url: str, *, cases: int, turns: int, concurrency: int, killed_at: int | None = None
) -> dict[str, Any]:
    """Wall time, cases passed and model requests made by `Dataset.evaluate`, killed and run
    again from the start if `killed_at` is given."""
    model = f"loop:{turns}"
    done = 0
    lost = asyncio.Event()
    started = time.perf_counter()
    async with httpx.AsyncClient(
        base_url=base_url + "/", timeout=60, limits=httpx.Limits(max_connections=concurrency)
    ) as http:

        async def task(prompt: str) -> str:
            nonlocal done
            answer = await agent_loop(http, model, prompt)
            done += 1
            if killed_at is not None and done == killed_at:
                lost.set()
            return answer

        ds = dataset(cases, turns)
        attempts = 1
        if killed_at is not None:
            first = asyncio.create_task(ds.evaluate(task, max_concurrency=concurrency, progress=False))
            await asyncio.wait([first, asyncio.create_task(lost.wait())], return_when=asyncio.FIRST_COMPLETED)
            first.cancel()  # the process dies: every finished case is lost with it
            await asyncio.gather(first, return_exceptions=True)
            attempts = 2
        report = await ds.evaluate(task, max_concurrency=concurrency, progress=False)
    passed = sum(1 for c in report.cases if all(a.value for a in c.assertions.values()))
    return {
        "wall_s": round(time.perf_counter() - started, 3),
        "cases": len(report.cases),
        "passed": passed,
        "attempts": attempts,
        "case_runs": done,  # agent loops finished, the lost attempt's included
    }
