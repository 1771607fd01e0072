"""Record an EvalRun's history into tests/histories/ for the replay test:
`python -m tests.record_eval_history [NAME]` (default eval_run_1_4): an eval of the demo agent on
three cases, two at once, within a token budget, scored by Contains and an LLM judge, on a
scripted fake model. Re-record only on purpose: a history that no longer replays means evals in
flight would break."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path

from durable_agent_runner import Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.evals import Case, Dataset, EvaluatorSpec
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from tests.devserver import DevServer

VERDICT = json.dumps({"reason": "fine", "pass": True, "score": 0.9})


def dataset() -> Dataset:
    judge = EvaluatorSpec(name="LLMJudge", kwargs={"rubric": "The answer is fine", "score": {}})
    cases = [Case(name=f"case {i}", inputs=f"question {i}") for i in (1, 2, 3)]
    return Dataset(name="recorded", cases=cases, evaluators=[EvaluatorSpec(name="Contains", args=("fine",)), judge])


async def record(name: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as llm:
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            model = llm.add_script("recorded", [{"content": VERDICT}])
            settings = LLMSettings(base_url=llm.base_url, model="demo")
            queue = f"record-{uuid.uuid4().hex}"
            registry = Registry.from_modules(["examples.demo_agent"])
            async with new_http_client(settings) as http, build_worker(client, queue, registry, settings, http):
                evals = AgentClient(client, task_queue=queue).evals
                ev = await evals.start(
                    dataset(), agent="demo", model=model, concurrency=2, budget_tokens=100_000, eval_id=name
                )
                final = await ev.wait(60)
                assert final.passed == 3, final
                history = await client.get_workflow_handle(name).fetch_history()
        finally:
            server.stop()
    path = Path(__file__).parent / "histories" / f"{name}.json"
    path.write_text(history.to_json())
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "eval_run_1_4")))
