"""The webhook ingress: `POST /hooks/{name}` starts a run (or messages a session) once per
delivery, and answers 202 `{"run_id", "started", "hook"}` as soon as it is started, never waiting
for the run. `client.py serve-hooks` serves it; `build_app` is its Python face.

In order, a request is refused with one line: an unknown hook 404; a body over `max_body` bytes
413; not JSON by its Content-Type 415; a delivery id header that is not one 400; unsigned, wrongly
signed or stale 401 (nothing is parsed or started before the signature holds); a body that is not
JSON 400; a field the input needs missing 422; a session's hook whose session is not running 409
(nothing sent); Temporal unreachable 503. Slack's signed
`url_verification` challenge is answered (200) and starts nothing. Secrets and signatures are
never logged or echoed. The run is keyed on a delivery id the signature covers (see `_delivery`).

With a completion key (COMPLETION_SECRET), `POST /complete/{run_id}/{call_id}?exp=…&sig=…` completes
a call waiting for an outside completion (config/completion.py signs the URL; docs/outside-completion.md):
`{"result": <JSON of the tool's result type>}` or `{"fail": "why"}`, and optionally `"by"`. It answers
200 with the receipt; a bad or expired signature 401; an unknown run or call 404; a call already
completed (or a run that ended) 409, naming who completed it; a result of the wrong type 422."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.service import RPCError

from durable_agent_runner.client import deliveries
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import MAX_PROMPT_CHARS
from durable_agent_runner.client.errors import AgentRunError, DecisionRefused, NoWorkerAnswered, RunNotFound
from durable_agent_runner.config import completion
from durable_agent_runner.machine.bounds import OutsideDataError, parse_json
from durable_agent_runner.webhooks import signatures
from durable_agent_runner.webhooks.config import MAX_BODY, Hook, MissingField, pick, render

MAX_DELIVERY_ID = 1000
LOG = logging.getLogger("durable_agent_runner.webhooks")
JSON_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json\s*(?:;.*)?", re.IGNORECASE)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Ingress:
    """The hooks served, their keys read once, and the client that starts their runs."""

    def __init__(
        self,
        client: AgentClient,
        hooks: dict[str, Hook],
        *,
        max_body: int = MAX_BODY,
        clock: Callable[[], float] = time.time,
        completion_key: bytes | None = None,
    ) -> None:
        self.client = client
        self.hooks = hooks
        self.keys = {name: hook.key() for name, hook in hooks.items()}
        self.max_body = max_body
        self.clock = clock
        self.completion_key = completion_key  # None: no completion URL is served

    async def complete(self, request: Request) -> Response:
        """A signed completion URL's POST: checked, then sent as the `complete_call` update."""
        run_id, call_id = str(request.path_params["run_id"]), str(request.path_params["call_id"])
        if self.completion_key is None:
            raise Refused(404, "this ingress serves no completion URLs (COMPLETION_SECRET is not set)")
        body = await self._body(request)
        query = request.query_params
        unsigned = completion.check(
            self.completion_key, run_id, call_id, query.get("exp", ""), query.get("sig", ""), self.clock()
        )
        if unsigned is not None:
            LOG.warning("completion of %s %s refused: %s", run_id[:200], call_id[:200], unsigned)
            raise Refused(401, unsigned)
        if not JSON_TYPE.fullmatch(request.headers.get("content-type", "")):
            raise Refused(415, "send the body as JSON (Content-Type: application/json)")
        try:
            parsed = parse_json(body.decode("utf-8"))
        except (UnicodeDecodeError, OutsideDataError) as err:
            raise Refused(400, f"the body is not valid JSON: {err}"[:300]) from None
        if (
            not isinstance(parsed, dict)
            or set(parsed) - {"result", "fail", "by"}
            or ("result" in parsed) == ("fail" in parsed)
        ):
            raise Refused(422, 'send {"result": <JSON>} or {"fail": "why"} (and optionally "by")')
        if parsed.get("result", 0) is None:
            raise Refused(422, 'the result is null: send a value, or {"fail": "why"}')
        by = parsed.get("by", "completion URL")
        try:
            receipt = await self.client.get(run_id).complete_call(
                call_id, parsed.get("result"), fail=parsed.get("fail"), by=by if isinstance(by, str) else str(by)
            )
        except RunNotFound as err:
            raise Refused(404, str(err)) from None
        except DecisionRefused as err:
            status = {"UnknownCall": 404, "InvalidResult": 422, "InvalidCompletion": 422}.get(err.kind, 409)
            raise Refused(status, str(err)[:2000]) from None
        except (ValueError, TypeError) as err:  # the client's checks: a bad fail reason, by, or value
            raise Refused(422, str(err)[:300]) from None
        except (NoWorkerAnswered, AgentRunError, RPCError) as err:
            raise Refused(503, f"could not complete the call: {err}"[:300]) from None
        LOG.info("completion of %s %s by %s: %s", run_id[:200], call_id[:200], receipt.by, receipt.outcome)
        return JSONResponse({"run_id": run_id, **receipt.model_dump(mode="json")})

    async def receive(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        hook = self.hooks.get(name)
        if hook is None:
            raise Refused(404, "no such hook")
        body = await self._body(request)
        if not JSON_TYPE.fullmatch(request.headers.get("content-type", "")):
            raise Refused(415, "send the body as JSON (Content-Type: application/json)")
        header, field = hook.delivery_source()
        signed_id = self._signed_id(header, request)
        unsigned = signatures.check(hook.kind, self.keys[name], request.headers, body, self.clock(), signed_id)
        if unsigned is not None:
            LOG.warning("hook %s: refused an unsigned request (%s)", name, unsigned)
            raise Refused(401, unsigned)
        try:
            parsed = parse_json(body.decode("utf-8"))
        except (UnicodeDecodeError, OutsideDataError) as err:
            raise Refused(400, f"the body is not valid JSON: {err}"[:300]) from None
        if hook.kind == "slack" and isinstance(parsed, dict) and parsed.get("type") == "url_verification":
            # Slack checks a new Events API URL with a signed challenge, answered, never a run.
            return JSONResponse({"challenge": str(parsed.get("challenge", ""))[:200]})
        delivery, source = self._delivery(header, signed_id, field, body, parsed)
        text = self._input(hook, parsed, request)
        run_id = deliveries.delivery_run_id(f"hook-{name}", delivery)
        temporal, queue = self.client.temporal, self.client.task_queue
        try:
            if hook.session is not None:
                done = await deliveries.send_once(temporal, queue, run_id, hook.session, text, by=f"hook {name}")
            else:
                done = await deliveries.start_once(temporal, queue, run_id, hook.agent, text, source=f"hook {name}")
        except RPCError as err:
            raise Refused(503, f"could not start the run: Temporal said: {err.message}"[:300]) from None
        except deliveries.NoSession as err:  # nothing was sent: a sender may try again once it runs
            raise Refused(409, str(err)[:300]) from None
        except ValueError as err:  # the client's check of the input (a session's message is at most 200,000 characters)
            raise Refused(422, f"the hook's input is refused: {err}"[:300]) from None
        LOG.info(
            "hook %s: delivery by %s -> %s (%s)", name, source, done.run_id, "started" if done.started else "repeat"
        )
        return JSONResponse({**done.model_dump(exclude_none=True), "hook": name, "delivery": source}, 202)

    async def _body(self, request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None and not re.fullmatch(r"[0-9]{1,12}", length):
            raise Refused(400, "the Content-Length header is not a number")
        if length is not None and int(length) > self.max_body:
            raise Refused(413, f"the body is larger than {self.max_body:,} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                raise Refused(413, f"the body is larger than {self.max_body:,} bytes")
        return bytes(body)

    @staticmethod
    def _signed_id(header: str | None, request: Request) -> str:
        """The value of the delivery id header the signature covers ("" if the hook has none, or it
        is not sent). No '.', so `{timestamp}.{id}.{body}` splits one way only."""
        value = request.headers.get(header.lower(), "") if header else ""
        if value and (len(value) > MAX_DELIVERY_ID or not value.isprintable() or "." in value):
            raise Refused(
                400, f"the {header} header is not a delivery id (1-{MAX_DELIVERY_ID} printable characters, no '.')"
            )
        return value

    @staticmethod
    def _delivery(header: str | None, signed_id: str, field: str | None, body: bytes, parsed: Any) -> tuple[str, str]:
        """The delivery's id and where it came from, each covered by the signature: the signed id
        header (generic), a field of the body, or (neither given) the body's digest, so the same
        body posted again is the same delivery (a github hook's: GitHub does not sign its id)."""
        if signed_id:
            return signed_id, f"header {header}"
        if field:
            try:
                found = pick(parsed, field)
            except MissingField:
                found = None
            if isinstance(found, str | int) and not isinstance(found, bool) and str(found).strip():
                return str(found)[:MAX_DELIVERY_ID], f"field {field}"
        return "body:" + hashlib.sha256(body).hexdigest(), "body digest"

    def _input(self, hook: Hook, parsed: Any, request: Request) -> str:
        try:
            if hook.build is not None:
                text = hook.build(parsed, dict(request.headers))
                if not isinstance(text, str):
                    raise Refused(500, f"hook {hook.name}: its builder returned {type(text).__name__}, not text")
            else:
                text = render(hook.input, parsed)
        except MissingField as err:
            raise Refused(422, str(err)) from None
        except Refused:
            raise
        except Exception as err:  # a user's builder: one line, never a trace
            raise Refused(500, f"hook {hook.name}: its builder failed: {type(err).__name__}: {err}"[:300]) from None
        if not text.strip():
            raise Refused(422, "the hook's input is empty for this body")
        if len(text) > MAX_PROMPT_CHARS:
            raise Refused(413, "the hook's input is too long for a run")
        return text


def build_app(
    client: AgentClient,
    hooks: dict[str, Hook],
    *,
    max_body: int = MAX_BODY,
    clock: Callable[[], float] = time.time,
    completion_key: bytes | None = None,
) -> Starlette:
    """The ingress as an ASGI app (serve it with uvicorn, or mount it in your own); with
    `completion_key`, it serves signed completion URLs too."""
    ingress = Ingress(client, hooks, max_body=max_body, clock=clock, completion_key=completion_key)

    def answering(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except Refused as err:
                return JSONResponse({"error": err.message}, err.status)
            except Exception as err:  # one line, never a trace
                return JSONResponse({"error": f"the ingress could not do that: {type(err).__name__}"}, 500)

        return answer

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "hooks": sorted(hooks)})

    routes = [
        Route("/hooks/{name}", answering(ingress.receive), methods=["POST"]),
        Route("/complete/{run_id}/{call_id}", answering(ingress.complete), methods=["POST"]),
        Route("/healthz", health),
    ]
    app = Starlette(routes=routes)
    app.state.ingress = ingress
    return app


__all__ = ["MAX_BODY", "Ingress", "build_app"]
