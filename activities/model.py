"""The model-call activity: one call to a model over raw httpx, whichever provider serves it
(activities/providers.py chooses the endpoint and its wire; every wire is a pure module).

The activity's input names a turn, not a transcript: it reads the agent and the messages from
the workflow with a query (`agent.model_context`), so each message enters history exactly once
(as the result of the activity that produced it) and per-turn history stays flat. A query reads
the workflow's state, rebuilt from history, so this is exactly as durable as Temporal itself.

Every wait has a bound: a read timeout per request (no byte for that long ends the attempt,
streamed or not), the agent's model timeout per attempt, and caps on what a server may send.
Everything built from the server's bytes is masked with the worker's `Redactor`. One attempt's
state, with the streamed text watchers see, is activities.model_call's `Call`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pydantic_core
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from durable_agent_runner import telemetry
from durable_agent_runner.activities import errors
from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.activities.model_call import Call
from durable_agent_runner.activities.prices import PriceTable
from durable_agent_runner.activities.providers import Endpoint, Providers, ProviderUnavailable
from durable_agent_runner.activities.sse import LineTooLong, iter_lines
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.activities.wire import BadSettings, MalformedResponse, StreamFailed, parse_body
from durable_agent_runner.agents.lifecycle import HookCaller, ModelAttempt, ModelResponse
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine.budget import capped
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import (
    MODEL_CALL_ACTIVITY,
    MODEL_CONTEXT_QUERY,
    AgentSpec,
    AssistantMessage,
    Message,
    ModelCallInput,
    ModelContext,
    ModelContextQuery,
    ModelProgress,
    ModelReply,
)

log = logging.getLogger(__name__)


def endpoint_for(providers: Providers, model: str | None, agent: AgentSpec) -> Endpoint:
    """The endpoint of `model` for `agent`; one this worker cannot reach fails for good (a run
    with fallback models goes on to the next: machine/fallback.py)."""
    try:
        return providers.endpoint(model, agent.api)
    except ProviderUnavailable as err:
        raise ApplicationError(str(err), type="ModelProviderUnavailable", non_retryable=True) from None
    except ValueError as err:  # a provider's prefix with no model after it
        raise ApplicationError(str(err), type="ModelSettingsInvalid", non_retryable=True) from None


def build_request(endpoint: Endpoint, agent: AgentSpec, messages: list[Message], stream: bool) -> dict[str, Any]:
    """The request body for `messages`; settings no server could accept fail for good, since
    the agent's author must fix them and no retry will."""
    try:
        return endpoint.wire.build_request(agent, messages, endpoint.model, stream)
    except BadSettings as err:
        raise ApplicationError(f"agent {agent.name}: {err}", type="ModelSettingsInvalid", non_retryable=True) from None


HEARTBEAT_EVERY = 2.0  # the model call's heartbeat timeout is 10 s: a dead worker is noticed in seconds
PROGRESS_EVERY = 0.05  # seconds between progress heartbeats while a reply streams in
# A reply larger than this is a server gone wrong: a body, one line of a stream, or the text and
# arguments a stream assembles. It bounds what the worker holds.
MAX_REPLY_CHARS = 32 * 1024 * 1024
ERROR_BODY_CHARS = 64 * 1024  # read of an error body: its message is cut to a few hundred anyway
WITH_REPLY_SECONDS = 30.0  # the most a model call spends on the cheap calls it runs with its reply
# Heartbeat details sent after the call's own progress: a call made ahead by a tool's activity
# (activities/ahead.py) keeps the tool's result there, so a retry does not run the tool again.
BEAT_WITH: contextvars.ContextVar[tuple[object, ...]] = contextvars.ContextVar("beat_with", default=())


def beat(details: object = None) -> None:
    """One heartbeat: `details` (None: none) and what BEAT_WITH holds after them."""
    extra = BEAT_WITH.get()
    if extra:
        activity.heartbeat(details, *extra)
    elif details is None:
        activity.heartbeat()
    else:
        activity.heartbeat(details)


