"""Record an EvalRun's history into tests/histories/ for the replay test:
`python -m tests.record_eval_history [NAME]` (default eval_run_1_4): an eval of the demo agent on
three cases, two at once, within a token budget, scored by Contains and an LLM judge, on a
scripted fake model. `python -m tests.record_eval_history eval_cancel_resolve_1_4_2 --cancelled`:
an eval of an agent no worker serves, cancelled while its resolve waits (the patch
`eval-cancel-resolve-1.4.2`). `python -m tests.record_eval_history eval_inline_1_4_5 --inline`: an eval
started with `inline_scoring` whose judge is case 3's own, so cases 1 and 2 are scored in its
workflow task (the patch `eval-inline-score-1.4.5`). Re-record only on purpose: a history that no longer replays means
evals in flight would break."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import RunCancelled
from durable_agent_runner.evals import Case, Dataset, EvaluatorSpec
from tests.recording import recording, write

VERDICT = json.dumps({"reason": "fine", "pass": True, "score": 0.9})


JUDGE = EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "The answer is fine", "score": {}})
CONTAINS = EvaluatorSpec(name="Contains", args=("fine",))


def dataset(inline: bool = False) -> Dataset:
    """Three cases, each scored by Contains and an LLM judge; `inline`: the judge is case 3's own,
    so cases 1 and 2 have only Contains, which the eval scores in its workflow task."""
    own = {3: [JUDGE]} if inline else {}
    cases = [Case(name=f"case {i}", inputs=f"question {i}", evaluators=own.get(i, [])) for i in (1, 2, 3)]
    return Dataset(name="recorded", cases=cases, evaluators=[CONTAINS] if inline else [CONTAINS, JUDGE])


async def record(name: str, inline: bool = False) -> Path:
    async with recording() as r:
        model = r.llm.add_script("recorded", [{"content": VERDICT}])
        evals = AgentClient(r.client, task_queue=r.queue).evals
        data = dataset(inline)
        ev = await evals.start(
            data, agent="demo", model=model, concurrency=2, budget_tokens=100_000, eval_id=name, inline_scoring=inline
        )
        final = await ev.wait(60)
        assert final.passed == 3, final
        return write(name, await r.client.get_workflow_handle(name).fetch_history())


async def record_cancelled(name: str) -> Path:
    async with recording() as r:  # a worker of the demo agent, not of `ghost`
        ev = await AgentClient(r.client, task_queue=r.queue).evals.start(dataset(), agent="ghost", eval_id=name)
        handle = r.client.get_workflow_handle(name)
        while not (await handle.describe()).raw_description.pending_activities:
            await asyncio.sleep(0.2)  # the resolve waits on the agent's queue, which nothing polls
        await ev.cancel()
        try:
            await ev.wait(30)
        except RunCancelled:
            return write(name, await handle.fetch_history())  # as it should: the history ends cancelled
        raise AssertionError("the eval ended, not cancelled")


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "eval_run_1_4"
    cancelled, inline = "--cancelled" in sys.argv, "--inline" in sys.argv
    print(asyncio.run(record_cancelled(name) if cancelled else record(name, inline)))
