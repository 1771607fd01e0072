"""The model-call activity: one call to an OpenAI-compatible server over raw httpx.

The activity's input names a turn, not a transcript: it reads the agent and the messages from
the workflow with a query (`agent.model_context`), so each message enters history exactly once
(as the result of the activity that produced it) and per-turn history stays flat. A query reads
the workflow's state, rebuilt from history, so this is exactly as durable as Temporal itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities import chat_wire, errors, responses_wire
from activities.capture import CaptureStore
from activities.context_cache import ContextCache
from activities.settings import LLMSettings
from workflows.types import (
    MODEL_CALL_ACTIVITY,
    MODEL_CONTEXT_QUERY,
    AgentSpec,
    Message,
    ModelCallInput,
    ModelContext,
    ModelContextQuery,
    ModelProgress,
    ModelReply,
)

log = logging.getLogger(__name__)


class Wire(Protocol):
    """What activities.chat_wire and activities.responses_wire both provide."""

    def build_request(self, agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]: ...
    def parse_response(self, body: object, turn: int) -> ModelReply: ...
    async def parse_stream(
        self, lines: AsyncIterator[str], turn: int, *, on_delta: Callable[[str], None] | None = None
    ) -> ModelReply: ...


HEARTBEAT_EVERY = 2.0  # the model call's heartbeat timeout is 10 s: a dead worker is noticed in seconds
PROGRESS_EVERY = 0.1  # seconds between progress heartbeats while a reply streams in


@contextlib.asynccontextmanager
async def heartbeating(
    every: float = HEARTBEAT_EVERY, details: Callable[[], object] | None = None
) -> AsyncIterator[None]:
    """Heartbeat in the background so a dead worker is noticed through the heartbeat timeout
    and a cancelled run's call is abandoned promptly. With `details`, each heartbeat carries the
    call's progress, which watchers read live (the SDK throttles what reaches the server)."""

    async def beat() -> None:
        # Progress goes out when it changed; otherwise one keep-alive per HEARTBEAT_EVERY. A model
        # that thinks for seconds then costs the server nothing extra.
        last: object = None
        sent_at = -HEARTBEAT_EVERY
        while True:
            now = time.monotonic()
            current = details() if details is not None else None
            key = (len(current.text), current.malformed) if isinstance(current, ModelProgress) else None
            if key != last or now - sent_at >= HEARTBEAT_EVERY:
                if current is None:
                    activity.heartbeat()
                else:
                    activity.heartbeat(current)
                last, sent_at = key, now
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def new_http_client(settings: LLMSettings) -> httpx.AsyncClient:
    """The worker's one connection pool to the model server. No retries here: Temporal owns
    them, so every attempt is visible in the history. No read timeout either: the activity's
    start-to-close timeout bounds the call, and heartbeats cover a dead worker."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=settings.connect_timeout),
        transport=httpx.AsyncHTTPTransport(retries=0),
    )


class ModelActivities:
    def __init__(
        self, client: Client, settings: LLMSettings, http: httpx.AsyncClient, cache: ContextCache | None = None
    ) -> None:
        self._client = client
        self._settings = settings
        self._http = http
        self._cache = cache

    async def read_context(self, upto: int) -> tuple[AgentSpec, list[Message]]:
        info = activity.info()
        assert info.workflow_id, "the model activity runs inside an agent run"
        handle = self._client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        messages: list[Message] = []
        start: int | None = 0
        agent: AgentSpec | None = None
        while start is not None:
            page = await handle.query(
                MODEL_CONTEXT_QUERY, ModelContextQuery(upto=upto, start=start), result_type=ModelContext
            )
            agent = page.agent
            messages.extend(page.messages)
            start = page.next_start
        assert agent is not None
        return agent, messages

    @activity.defn(name=MODEL_CALL_ACTIVITY)
    async def call_model(self, input: ModelCallInput) -> ModelReply:
        run = activity.info().workflow_run_id or ""
        cached = self._cache.lookup(run, input.transcript_len, input.digest) if self._cache else None
        agent, messages = cached or await self.read_context(input.transcript_len)
        settings = self._settings
        model = input.model or settings.model
        wire: Wire = responses_wire if (agent.api or settings.api) == "responses" else chat_wire
        path = "responses" if wire is responses_wire else "chat/completions"
        attempt = activity.info().attempt
        progress = ModelProgress(turn=input.turn, attempt=attempt, malformed=_earlier_malformed())
        call = _Call(
            wire=wire,
            url=f"{settings.base_url}/{path}",
            body=wire.build_request(agent, messages, model, settings.stream),
            headers={"Content-Type": "application/json", **settings.auth_headers()},
            stream=settings.stream,
            turn=input.turn,
            secret=settings.api_key.get_secret_value() if settings.api_key else None,
            progress=progress,
        )
        every = PROGRESS_EVERY if call.stream else HEARTBEAT_EVERY
        async with heartbeating(every, lambda: progress):
            try:
                reply = await self._send(call)
            except httpx.TransportError as err:
                raise errors.from_transport(err, settings.base_url, call.secret) from None
            except chat_wire.MalformedResponse as err:
                # Count bad bodies, not attempts: 429s and crashes before it must not use up
                # the few retries a garbage-sending server gets. The next attempt reads this.
                progress.malformed += 1
                progress.text = ""
                activity.heartbeat(progress)
                raise errors.malformed(str(err), progress.malformed) from None
            except chat_wire.StreamFailed as err:
                raise ApplicationError(str(err), type="ModelStreamFailed") from None
        if self._cache is not None:
            self._cache.remember(run, agent, messages, input.digest, reply.message)
        if input.capture or settings.capture:
            record = {"api": path, "url": call.url, "turn": input.turn, "attempt": attempt, "stream": call.stream}
            record |= {"request": call.body, "response": "".join(call.raw) if not call.stream else call.raw}
            reply.capture = CaptureStore(settings.capture_dir).put(record, call.secret)
        log.info(
            "model call ok: agent=%s model=%s turn=%d tool_calls=%d tokens=%d",
            agent.name, model, input.turn, len(reply.message.tool_calls), reply.usage.total_tokens,
        )  # fmt: skip
        return reply

    async def _send(self, call: _Call) -> ModelReply:
        if not call.stream:
            response = await self._http.post(call.url, json=call.body, headers=call.headers)
            if response.status_code != 200:
                raise errors.from_status(response, call.secret)
            call.raw.append(response.text)
            try:
                payload = response.json()
            except (ValueError, json.JSONDecodeError) as err:
                raise chat_wire.MalformedResponse(f"body is not JSON: {response.text[:200]!r}") from err
            return call.wire.parse_response(payload, call.turn)
        async with self._http.stream("POST", call.url, json=call.body, headers=call.headers) as response:
            if response.status_code != 200:
                await response.aread()
                raise errors.from_status(response, call.secret)
            try:
                return await call.wire.parse_stream(call.tee(response.aiter_lines()), call.turn, on_delta=call.delta)
            except httpx.TimeoutException:
                raise
            except httpx.TransportError as err:  # the connection dropped mid-stream
                raise chat_wire.StreamFailed(f"stream cut off mid-way: {err}") from err


def _earlier_malformed() -> int:
    details = activity.info().heartbeat_details
    if not details:
        return 0
    try:
        return ModelProgress.model_validate(details[0]).malformed
    except ValueError:
        return 0


@dataclass
class _Call:
    """One attempt at a model call: what is sent, and what came back raw (for capture)."""

    wire: Wire
    url: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool
    turn: int
    secret: str | None
    progress: ModelProgress
    raw: list[str] = field(default_factory=lambda: list[str]())

    def delta(self, text: str) -> None:
        self.progress.text += text

    async def tee(self, lines: AsyncIterator[str]) -> AsyncIterator[str]:
        async for line in lines:
            self.raw.append(line)
            yield line