@contextlib.asynccontextmanager
async def heartbeating(
    every: float = HEARTBEAT_EVERY, details: Callable[[], object] | None = None
) -> AsyncIterator[None]:
    """Heartbeat in the background so a dead worker is noticed through the heartbeat timeout
    and a cancelled run's call is abandoned promptly. With `details`, each heartbeat carries the
    call's progress, which watchers read live (the SDK throttles what reaches the server)."""

    async def beats() -> None:
        # Progress goes out when it changed; otherwise one keep-alive per HEARTBEAT_EVERY. A model
        # that thinks for seconds then costs the server nothing extra.
        last: object = None
        sent_at = -HEARTBEAT_EVERY
        if activity.info().attempt == 1:
            # Nothing to report yet, nor an earlier attempt's progress to clear: the first beat
            # waits its turn. A call that ends sooner (most do) costs the server no heartbeat.
            await asyncio.sleep(every)
        while True:
            now = time.monotonic()
            current = details() if details is not None else None
            key = (current.offset, current.text, current.malformed) if isinstance(current, ModelProgress) else None
            if key != last or now - sent_at >= HEARTBEAT_EVERY:
                beat(current)
                last, sent_at = key, now
            await asyncio.sleep(every)

    if activity.info().is_local:  # a local activity has no heartbeats: its timeouts bound it
        yield
        return
    task = asyncio.create_task(beats())
    try:
        yield
    finally:
        task.cancel()


