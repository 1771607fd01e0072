"""The console's routes: pages (GET), live streams (GET, SSE) and actions (POST with the CSRF
token). Every refusal is one line and a 4xx: an unknown run 404, a form that is too large 413,
not UTF-8 or not valid 400, a call no longer waiting or a run that refused 409, no worker 503.
Never a stack trace: anything unexpected is one line and a 500."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.service import RPCError

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError, DecisionRefused, NoWorkerAnswered, RunNotFound
from durable_agent_runner.client.schedules import ScheduleNotFound
from durable_agent_runner.console import data, evals_live, links, sse, views, views_evals, views_run, views_schedules
from durable_agent_runner.console import whole as whole_value
from durable_agent_runner.console.forms import (
    bounded_text,
    budget_raise,
    checked_edit,
    edited_arguments,
    resume_refusal,
    run_edit,
    whole,
)
from durable_agent_runner.console.security import Guard, Refused, new_csrf, read_form
from durable_agent_runner.console.views_cases import dataset_path
from durable_agent_runner.machine.bounds import OutsideDataError, parse_json
from durable_agent_runner.workflows import types as t

MAX_ID = 1000
MAX_RAW_CHARS = 32 * 1024 * 1024  # of one value served whole (a message, a call's arguments)


class Console:
    """The console's state: the Python client, who decides by default, the CSRF token."""

    def __init__(self, client: AgentClient, *, by: str, task_queue: str, datasets: Path = Path("evals")) -> None:
        self.client = client
        self.datasets = datasets  # where "Make a case" writes (views_cases.py)
        self.by = by
        self.task_queue = task_queue
        self.csrf = new_csrf()
        self.page_key = secrets.token_bytes(32)  # signs the runs page's next-page links (links.seal)
        self.inbox = data.Inbox()
        self.streams = 0

    def page(self, title: str, body: str, stream: str = "") -> HTMLResponse:
        return HTMLResponse(views.page(title, body, self.csrf, self.by, stream))

    def refusal(self, request: Request, status: int, message: str) -> Response:
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"ok": False, "message": message}, status)
        return HTMLResponse(views.message_page("Refused", message, self.csrf, self.by), status)

    # ------------------------------------------------------------------------------ pages

    async def runs(self, request: Request) -> Response:
        q = request.query_params
        filters = {name: q.get(name, "") for name in data.RUN_FILTERS}
        query = data.runs_query(**filters)
        rows, next_token = await data.runs_page(self.client, query, q.get("page", ""), key=self.page_key)
        return self.page("Runs", views.runs_body(rows, filters, next_token))

    async def inbox_page(self, request: Request) -> Response:
        calls = await self.inbox.read(self.client)
        return self.page("Inbox", views.inbox_body(calls), stream="/inbox/events")

    async def run_page(self, request: Request) -> Response:
        run_id = _run_id(request)
        view = await data.run_view(self.client, run_id)
        stream = "" if view.status["status"] in t.ENDED_STATUSES else f"{quote(run_id, safe='')}/events"
        stream = f"/runs/{stream}?since={view.next_event}" if stream else ""
        return self.page(f"Run {run_id}", views_run.run_body(view), stream=stream)

    async def schedules_page(self, request: Request) -> Response:
        rows = await self.client.schedules.list(limit=views_schedules.MAX_ROWS + 1)
        return self.page("Schedules", views_schedules.schedules_body(rows))

    async def evals_page(self, request: Request) -> Response:
        rows = await self.client.evals.list(limit=views_evals.MAX_ROWS)
        return self.page("Evals", views_evals.evals_body(rows))

    async def eval_page(self, request: Request) -> Response:
        eval_id = _run_id(request, "eval_id")
        status, now, diff = await evals_live.eval_view(self.client, eval_id)
        stream = "" if status.phase in evals_live.ENDED else f"{links.eval_href(eval_id)}/events"
        return self.page(f"Eval {eval_id}", views_evals.eval_body(status, now, diff), stream=stream)

    async def eval_events(self, request: Request) -> Response:
        return self._stream(evals_live.eval_stream(self.client, _run_id(request, "eval_id")))

    # ------------------------------------------------------------------ whole values (GET)

    async def message_whole(self, request: Request) -> Response:
        """One message of a run whole, as plain text (a page shows views.CUT characters of it)."""
        run_id = _run_id(request)
        index = whole(str(request.path_params["index"]), "a message index")
        try:
            found = await whole_value.message_at(self.client, run_id, index)
        except (RPCError, AgentRunError) as err:
            raise Refused(503, f"no worker answered for run {run_id}: its messages need one ({err})"[:500]) from None
        if found is None:
            raise Refused(404, f"run {run_id} has no message {index}")
        return _raw(views_run.raw_message(found), "text/plain")

    async def arguments_whole(self, request: Request) -> Response:
        """A waiting call's arguments whole, as JSON (a page shows views.CUT characters of them)."""
        arguments = await whole_value.call_arguments(self.client, _run_id(request), _call_id(request))
        return _raw(views.pretty(arguments), "application/json")

    # ---------------------------------------------------------------------------- streams

    def _stream(self, source: Any) -> Response:
        if self.streams >= sse.MAX_STREAMS:
            return Response("too many live pages open: close some and reload", 503)

        async def counted() -> Any:
            self.streams += 1
            try:
                async for chunk in source:
                    yield chunk
            finally:
                self.streams -= 1

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(counted(), media_type="text/event-stream", headers=headers)

    async def inbox_events(self, request: Request) -> Response:
        return self._stream(sse.inbox_stream(self.client, self.inbox))

    async def run_events(self, request: Request) -> Response:
        since = whole(request.query_params.get("since", "0"), "since")
        run_id = _run_id(request)
        await data.run_is_live(self.client, run_id)  # NotFound: 404 at once, no stream
        return self._stream(sse.run_stream(self.client, run_id, since))  # an ended run's: its last state, `end`

    # ---------------------------------------------------------------------------- actions

    async def decide(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        verdict = form.get("verdict", "")
        if verdict not in ("approve", "reject"):
            raise Refused(400, "verdict must be approve or reject")
        reason = form.get("reason", "").strip()
        if verdict == "reject" and not reason:
            raise Refused(400, "give a reason to reject: the model is told it")
        receipt = await data.decide_call(
            self.client,
            _run_id(request),
            _call_id(request),
            approve=verdict == "approve",
            by=self._by(form),
            reason=reason,
        )
        self.inbox.forget()
        done = f"{receipt.call_id} {'approved' if receipt.approved else 'rejected'} by {self._by(form)}"
        return await self._approved(_run_id(request), done) if receipt.approved else _done(done)

    async def _approved(self, run_id: str, done: str) -> Response:
        """An approval's answer, with what no worker takes said now (`stalled: …`, as `client.py
        approve` says it), not left to sit in "running approved tools"."""
        waits = await data.unserved(self.client, run_id)
        text = done + "".join(f"\nstalled: {wait['message']}" for wait in waits)
        return _done(text, unserved=waits)

    async def edit_args(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        arguments = edited_arguments(form)
        run_id, call_id = _run_id(request), _call_id(request)
        waiting = await whole_value.waiting_call(self.client, run_id, call_id)
        if waiting is not None:  # else the run says why it is not (no longer waiting, no worker)
            arguments = checked_edit(form, arguments, waiting)
        same = waiting is not None and arguments == waiting.call.arguments  # an approval as it is
        receipt = await data.decide_call(
            self.client, run_id, call_id, approve=True, by=self._by(form), arguments=None if same else arguments
        )
        self.inbox.forget()
        how = "with its arguments unchanged" if same else "with edited arguments"
        return await self._approved(run_id, f"{receipt.call_id} approved {how} by {self._by(form)}")

    async def resolve(self, request: Request) -> Response:
        """Rerun, Result or Fail a call in doubt. A result is checked as `client.py resolve
        --result` checks it (bounds.parse_json): a refusal is shown inline, nothing is recorded."""
        form = await read_form(request, self.csrf)
        choice = form.get("choice", "")
        if choice not in ("rerun", "result", "fail"):
            raise Refused(400, "choose Rerun, Result or Fail")
        result, reason = form.get("result", "").strip(), form.get("reason", "").strip()
        if choice == "result":
            if not result:
                raise Refused(400, "give the result as JSON: what the tool returned")
            try:
                parse_json(result)
            except OutsideDataError as err:
                why = f"result is not valid JSON: {err}" if err.bound is None else f"result is {err}"
                raise Refused(400, why) from None
        if choice == "fail" and not reason:
            raise Refused(400, "give a reason to fail it: the model is told it")
        doubt = form.get("doubt", "").strip()
        receipt = await data.resolve(
            self.client,
            _run_id(request),
            _call_id(request),
            choice,
            by=self._by(form),
            result=result if choice == "result" else None,
            reason=reason if choice == "fail" else "",
            doubt=whole(doubt, "doubt") if doubt else None,
        )
        self.inbox.forget()
        words = {"rerun": "runs again", "result": "has the given result", "fail": "is told the model as failed"}
        return _done(f"{receipt.call_id} {words[receipt.action]}: resolved by {receipt.by}")

    async def answer(self, request: Request) -> Response:
        """Answer an `ask_person` question: a choice's button, or the text box. The run refuses a
        choice outside the list or an empty answer (shown inline; nothing is recorded)."""
        form = await read_form(request, self.csrf)
        choice = form.get("choice", "").strip()
        text = None if choice else form.get("text", "")
        number = whole(choice, "choice") if choice else None
        receipt = await data.answer(self.client, _run_id(request), _call_id(request), text, number, self._by(form))
        self.inbox.forget()
        picked = f" (choice {receipt.choice})" if receipt.choice is not None else ""
        return _done(f"{receipt.call_id} answered{picked} by {receipt.by}: {receipt.answer}")

    async def send(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        text = form.get("text", "")
        if not text.strip():
            raise Refused(400, "the message is empty")
        if len(text) > t.MAX_MESSAGE_CHARS:
            raise Refused(413, f"the message is longer than {t.MAX_MESSAGE_CHARS:,} characters")
        receipt = await data.send(self.client, _run_id(request), text, self._by(form))
        return _done(f"message {receipt.message} sent" + (f" ({receipt.queued} ahead)" if receipt.queued else ""))

    async def pause(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        status = await data.pause(self.client, _run_id(request), self._by(form), bounded_text(form, "reason", 1000))
        return _done(f"pauses at its next safe point (now: {status.phase}, turn {status.turn})")

    async def resume(self, request: Request) -> Response:
        """Resume a paused run, one paused on its budget with it raised (`client.py resume
        --add-tokens N --add-usd X`), or raise alone a session's budget while it waits for its next
        message (`between`). A refusal is in the console's words (forms.resume_refusal)."""
        form = await read_form(request, self.csrf)
        tokens, usd = budget_raise(form)
        try:
            status = await data.resume(self.client, _run_id(request), self._by(form), tokens, usd)
        except DecisionRefused as err:
            if (said := resume_refusal(err, form)) is not None:
                raise Refused(409, said) from None
            raise
        raised = " and ".join(x for x in (f"{tokens:,} tokens" if tokens else "", f"${usd:g}" if usd else "") if x)
        if raised and status.phase == t.Phase.WAITING_FOR_MESSAGE:
            return _done(f"budget raised by {raised} by {self._by(form)}; the session waits for its next message")
        return _done(f"resumed by {self._by(form)}" + (f", its budget raised by {raised}" if raised else ""))

    async def edit(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        receipt = await data.edit(self.client, _run_id(request), run_edit(form, self._by(form)))
        return _done(f"{receipt.summary} ({receipt.items} items now)")

    async def fork(self, request: Request) -> Response:
        form = await read_form(request, self.csrf)
        at = whole(form.get("at_turn", "").strip(), "fork at turn N: N", low=1)
        new_id = await data.fork(self.client, _run_id(request), at, bounded_text(form, "prompt", 4000), self.task_queue)
        return _done(f"forked as {new_id}", redirect=f"/runs/{quote(new_id, safe='')}")

    async def make_case(self, request: Request) -> Response:
        """The run, before model call N, as a case of a dataset file in the datasets folder."""
        form = await read_form(request, self.csrf)
        path = dataset_path(self.datasets, form.get("dataset", ""))
        at = whole(form.get("at_turn", "").strip(), "before model call N: N", low=1) if form.get("at_turn") else None
        expected = bounded_text(form, "expected", 4000) or None
        self.datasets.mkdir(parents=True, exist_ok=True)
        case = await self.client.evals.add_case(path, _run_id(request), at_turn=at, expected=expected)
        return _done(f"added case {case.name!r} to {path}")

    async def eval_resume(self, request: Request) -> Response:
        """Raise the budget of an eval paused on it (evals_live.raise_budget), its page's raise form."""
        form = await read_form(request, self.csrf)
        tokens, usd = budget_raise(form)
        done = await evals_live.raise_budget(self.client, _run_id(request, "eval_id"), tokens, usd, data.WAIT)
        self.inbox.forget()
        return _done(done)

    async def schedule_action(self, request: Request) -> Response:
        """Pause, unpause or trigger a schedule; a pause or unpause reloads the page with its new state."""
        form = await read_form(request, self.csrf)
        name, verb = str(request.path_params["name"]), str(request.path_params["verb"])
        schedules = self.client.schedules
        try:
            if verb == "trigger":
                return _done(f"{name}: {(await schedules.trigger(name)).message}")
            if verb == "pause":
                await schedules.pause(name, f"paused by {self._by(form)} in the console")
            elif verb == "unpause":
                await schedules.unpause(name, f"unpaused by {self._by(form)} in the console")
            else:
                raise Refused(404, "a schedule's actions are pause, unpause and trigger")
        except ScheduleNotFound as err:
            raise Refused(404, str(err)) from None
        return _done(f"{name} {verb}d by {self._by(form)}", redirect="/schedules")

    def _by(self, form: dict[str, str]) -> str:
        return bounded_text(form, "by", 200).strip() or self.by


def _run_id(request: Request, key: str = "run_id") -> str:
    run_id = str(request.path_params[key])
    if not run_id or len(run_id) > MAX_ID or not run_id.isprintable():
        raise Refused(400, f"a run id is 1-{MAX_ID} printable characters")
    return run_id


def _call_id(request: Request) -> str:
    call_id = str(request.path_params["call_id"])
    if not call_id or len(call_id) > 200 or not call_id.isprintable():
        raise Refused(400, "a call id is 1-200 printable characters")
    return call_id


def _raw(text: str, media_type: str) -> Response:
    """A value whole, never run as a page: not HTML (a tool's result may hold a script), not
    sniffed, sandboxed; at most MAX_RAW_CHARS (the rest is said to be cut)."""
    if len(text) > MAX_RAW_CHARS:
        text = text[:MAX_RAW_CHARS] + f"\n… [{len(text) - MAX_RAW_CHARS:,} characters cut]"
        media_type = "text/plain"
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox", "Cache-Control": "no-store"}
    return Response(text, media_type=f"{media_type}; charset=utf-8", headers=headers)


def _done(message: str, redirect: str | None = None, unserved: list[dict[str, str]] | None = None) -> Response:
    body: dict[str, Any] = {"ok": True, "message": message, "redirect": redirect}
    return JSONResponse(body | ({"unserved": unserved} if unserved else {}))


def build_app(
    client: AgentClient, *, by: str, task_queue: str, token: str | None, loopback: bool, datasets: Path = Path("evals")
) -> Any:
    console = Console(client, by=by, task_queue=task_queue, datasets=datasets)

    def guarded(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                return await fn(request)
            except Refused as err:
                return console.refusal(request, err.status, err.message)
            except data.NotFound as err:
                return console.refusal(request, 404, str(err))
            except links.BadRequest as err:
                return console.refusal(request, 400, str(err))
            except RunNotFound as err:
                return console.refusal(request, 404, str(err))
            except NoWorkerAnswered as err:
                return console.refusal(request, 503, str(err))
            except AgentRunError as err:  # refused: decided already, ended, not a session
                status = 404 if str(err).startswith("no run with id") else 409
                return console.refusal(request, status, str(err))
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                return console.refusal(request, 400, f"{where}: {first['msg']}")
            except ValueError as err:  # the client's refusal of a decision's fields
                return console.refusal(request, 400, str(err)[:500])
            except Exception as err:  # one line, never a trace
                return console.refusal(
                    request, 500, f"the console could not do that: {type(err).__name__}: {err}"[:500]
                )

        return handle

    c = console
    routes = [
        Route("/", guarded(c.runs)),
        Route("/inbox", guarded(c.inbox_page)),
        Route("/inbox/events", guarded(c.inbox_events)),
        Route("/schedules", guarded(c.schedules_page)),
        Route("/schedules/{name}/{verb}", guarded(c.schedule_action), methods=["POST"]),
        Route("/evals", guarded(c.evals_page)),
        Route("/evals/{eval_id}/events", guarded(c.eval_events)),
        Route("/evals/{eval_id}/resume", guarded(c.eval_resume), methods=["POST"]),
        Route("/evals/{eval_id}", guarded(c.eval_page)),
        Route("/runs/{run_id:path}/events", guarded(c.run_events)),
        Route("/runs/{run_id:path}/messages/{index}", guarded(c.message_whole)),
        Route("/runs/{run_id:path}/calls/{call_id}/arguments", guarded(c.arguments_whole)),
        Route("/runs/{run_id:path}/calls/{call_id}/decide", guarded(c.decide), methods=["POST"]),
        Route("/runs/{run_id:path}/calls/{call_id}/edit", guarded(c.edit_args), methods=["POST"]),
        Route("/runs/{run_id:path}/calls/{call_id}/resolve", guarded(c.resolve), methods=["POST"]),
        Route("/runs/{run_id:path}/calls/{call_id}/answer", guarded(c.answer), methods=["POST"]),
        Route("/runs/{run_id:path}/send", guarded(c.send), methods=["POST"]),
        Route("/runs/{run_id:path}/pause", guarded(c.pause), methods=["POST"]),
        Route("/runs/{run_id:path}/resume", guarded(c.resume), methods=["POST"]),
        Route("/runs/{run_id:path}/edit", guarded(c.edit), methods=["POST"]),
        Route("/runs/{run_id:path}/fork", guarded(c.fork), methods=["POST"]),
        Route("/runs/{run_id:path}/case", guarded(c.make_case), methods=["POST"]),
        # Last: a run's id may hold '/' (run_agent's children: PARENT/AGENT-N), so the path is greedy.
        Route("/runs/{run_id:path}", guarded(c.run_page)),
    ]

    async def no_route(request: Request, err: Exception) -> Response:  # a page of the console's, not "Not Found"
        path = request.url.path[:200]
        if getattr(err, "status_code", 404) == 405:
            return console.refusal(request, 405, f"{request.method} {path} is not an action of the console")
        return console.refusal(request, 404, f"no page at {path}: see Runs, Inbox, Schedules or Evals")

    app = Starlette(routes=routes, exception_handlers={404: no_route, 405: no_route})
    app.state.console = console
    return Guard(app, token=token, loopback=loopback)
