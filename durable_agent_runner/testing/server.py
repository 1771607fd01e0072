"""`ModelServer`: fake_llm's OpenAI-compatible server answering with an offline model.

It speaks both wires (Chat Completions and Responses), streamed or not, and records each model
call as a typed `ModelRequest` (`requests`, `requests_for(agent)`; the latest MAX_REQUESTS).
fake_llm's faults and latency still apply (`fake`). A model's async function runs on the event
loop that entered `serve()`. A session's compaction (a request to summarize the conversation) is
answered as fake_llm's default scenarios answer it, so a scripted agent's session can compact.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.scripts import Scripts, reply_of
from durable_agent_runner.testing.fake_llm.server import LLMServer
from durable_agent_runner.testing.fake_llm.wire import Reply
from durable_agent_runner.testing.request import ModelRequest, describe, failure
from durable_agent_runner.testing.scenarios.basic import is_summary_request, summarize

if TYPE_CHECKING:
    from durable_agent_runner.testing.models import OfflineModel

ASYNC_ANSWER_SECONDS = 60.0  # the most a model's async function may take for one answer
MAX_REQUESTS = 10_000  # the requests kept for asserts: a long-lived server (the demo's) stays bounded


class ModelServer:
    """A running offline model: `base_url` for LLMSettings / LLM_BASE_URL, `requests` for asserts."""

    def __init__(self, model: OfflineModel, fake: LLMServer, loop: asyncio.AbstractEventLoop) -> None:
        self.model = model
        self.fake = fake  # the underlying fake_llm server: faults, latency, the raw request log
        self._loop = loop
        self._lock = threading.Lock()
        self._requests: deque[ModelRequest] = deque(maxlen=MAX_REQUESTS)

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    def settings(self, **fields: Any) -> LLMSettings:
        """A worker's model settings that reach this server on every wire: OpenAI-compatible at
        `base_url`, and the providers a model string names ("anthropic:…", "gemini:…", "openai:…")
        at its root, each with a placeholder key (the fake asks for one, as the real APIs do)."""
        root = self.fake.base_url.removesuffix("/v1")
        key = "offline-model-key"
        return LLMSettings(
            base_url=self.base_url,
            openai_base_url=self.base_url,
            openai_api_key=key,
            anthropic_base_url=root,
            anthropic_api_key=key,
            gemini_base_url=root,
            gemini_api_key=key,
            **fields,
        )

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

    def answer(self, conv: Conversation, scripts: Scripts) -> Reply:
        """fake_llm's responder: runs in a server thread, once per model call."""
        if is_summary_request(conv):
            return reply_of(conv, summarize(conv))
        request = self.model.request(conv)
        with self._lock:
            self._requests.append(request)
        return reply_of(conv, self.model.answer(request, self._resolve_for(request)))

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
    fake = LLMServer(host, port)
    server = ModelServer(model, fake, asyncio.get_running_loop())
    fake.state.responder = server.answer  # before it starts: no call is answered otherwise
    fake.start()
    try:
        yield server
    finally:
        # Stopping joins the server's thread, which may wait for this loop (an async answer).
        await asyncio.to_thread(fake.stop)
