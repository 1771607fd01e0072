"""`ModelServer`: fake_llm's OpenAI-compatible server answering with an offline model.

It speaks both wires (Chat Completions and Responses), streamed or not, and records each model
call as a typed `ModelRequest` (`requests`, `requests_for(agent)`). fake_llm's faults and latency
still apply (`fake`). A model's async function runs on the event loop that entered `serve()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.server import FakeLLMServer
from durable_agent_runner.testing.request import Answer, ModelRequest, describe, failure

if TYPE_CHECKING:
    from durable_agent_runner.testing.models import OfflineModel

ASYNC_ANSWER_SECONDS = 60.0  # the most a model's async function may take for one answer


class ModelServer:
    """A running offline model: `base_url` for LLMSettings / LLM_BASE_URL, `requests` for asserts."""

    def __init__(self, model: OfflineModel, fake: FakeLLMServer, loop: asyncio.AbstractEventLoop) -> None:
        self.model = model
        self.fake = fake  # the underlying fake_llm server: faults, latency, the raw request log
        self._loop = loop
        self._lock = threading.Lock()
        self._requests: list[ModelRequest] = []

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    @property
    def requests(self) -> list[ModelRequest]:
        """Every model call the server answered (or refused), oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, agent: str) -> list[ModelRequest]:
        """The model calls of the agent named `agent`, oldest first."""
        return [r for r in self.requests if r.agent == agent]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def answer(self, conv: Conversation) -> Answer:
        """fake_llm's responder: runs in a server thread, once per model call."""
        request = self.model.request(conv)
        with self._lock:
            self._requests.append(request)
        return self.model.answer(request, self._resolve_for(request))

    def _resolve_for(self, request: ModelRequest) -> Any:
        def resolve(awaitable: Awaitable[Any]) -> Any:
            async def wait() -> Any:
                return await awaitable

            future = asyncio.run_coroutine_threadsafe(wait(), self._loop)
            try:
                return future.result(timeout=ASYNC_ANSWER_SECONDS)
            except TimeoutError:
                future.cancel()
                raise failure(
                    type(self.model).__name__,
                    f"{describe(request)}: the function gave no answer in {ASYNC_ANSWER_SECONDS:.0f} s",
                ) from None

        return resolve


@contextlib.asynccontextmanager
async def serve(model: OfflineModel, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[ModelServer]:
    """`model` on an OpenAI-compatible server for as long as the `async with` lasts."""
    model.check()
    fake = FakeLLMServer(host, port)
    server = ModelServer(model, fake, asyncio.get_running_loop())
    fake.state.responder = server.answer
    fake.start()
    try:
        yield server
    finally:
        # Stopping joins the server's thread, which may wait for this loop (an async answer).
        await asyncio.to_thread(fake.stop)
