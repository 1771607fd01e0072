"""A 50-case eval survives its worker SIGKILLed twice and the Temporal server restarted once:
each case runs as one run, to completion; a case that finished before a kill is never asked of
the model again, and every model request of a case is an attempt its own run's history shows
(the call in flight at a kill is retried, as any run's). Replayed from its history."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections import Counter

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te
from tests.helpers import activity_attempts, replay, script
from tests.test_durability import start_worker_process, wait_for
from tests.test_evals_run import dataset, requests_per_case

CASES = 50


async def test_a_50_case_eval_through_two_worker_kills_and_a_server_restart(
    client, temporal_server, llm, task_queue, tmp_path
):
    began = time.monotonic()
    model = script(llm, {"content": "alpha beta"})
    llm.set_latency(300)  # each model call takes a while, so kills land mid-eval
    marker = uuid.uuid4().hex[:8]
    agents = AgentClient(client, task_queue=task_queue)
    log = tmp_path / "worker.log"
    worker = start_worker_process(temporal_server, llm, task_queue, log)
    asked_when_done: list[dict[str, int]] = []  # at each kill: the finished cases' requests so far
    try:
        ev = await agents.evals.start(
            dataset(CASES, marker, custom=False), agent="scripted", model=model, concurrency=5
        )

        def done_at_least(n: int):
            async def check() -> bool:
                try:
                    return (await ev.status()).done >= n
                except Exception:  # a worker or the server away for a moment
                    return False

            return check

        for n in (10, 25):
            await wait_for(done_at_least(n), timeout=120, every=0.1)
            finished = {r.case for r in (await ev.status()).results}
            asked = requests_per_case(llm, marker)
            asked_when_done.append({c: asked[c] for c in finished})
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            worker = start_worker_process(temporal_server, llm, task_queue, log)
        await wait_for(done_at_least(35), timeout=120, every=0.1)
        temporal_server.stop()  # SQLite keeps the histories
        await asyncio.sleep(1.0)
        temporal_server.start()
        final = await ev.wait(240)
        seconds = time.monotonic() - began
        assert final.phase == "completed" and final.done == CASES and final.passed == CASES
        # one run per case, each under its derived id, all of them children of the eval
        assert len({r.run_id for r in final.results}) == CASES
        assert all(r.end == "completed" for r in final.results)
        counted = requests_per_case(llm, marker)
        assert set(counted) == {f"case {i}" for i in range(1, CASES + 1)}
        for r in final.results:
            attempts = await activity_attempts(client.get_workflow_handle(r.run_id), t.MODEL_CALL_ACTIVITY)
            # a request per attempt at most: an attempt cut short by a kill may have sent none
            assert len(attempts) == 1 and 1 <= counted[r.case] <= attempts[0], (r.case, counted[r.case], attempts)
        # a case that had finished before a kill was never asked again
        for before in asked_when_done:
            assert {c: counted[c] for c in before} == before
        retried = sum(n - 1 for n in counted.values())
        # at most the calls in flight at the two kills and at the server's restart (5 at once each):
        # a call that answers while the server is down cannot report it, and its attempt is retried
        assert retried <= 3 * 5, Counter(counted.values())
        await replay(client.get_workflow_handle(ev.eval_id))
        print(f"50-case eval through 2 kills and a server restart: {seconds:.1f}s, {retried} model call(s) retried")
    finally:
        llm.set_latency(0)
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
    assert isinstance(final, te.EvalStatus)