async def read_context(client: Client, upto: int) -> tuple[AgentSpec, list[Message]]:
    """The running activity's agent and its run's messages[:upto], read from the workflow by
    query, page by page (the model activity's context; a handoff's input filter reads it too)."""
    info = activity.info()
    assert info.workflow_id, "only an activity of an agent run reads its context"
    handle = client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    messages: list[Message] = []
    start: int | None = 0
    agent: AgentSpec | None = None
    while start is not None:
        query = ModelContextQuery(upto=upto, start=start)
        page = await handle.query(MODEL_CONTEXT_QUERY, query, result_type=ModelContext)
        agent = page.agent
        messages.extend(page.messages)
        start = page.next_start
    assert agent is not None
    return agent, messages


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), built once a
    process: loading the bundle costs about 34 ms of CPU, which each pool paid (each of the
    test suite's ~750 workers)."""
    return httpx.create_ssl_context()


def new_http_client(settings: LLMSettings) -> httpx.AsyncClient:
    """The worker's one connection pool to the model server. No retries here: Temporal owns
    them, so every attempt is visible in the history. Read timeouts are set per request, from
    the agent's bound (see `call_model`)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=settings.connect_timeout),
        transport=httpx.AsyncHTTPTransport(retries=0, verify=_tls()),
    )


class ModelActivities:
    def __init__(
        self,
        client: Client | None,
        settings: LLMSettings,
        http: httpx.AsyncClient,
        cache: ContextCache | None = None,
        hooks: HookCaller | None = None,
        prices: PriceTable | None = None,
        tools: ToolActivities | None = None,
    ) -> None:
        self._client = client
        self._tools = tools  # runs the cheap calls a turn lets come back with the reply (WithReply)
        self._prices = prices or PriceTable()
        self._settings = settings
        self._http = http
        self._cache = cache
        self._hooks = hooks or HookCaller()  # the at-least-once lifecycle hooks (agents/lifecycle.py)
        # Masks the key in everything built from a server's bytes, with or without the worker's
        # RedactingInterceptor: some servers and proxies echo the key they were sent.
        self._redactor = Redactor.for_settings(settings)
        self.providers = Providers(settings)  # each provider's headers, built once

    @property
    def cache(self) -> ContextCache | None:
        return self._cache

    async def read_context(self, upto: int) -> tuple[AgentSpec, list[Message]]:
        assert self._client is not None, "a worker's model activities have a Temporal client"
        return await read_context(self._client, upto)

    @property
    def settings(self) -> LLMSettings:
        return self._settings

    @activity.defn(name=MODEL_CALL_ACTIVITY)
    async def call_model(self, input: ModelCallInput) -> ModelReply:
        began = time.monotonic()
        run = activity.info().workflow_id or ""  # the run's id across continue-as-new: its transcript goes on
        cached = self._cache.lookup(run, input.transcript_len, input.digest) if self._cache else None
        if input.context is not None:  # a local call: the transcript came with it (never in history)
            cached = (input.context.agent, input.context.messages)
        agent, messages = cached or await self.read_context(input.transcript_len)
        return await self.call(input, agent, messages, began)

    async def call(self, input: ModelCallInput, agent: AgentSpec, messages: list[Message], began: float) -> ModelReply:
        """The call `input` asks for, with its context read: the model activity's, or one made
        ahead by a tool's activity (activities/ahead.py). `began`: when its attempt's clock started."""
        run = activity.info().workflow_id or ""
        settings = self._settings
        model = input.model or settings.model
        endpoint = endpoint_for(self.providers, model, agent)
        # A local call has no heartbeats to carry streamed text to watchers: it asks for the whole reply.
        stream = settings.stream and not activity.info().is_local
        asked = capped(agent, input.max_output_tokens)  # what the run's budget has room for
        body = build_request(endpoint, asked, messages, stream)
        path = endpoint.path
        telemetry.model_request(agent, messages, api=path, stream=stream)  # the attempt's span
        capture = input.capture or settings.capture
        hooks = self._hooks
        info = activity.info()
        at = ModelAttempt(
            run_id=info.workflow_id or "", agent=agent.name, turn=input.turn, attempt=info.attempt, model=model,
            api=path, stream=stream,
        )  # fmt: skip
        if hooks.wants("on_model_request"):  # a copy: what a hook does to it is never sent
            await self._hook(input.turn, "on_model_request", at, copy.deepcopy(body))
        keep_raw = capture or hooks.wants("on_model_response")  # a stream's raw lines are kept only then
        reply, call = await self.send(agent, endpoint, body, stream, turn=input.turn, began=began, capture=keep_raw)
        if hooks.wants("on_model_response"):
            response = ModelResponse(
                body=call.payload if not call.stream else None,
                sse_lines=list(call.raw) if call.stream else None,
                reply=reply.model_copy(deep=True),
                usage=reply.usage.model_copy(),
            )
            await self._hook(input.turn, "on_model_response", at, response)
        if self._cache is not None:
            self._cache.remember(run, agent, messages, input.digest, reply.message)
        ahead = input.with_reply
        if (
            ahead is not None
            and self._tools is not None
            and any(c.name in ahead.tools for c in reply.message.tool_calls)
        ):
            # What the attempt has left (less a second for its reply to reach the server), at most
            # WITH_REPLY_SECONDS: a call still running then is not cheap, and the turn runs it.
            bound = min(WITH_REPLY_SECONDS, _attempt_limit(agent) - (time.monotonic() - began) - 1.0)
            if bound > 0:
                earlier = {c.call_id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
                async with heartbeating(HEARTBEAT_EVERY, call.snapshot):
                    reply.tool_results = await self._tools.run_with_reply(
                        agent, input.turn, ahead, reply, bound, earlier
                    )
        if capture:
            attempt = call.progress.attempt
            record = {"api": path, "url": str(call.url), "turn": input.turn, "attempt": attempt, "stream": call.stream}
            record |= {"request": call.body, "response": "".join(call.raw) if not call.stream else call.raw}
            try:
                reply.capture = CaptureStore(settings.capture_dir).put(record, self._redactor)
            except OSError as err:  # a debugging aid: its loss never fails the call (nor reruns its tools)
                log.warning("capture not kept: cannot write LLM_CAPTURE_DIR %s: %s", settings.capture_dir, err.strerror)
        log.info(
            "model call ok: agent=%s model=%s turn=%d tool_calls=%d tokens=%d",
            agent.name, model, input.turn, len(reply.message.tool_calls), reply.usage.total_tokens,
        )  # fmt: skip
        reply.received_at = datetime.now(UTC)
        return reply

    async def _hook(self, turn: int, name: str, *args: object) -> None:
        """An at-least-once hook, bounded by its timeout, heartbeating meanwhile with the details
        a failed earlier attempt left (its count of malformed replies)."""
        progress = ModelProgress(turn=turn, attempt=activity.info().attempt, malformed=_earlier_malformed())
        async with heartbeating(HEARTBEAT_EVERY, lambda: progress):
            await self._hooks.call(name, *args)

    async def send(
        self,
        agent: AgentSpec,
        endpoint: Endpoint,
        body: dict[str, Any],
        stream: bool,
        *,
        turn: int,
        began: float,
        capture: bool = False,
    ) -> tuple[ModelReply, Call]:
        """One attempt at one request (`body`, streamed or not) to `endpoint`, within the agent's
        bounds: its read timeout, and its model timeout counted from `began`. Heartbeats all along
        (streamed text as progress); failures come out as retryable or not (activities/errors.py),
        masked. The `Call` keeps the raw reply when `capture`."""
        settings = self._settings
        read = agent.model_read_timeout_seconds or settings.read_timeout
        call = Call(
            wire=endpoint.wire,
            url=endpoint.url(stream),
            body=body,
            headers=endpoint.headers,
            stream=stream,
            turn=turn,
            timeout=httpx.Timeout(read, connect=settings.connect_timeout),
            redactor=self._redactor,
            progress=ModelProgress(turn=turn, attempt=activity.info().attempt, malformed=_earlier_malformed()),
            capture=capture,
        )
        every = PROGRESS_EVERY if call.stream else HEARTBEAT_EVERY
        # Ends a little before Temporal's own timeout would, so the attempt fails saying why.
        limit = _attempt_limit(agent)
        deadline = asyncio.timeout(max(limit - min(1.0, limit / 10) - (time.monotonic() - began), 0.0))
        mask = self._redactor.text
        async with heartbeating(every, call.snapshot):
            try:
                async with deadline:
                    reply = await self._send(call)
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise errors.attempt_timeout(limit) from None
            except httpx.TransportError as err:
                raise errors.from_transport(err, endpoint.base_url, self._redactor) from None
            except MalformedResponse as err:
                # Count bad bodies, not attempts: 429s and crashes before it must not use up
                # the few retries a garbage-sending server gets. The next attempt reads this.
                call.progress.malformed += 1
                beat(call.reset())
                raise errors.malformed(mask(str(err)), call.progress.malformed) from None
            except StreamFailed as err:
                raise ApplicationError(mask(str(err)), type="ModelStreamFailed") from None
        reply.usage = self._prices.priced(reply.usage, endpoint.model)
        return reply, call

    async def _send(self, call: Call) -> ModelReply:
        mask = self._redactor.text
        content = pydantic_core.to_json(call.body)  # Rust's encoder: a quarter of the CPU of httpx's json= (json.dumps)
        async with self._http.stream(
            "POST", call.url, content=content, headers=call.headers, timeout=call.timeout
        ) as response:
            if response.status_code != 200:
                body, cut = await _read(response, ERROR_BODY_CHARS)
                raise errors.from_status(response, body, self._redactor, cut=cut)
            if not call.stream:
                text, cut = await _read(response, MAX_REPLY_CHARS)
                if cut:
                    raise MalformedResponse(f"reply longer than {MAX_REPLY_CHARS} characters")
                call.raw.append(text)
                payload = parse_body(text, mask=mask)
                call.payload = payload
                return call.wire.parse_response(payload, call.turn, mask=mask)
            try:
                lines = iter_lines(call.count(response.aiter_text()), MAX_REPLY_CHARS)
                return await call.wire.parse_stream(
                    call.tee(lines) if call.capture else lines,
                    call.turn,
                    on_delta=call.delta,
                    mask=mask,
                    limit=MAX_REPLY_CHARS,
                )
            except LineTooLong as err:
                raise MalformedResponse(str(err)) from None
            except httpx.TimeoutException:
                raise
            except httpx.TransportError as err:  # the connection dropped mid-stream
                raise StreamFailed(f"stream cut off mid-way: {err}") from err


async def _read(response: httpx.Response, limit: int) -> tuple[str, bool]:
    """The body's text, at most `limit` characters, and whether there was more: a server
    must not make the worker hold a body of any size."""
    parts: list[str] = []
    size = 0
    async for chunk in response.aiter_text():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return "".join(parts)[:limit], True
    return "".join(parts), False


def _attempt_limit(agent: AgentSpec) -> float:
    """How long one attempt may take: the agent's model timeout, or Temporal's start-to-close
    timeout when that is shorter."""
    limit = agent.model_timeout_seconds
    start_to_close = activity.info().start_to_close_timeout
    return min(limit, start_to_close.total_seconds()) if start_to_close else limit


def _earlier_malformed() -> int:
    details = activity.info().heartbeat_details
    if not details:
        return 0
    try:
        return ModelProgress.model_validate(details[0]).malformed
    except ValueError:
        return 0
