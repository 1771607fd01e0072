"""`python -m bench.files`: the product files one approval turn runs through.

Issue 32 counted 41 in 1.2 and asks for at most 12 once the 2.0 core is done. This measures it
the same way each time: a run of the `guarded` agent (tests/fixtures/agents.py) whose model asks
for `send`, a tool that always needs a person's approval; the Python client approves it; the tool
runs; the model is called again and answers. That is model → approval → tool → model, start and
end included.

An in-process worker serves the run, and every Python function call (all threads) is traced while
it runs. A first run warms the process up, so modules imported on first use do not count; the
second is measured. A product file is one of the engine's sources (durable_agent_runner/, and the
machine/, workflows/ and activities/ it links), not its test kit. Each file is counted on the side
that ran it: the client (the calls made by the task that starts, approves and awaits the run) or
the worker (everything else: workflow activations, activities, hooks).

`python -m bench.files --why` prints, under each file, the functions of it that ran and the
product function that first called each from another file: why the turn touched that file.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from bench.stack import ROOT, Stack
from durable_agent_runner.client import AgentClient
from tests.helpers import calls, script

ENGINE = [ROOT / d for d in ("durable_agent_runner", "machine", "workflows", "activities")]
TEST_KIT = ROOT / "durable_agent_runner" / "testing"


class Tracer:
    """The product files called while on, by side."""

    def __init__(self) -> None:
        self.on = False
        self.client_task: asyncio.Task[Any] | None = None
        self.seen: dict[str, set[str]] = {"client": set(), "worker": set()}
        self.why: dict[str, dict[str, str]] = {}  # file -> its function -> the first caller from another file
        self._known: dict[str, str | None] = {}  # co_filename -> its repo path, or None

    def product(self, filename: str) -> str | None:
        if filename not in self._known:
            path = Path(filename).resolve()
            inside = any(path.is_relative_to(d.resolve()) for d in ENGINE) and not path.is_relative_to(TEST_KIT)
            self._known[filename] = str(path.relative_to(ROOT)) if inside else None
        return self._known[filename]

    def hook(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.on or event != "call":
            return
        name = self.product(frame.f_code.co_filename)
        if name is None:
            return
        side = "worker"
        if threading.current_thread() is threading.main_thread():
            try:
                task = asyncio.current_task()
            except RuntimeError:
                task = None
            if task is not None and task is self.client_task:
                side = "client"
        self.seen[side].add(name)
        ran = self.why.setdefault(name, {})
        if frame.f_code.co_name not in ran:
            ran[frame.f_code.co_name] = self.caller(frame, name)

    def caller(self, frame: FrameType, name: str) -> str:
        """The nearest product function up the stack that is not in `name`'s own file."""
        back = frame.f_back
        while back is not None:
            other = self.product(back.f_code.co_filename)
            if other is not None and other != name:
                return f"{other} {back.f_code.co_name}"
            back = back.f_back
        return "(outside the product: the SDK, a task)"


async def approval_turn(stack: Stack, queue: str, before: Callable[[], None], after: Callable[[], None]) -> str:
    """One run of `guarded`: model → `send` (approval) → model; the client approves it."""
    assert stack.client is not None
    model = script(stack.llm, calls(("send", {"label": "report"})), {"content": "sent it"})
    agents = AgentClient(stack.client, task_queue=queue)
    before()
    run = await agents.start("guarded", "Send the report.", model=model)
    for _ in range(600):
        status = await run.status()
        if status.pending_approvals:
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError("the run never asked for approval")
    await run.approve(status.pending_approvals[0].call_id, by="bench")
    answer = await run.result(wait=60)
    after()
    return str(answer)


async def measure() -> Tracer:
    stack = Stack(Path(tempfile.mkdtemp(prefix="bench-files-")), worker_mode="inproc")
    stack.start()
    tracer = Tracer()
    sys.setprofile(tracer.hook)
    threading.setprofile(tracer.hook)
    try:
        await stack.connect()
        async with stack.worker() as worker:
            await approval_turn(stack, worker.queue, lambda: None, lambda: None)  # the warm-up

            def begin() -> None:
                tracer.client_task = asyncio.current_task()
                tracer.on = True

            def end() -> None:
                tracer.on = False

            answer = await approval_turn(stack, worker.queue, begin, end)
            assert answer == "sent it", answer
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        stack.close()
    return tracer


def main() -> None:
    why = "--why" in sys.argv[1:]
    tracer = asyncio.run(measure())
    seen = {side: sorted(names) for side, names in tracer.seen.items()}
    every = sorted(set(seen["client"]) | set(seen["worker"]))
    print(f"one approval turn (model → approval → tool → model) ran through {len(every)} product files:")
    for side in ("worker", "client"):
        print(f"\n{side} side: {len(seen[side])} files")
        for name in seen[side]:
            print(f"  {name}")
            for function, caller in sorted(tracer.why[name].items()) if why else ():
                if not function.startswith("<"):  # comprehensions and lambdas: their function says it
                    print(f"      {function}  <- {caller}")


if __name__ == "__main__":
    main()
