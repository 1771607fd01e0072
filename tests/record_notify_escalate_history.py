"""Record a run whose wait escalated into tests/histories/ for the replay test:
`python -m tests.record_notify_escalate_history [NAME]` (default notify_escalate_1_4). A call that
waits for approval notifies the worker's webhook, its escalation timer (2 s) fires with nobody having
decided, the escalation webhook hears of it, and then the call is approved and the run completes.
The receivers are real (tests/notify_receivers.py) and named by the worker's settings only, so no
address enters the history. Re-record only on purpose: a history that no longer replays means runs
in flight would break."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

from durable_agent_runner import Agent, NotifyOptions, Registry
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.connection import connect
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.config.notify import NotifySettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import types as t
from tests.devserver import DevServer
from tests.fixtures.agents import send
from tests.helpers import calls, script
from tests.notify_receivers import Receiver

SECRET = "whsec-recorder-5e2d8a17"
ESCALATE_AFTER = 2.0


async def escalated(handle) -> None:
    """Until the run's story holds the escalation's `notified` event (60 s at most)."""
    for _ in range(600):
        page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
        if any(e.kind == t.EventKind.NOTIFIED and e.detail.startswith("escalated") for e in page.events):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the wait never escalated")


async def record(name: str) -> Path:
    agent = Agent(
        name="escalated",
        tools=[send],
        approvals={"send": "always"},
        notify=NotifyOptions(escalate_after=ESCALATE_AFTER),
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLMServer() as llm,
        Receiver(SECRET) as hook,
        Receiver(SECRET) as boss,
    ):
        server = DevServer(Path(tmp))
        server.start()
        try:
            client = await connect(server.target, "default")
            notify = NotifySettings(webhook_url=hook.url, webhook_secret=SECRET, escalate_webhook_url=boss.url)
            settings = LLMSettings(base_url=llm.base_url, model="demo", notify=notify)
            model = script(llm, calls(("send", {"label": "payroll"})), {"content": "sent after the escalation"})
            queue = f"record-{uuid.uuid4().hex}"
            async with (
                new_http_client(settings) as http,
                build_worker(client, queue, Registry(agents=[agent]), settings, http),
            ):
                handle = await client.start_workflow(
                    t.WORKFLOW_NAME, t.RunInput(prompt="send it", agent="escalated", model=model), id=name,
                    task_queue=queue, result_type=t.RunResult,
                )  # fmt: skip
                await escalated(handle)
                s = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
                (waiting,) = s.pending_approvals
                decision = t.ApprovalDecision(call_id=waiting.call_id, approve=True, by="recorder")
                await handle.execute_update(t.APPROVAL_UPDATE, decision, result_type=t.DecisionReceipt)
                result = await asyncio.wait_for(handle.result(), 60)
                assert result.output == "sent after the escalation", result
                history = await handle.fetch_history()
        finally:
            server.stop()
    assert len(hook.requests) == 1 and len(boss.requests) == 1, (hook.requests, boss.requests)
    assert boss.requests[0]["json"]["escalation"] is True
    path = Path(__file__).parent / "histories" / f"{name}.json"
    path.write_text(history.to_json())
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "notify_escalate_1_4")))
