"""Start, follow and manage agent runs: `durable-agent-runner COMMAND ...`, `python -m
durable_agent_runner COMMAND ...` or, in the repo, `python client.py COMMAND ...` (see --help).
A thin shell over the Python client, `durable_agent_runner.connect()` (docs/python-client.md):
each command parses its flags, calls the client, and prints what it returns.

Exit codes: 0 ok; 1 the run failed (or was cancelled), or Temporal could not be reached;
2 a usage error: bad arguments, a bad environment variable, an unknown run id, a run that refused
what was asked; 3 no worker took an approve, reject, resolve, answer, complete, send, end, pause or
resume within --wait seconds (default 10).

Those nine are Temporal updates: a worker must take one before it is recorded in the run. One that
no worker took in time is not recorded; the server may still hold it in memory, and a worker that
polls the run before the server drops it (a restart, the run leaving its cache) applies it then,
once; otherwise never. Sending the same again is safe: each is sent under an id that makes a
repeat count once (approve/reject: the call; answer, complete: the call and the answer; resolve: the call
and its time in doubt; send: --message-id, which the line names; end: the run), except pause and
resume, which the run refuses when repeated (a pause already requested, naming who asked, or
already paused; not paused). `status` shows what was applied.

--json: every command that prints something takes it (errors too become a JSON object on
standard output), except `export` (always JSON lines), `codec-server`, `console` and `serve-hooks`
(servers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, get_args

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner import __version__
from durable_agent_runner.cli import answer as answer_cli
from durable_agent_runner.cli import args as flags
from durable_agent_runner.cli import chat, codec_server, debug, diff, hooks_serve, schedules, session
from durable_agent_runner.cli import complete as complete_cli
from durable_agent_runner.cli import console as console_cli
from durable_agent_runner.cli import evals as eval_cli
from durable_agent_runner.cli.args import add_ids, by_flag, integer, model_string, new_id, number
from durable_agent_runner.cli.common import UsageError, add_budget_flags, check_budget, read_prompt
from durable_agent_runner.cli.decisions import cmd_decide, cmd_resolve
from durable_agent_runner.cli.export import cmd_export
from durable_agent_runner.cli.messages import cmd_end, cmd_send
from durable_agent_runner.cli.runs import check_run, cmd_cancel, cmd_list, cmd_result, cmd_run
from durable_agent_runner.cli.status import cmd_status
from durable_agent_runner.cli.watch import cmd_watch
from durable_agent_runner.client import errors
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError, IdTaken, NoWorkerAnswered, RunFailed
from durable_agent_runner.client.listing import PHASES
from durable_agent_runner.client.script import exit_now
from durable_agent_runner.config.connection import CORE_LOG, address, connect, task_queue
from durable_agent_runner.config.env import ClientSettings, SettingsError, TelemetrySettings, login_name
from durable_agent_runner.config.values import queue_flag
from durable_agent_runner.payloads import codec
from durable_agent_runner.payloads.store import PayloadStoreError
from durable_agent_runner.workflows import types as t

CORE_LOG.setLevel(logging.ERROR)  # the SDK core's own logs (gRPC retries while a server restarts): errors only


# ------------------------------------------------------------------------------------- parsing


class Parser(argparse.ArgumentParser):
    """Usage errors as one line (a JSON object on stdout with --json), exit code 2."""

    as_json = False  # main() sets it from the arguments it is given (not sys.argv: main(argv) in code)

    def error(self, message: str) -> NoReturn:
        fail(message, 2, Parser.as_json)


def fail(message: str, code: int, as_json: bool) -> NoReturn:
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}))
    else:
        print(f"{errors.prog()}: error: {message}", file=sys.stderr)
    sys.stdout.flush()
    raise SystemExit(code)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog=errors.prog(), description=__doc__)
    p.add_argument("--version", action="version", version=f"durable-agent-runner {__version__}")
    p.add_argument(
        "--task-queue", type=queue_flag, default=task_queue(), help="task queue of the workers (default: %(default)s)"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="start a run and print its id")
    run.add_argument("prompt", nargs="*", help="what to ask the agent; '-' reads it from standard input")
    run.add_argument("--prompt-file", type=Path, metavar="F", help="read the prompt from this file")
    run.add_argument(
        "--agent", type=flags.agent_name, default=t.DEFAULT_AGENT, help="agent name (default: %(default)s)"
    )
    run.add_argument("--max-turns", type=flags.positive_int, help="override the agent's max_turns")
    run.add_argument(
        "--model",
        type=model_string,
        help="override the agent's model: anthropic:NAME, gemini:NAME, openai:NAME, or the worker server's",
    )
    run.add_argument(
        "--fallback-model",
        action="append",
        type=model_string,
        metavar="MODEL",
        help="when a call to the model fails for good, the turn goes to this one (repeatable, in order)",
    )
    add_budget_flags(run, "it and its sub-agents")
    run.add_argument("--id", type=new_id, help="run id to use (default: generated)")
    run.add_argument("--wait", action="store_true", help="wait and print the final answer")
    run.add_argument("--follow", action="store_true", help="print the run's steps and text as they happen")
    run.add_argument("--capture", action="store_true", help="keep each model call's raw request and response")
    run.add_argument("--json", action="store_true", help="print JSON")
    bp = run.add_argument_group("breakpoints", "pause the run (then: inspect, edit, resume)")
    bp.add_argument("--break-at", type=flags.positive_int, action="append", metavar="N", help="before model call N")
    bp.add_argument("--break-every-turn", action="store_true", help="before every model call")
    bp.add_argument("--break-before-tools", action="store_true", help="before any tool call")
    bp.add_argument("--break-tool", action="append", metavar="TOOL", help="before calls of this tool (repeatable)")
    ms = run.add_argument_group("model settings", "the agent's, overridden for this run (a flag over --model-settings)")
    ms.add_argument("--temperature", type=number, metavar="F", help="sampling temperature, 0-2")
    ms.add_argument("--top-p", type=number, metavar="F", help="nucleus sampling, 0-1")
    ms.add_argument("--max-output-tokens", type=integer, metavar="N", help="cap on the tokens of each reply")
    ms.add_argument("--tool-choice", metavar="X", help="auto, required, none, or the name of one tool")
    ms.add_argument("--parallel-tool-calls", action=argparse.BooleanOptionalAction, help="several calls per reply")
    efforts = [
        v for arg in get_args(t.ModelSettings.model_fields["reasoning_effort"].annotation) for v in get_args(arg)
    ]
    ms.add_argument("--reasoning-effort", choices=efforts, help="for reasoning models")
    ms.add_argument("--seed", type=integer, metavar="N", help="repeatable sampling (Chat Completions and Gemini)")
    ms.add_argument(
        "--stop", action="append", metavar="S", help="stop sequence (repeatable, at most 4; not the Responses API)"
    )
    ms.add_argument(
        "--model-settings",
        metavar="JSON",
        help='all of the above and more as one object, e.g. \'{"temperature": 0.2, "extra_body": {"max_tokens": 50}}\'',
    )
    run.set_defaults(fn=cmd_run)

    for name, fn, helptext in [
        ("status", cmd_status, "status, turn, token usage and last step of a run"),
        ("result", cmd_result, "wait for a run's final answer and print it"),
        ("cancel", cmd_cancel, "cancel a run"),
    ]:
        cmd = sub.add_parser(name, help=helptext)
        add_ids(cmd)
        cmd.add_argument("--json", action="store_true", help="print JSON")
        if name == "result":
            cmd.add_argument("--no-wait", action="store_true", help="exit 1 at once if the run is still going")
            cmd.add_argument(
                "--wait",
                dest="result_wait",
                type=session.wait_seconds,
                metavar="SECONDS",
                help="give up after this long: exit 1, saying what the run waits for (default: until it ends; "
                "with --message, at most 3600)",
            )
            cmd.add_argument("--message", type=flags.positive_int, metavar="K", help="a session's answer to message K")
        cmd.set_defaults(fn=fn)

    who = login_name("cli")
    approve = sub.add_parser("approve", help="approve a pending tool call (runs it)")
    add_ids(approve, call="the call waiting for approval")
    approve.add_argument(
        "--args", type=flags.call_arguments, metavar="JSON", help="run with these edited arguments (validated first)"
    )
    approve.add_argument("--always", action="store_true", help="also approve later calls of this tool in this run")
    approve.add_argument("--by", type=by_flag, default=who, help="who decides (default: %(default)s)")
    approve.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(approve)
    approve.set_defaults(fn=cmd_decide)
    reject = sub.add_parser("reject", help="reject a pending tool call; the model gets the reason")
    add_ids(reject, call="the call waiting for approval")
    told = flags.reason_of(t.ApprovalDecision, told=True)
    reject.add_argument("--reason", type=told, required=True, help="what the model is told")
    reject.add_argument("--by", type=by_flag, default=who, help="who decides (default: %(default)s)")
    reject.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(reject)
    reject.set_defaults(fn=cmd_decide)
    resolve = sub.add_parser("resolve", help="decide a call in doubt (a once tool's attempt ended without a result)")
    add_ids(resolve, call="the call in doubt")
    how = resolve.add_mutually_exclusive_group(required=True)
    how.add_argument("--rerun", action="store_true", help="run the tool again (one attempt)")
    how.add_argument("--result", type=flags.json_result, metavar="JSON", help="it did happen, and it returned this")
    told = flags.reason_of(t.ResolveCall, told=True)
    how.add_argument("--fail", type=told, metavar="REASON", help="tell the model it failed, with this reason")
    resolve.add_argument("--by", type=by_flag, default=who, help="who decides (default: %(default)s)")
    resolve.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(resolve)
    resolve.set_defaults(fn=cmd_resolve)
    answer_cli.add_parser(sub, who)
    complete_cli.add_parser(sub, who)

    chat.add_parser(sub)
    codec_server.add_parser(sub)
    debug.add_parsers(sub, who)
    diff.add_parser(sub)
    console_cli.add_parser(sub, who)
    schedules.add_parser(sub)
    hooks_serve.add_parser(sub)
    eval_cli.add_parser(sub)
    send = sub.add_parser("send", help="send a message to a session (see chat)")
    add_ids(send)
    send.add_argument("prompt", nargs="*", help="the message; '-' reads it from standard input")
    send.add_argument("--prompt-file", type=Path, metavar="F", help="read the message from this file")
    send.add_argument(
        "--wait", action="store_true", help="wait for this message's answer (at most 3600 s) and print it"
    )
    send.add_argument("--by", type=by_flag, default=who, help="who is talking (default: %(default)s)")
    send.add_argument("--message-id", metavar="ID", help="sending the same id again counts once (default: new)")
    send.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(send, answer_flag=True)
    send.set_defaults(fn=cmd_send)
    end = sub.add_parser("end", help="end a session once the messages it has taken are answered")
    add_ids(end)
    end.add_argument("--reason", type=flags.reason_of(t.EndSession), default="", help="kept in the run's result")
    end.add_argument("--by", type=by_flag, default=who, help="who ends it (default: %(default)s)")
    end.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(end)
    end.set_defaults(fn=cmd_end)

    w = sub.add_parser("watch", help="follow a run live: text as it streams, tool calls, approvals, answer")
    add_ids(w)
    w.add_argument(
        "--since", type=flags.bounded(int, 0, 10**12), default=0, metavar="N", help="start at event N (resume a watch)"
    )
    w.add_argument(
        "--timeout", type=flags.bounded(float, 1, 7 * 86400), default=86400, metavar="S", help="follow it at most S s"
    )
    w.add_argument("--json", action="store_true", help="one JSON object per line, with event numbers")
    w.set_defaults(fn=cmd_watch)

    ex = sub.add_parser(
        "export", help="write a run as JSON lines (always JSON): replies, wire captures, decisions, tool results"
    )
    add_ids(ex)
    ex.add_argument("--out", type=Path, help="file to write (default: standard output)")
    ex.add_argument("--captures", type=Path, help="capture directory (default: $LLM_CAPTURE_DIR or .state/captures)")
    ex.set_defaults(fn=cmd_export)

    ls = sub.add_parser("list", help="list recent runs")
    ls.add_argument("--limit", type=flags.bounded(int, 1, 1000), default=20, help="at most this many: 1-1000 (20)")
    ls.add_argument("--phase", choices=PHASES, metavar="PHASE", help=f"only runs in this phase: {', '.join(PHASES)}")
    ls.add_argument(
        "--agent", type=flags.agent_name, help="only runs of this agent (after a handoff: the one it went to)"
    )
    ls.add_argument("--schedule", type=schedules.NAME, metavar="NAME", help="only runs this schedule started")
    ls.add_argument(
        "--waiting",
        action="store_true",
        help="only running runs with a call that waits for a person: to approve, answer or resolve "
        "(a paused run: --phase paused)",
    )
    ls.add_argument(
        "--started-on-1x", action="store_true", help="only runs still running that started on 1.x (docs/patches.md)"
    )
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(fn=cmd_list)
    return p


async def dispatch(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    try:
        client = await connect()
    except PayloadStoreError as err:  # PAYLOAD_STORE* settings: fixable by the user
        fail(str(err), 2, as_json)
    except ConnectionError as err:  # names the address and what to set (config/connection.py)
        fail(str(err), 1, as_json)
    except Exception as err:
        fail(f"cannot reach Temporal at {address()}: {err}", 1, as_json)
    # OpenTelemetry, when OTEL_EXPORTER_OTLP_ENDPOINT is set; every command goes through the client
    agents = AgentClient(traced(client), task_queue=args.task_queue, settings=args.client_settings)
    try:
        return int(await args.fn(agents, args))
    except NoWorkerAnswered as err:
        fail(str(err), session.NO_WORKER, as_json)
    except RunFailed as err:  # a run's own failure, where a command did not print it itself
        fail(str(err), 1, as_json)
    except IdTaken as err:
        fail(f"{err}: give another --id, or leave it out", 2, as_json)
    except (UsageError, AgentRunError) as err:  # unknown run, refused decision, ...
        fail(str(err), 2, as_json)
    except ValueError as err:  # an argument the client's checks refused (client/checks.py)
        fail(str(err), 2, as_json)
    except RPCError as err:
        if err.status == RPCStatusCode.ALREADY_EXISTS:
            fail(f"a run with that id already exists ({err.message})", 2, as_json)
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            fail(f"Temporal refused the request: {err.message}", 2, as_json)
        if err.status in session.DEADLINE:  # no answer in time
            fail(
                f"no answer in time (Temporal said: {err.message}). Reading a run needs a worker on its task "
                f"queue: is `{errors.worker()}` running? A worker that has just stopped holds its runs' reads "
                "for about 10 s; ask again.",
                1,
                as_json,
            )
        fail(f"Temporal said: {err.message}", 1, as_json)
    except BrokenPipeError:
        raise  # the reader has gone (`client.py list | head`): main() ends quietly
    except Exception as err:  # never a traceback: one line that says what went wrong
        if encrypted(err):
            fail(
                f"the run's payloads are encrypted and this client has no keys: set {codec.ENV} to the keys its "
                "workers use (ID:BASE64KEY, comma-separated; durable_agent_runner/payloads/codec.py)",
                2,
                as_json,
            )
        fail(f"{type(err).__name__}: {err}", 1, as_json)


def traced(client: Client) -> Client:
    """`client`, tracing what it starts when OTEL_* turns tracing on (durable_agent_runner/telemetry/,
    loaded only then: the OpenTelemetry SDK is a tenth of a command's start-up)."""
    try:
        on = TelemetrySettings.load().enabled
    except SettingsError:
        on = True  # telemetry.traced says what is wrong, and goes on untraced
    if not on:
        return client
    from durable_agent_runner.telemetry import traced as tracing

    return tracing(client)


def flush_telemetry() -> None:
    """The spans a traced client made, sent before the process leaves (none when it was never loaded)."""
    telemetry = sys.modules.get("durable_agent_runner.telemetry")
    if telemetry is not None:
        telemetry.flush()


def encrypted(err: BaseException | None) -> bool:
    """Whether reading failed on a payload our codec encrypted, for want of its keys."""
    while err is not None:
        if codec.ENCODING.decode() in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def check_text(args: argparse.Namespace) -> None:
    """Arguments that are not valid UTF-8 (the shell passes raw bytes) cannot be sent anywhere."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise UsageError(f"{name.replace('_', '-')} is not valid UTF-8 text") from None


def main(argv: Sequence[str] | None = None) -> int:
    Parser.as_json = "--json" in (sys.argv[1:] if argv is None else argv)
    try:
        settings = ClientSettings.load()  # every variable the client reads, checked first and read once
    except SettingsError as err:
        fail(str(err), 2, Parser.as_json)
    args = parser().parse_args(argv)
    args.client_settings = settings  # passed down: the client, the console's token, the hooks' secret
    try:
        check_text(args)
        check_budget(args)  # run, chat, schedule create, eval run: a cap, before connecting
        if args.command == "run":  # its flags checked before connecting
            check_run(args)
        if args.command in ("run", "send"):  # read before connecting: an empty one needs no server to say so
            args.text = read_prompt(args, "prompt" if args.command == "run" else "message")
        if args.command == "edit":  # which one edit, and its values, need no server
            args.edit = debug.edit_of(args)
        if args.command == "codec-server":  # needs only the keys, not Temporal
            return codec_server.cmd_codec_server(args)
        if args.command == "chat":
            chat.check(args)
        if args.command == "console":  # refused before connecting when it would be open without a token
            console_cli.check(args)
        if args.command == "schedule":  # a create's flags taken together, before connecting
            schedules.check(args)
        if args.command == "eval":  # its gate's flags checked before connecting
            eval_cli.check(args)
        if args.command == "serve-hooks":  # its file and secrets read before connecting
            hooks_serve.check(args)
        return asyncio.run(dispatch(args))
    except UsageError as err:
        fail(str(err), 2, bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        return 130


def run(prog: str = "client.py", argv: Sequence[str] | None = None) -> NoReturn:
    """The command as a process runs it (`client.py`, the `durable-agent-runner` script, `python -m
    durable_agent_runner`): main's exit code, and no interpreter teardown."""
    errors.started_as(prog)
    try:
        code = main(argv)
    except SystemExit as exit:  # fail() and argparse end this way
        code = exit.code if isinstance(exit.code, int) else 1
    except BrokenPipeError:  # whoever read our output stopped reading (`| head`): nothing left to say
        code = 0
    flush_telemetry()  # before leaving without teardown, which skips the exporter's own exit hook
    exit_now(code)  # the Temporal SDK's native runtime can SIGABRT an interpreter's teardown


def script() -> NoReturn:
    """The `durable-agent-runner` console script."""
    run("durable-agent-runner")


if __name__ == "__main__":
    run("python -m durable_agent_runner.cli.main")
