"""`client.py run --fallback-model` (repeatable) as a user runs it: a subprocess against the dev
server, the worker in-process; the run answers from the model reached, and `status` shows each switch."""

from __future__ import annotations

import uuid

from tests.helpers import script
from tests.test_client import cli  # noqa: F401  (the fixture: client.py as a subprocess)
from tests.test_fallback import FOREVER, worker_settings


async def test_run_with_fallback_models_goes_down_the_list_in_order(cli, worker_factory, llm):
    down, also_down = script(llm, {"content": "never said"}), script(llm, {"content": "never said either"})
    up = script(llm, {"content": "answered by the third model"})
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": m} for m in (down, also_down)])
    run_id = f"fallback-cli-{uuid.uuid4().hex[:8]}"
    async with worker_factory(settings=worker_settings(llm)):
        done = await cli(
            "run", "--wait", "--json", "--id", run_id, "--model", f"openai:{down}",
            "--fallback-model", f"openai:{also_down}", "--fallback-model", up, "hi",
            timeout=120,
        )  # fmt: skip
        shown = await cli("status", run_id)
        status = await cli("status", run_id, "--json")
    assert done.code == 0, str(done)
    answer = done.json()
    assert answer["output"] == "answered by the third model" and set(answer["usage_by_model"]) == {up}
    assert [r["model"] for r in llm.requests()].count(also_down) == 2  # asked, in order, before the last
    assert status.code == 0, str(status)
    switches = [(x["from_model"], x["to_model"], x["turn"]) for x in status.json()["switches"]]
    assert switches == [(f"openai:{down}", f"openai:{also_down}", 1), (f"openai:{also_down}", up, 1)]
    assert shown.code == 0, str(shown)
    assert f"fallback: openai:{down} → openai:{also_down} in turn 1" in shown.out
    assert f"fallback: openai:{also_down} → {up} in turn 1" in shown.out
