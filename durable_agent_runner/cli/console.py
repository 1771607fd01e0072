"""`client.py console`: serve the web console (durable_agent_runner/console/) until stopped.

On 127.0.0.1 by default; on any other host only with CONSOLE_TOKEN, whose link it prints."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from durable_agent_runner.cli.args import by_flag, integer
from durable_agent_runner.cli.common import UsageError, check_port, listen
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.config.env import ClientSettings

DEFAULT_PORT = 8237


def add_parser(sub: argparse._SubParsersAction[Any], who: str) -> None:
    cmd = sub.add_parser("console", help="serve the web console: runs, an inbox of approvals, each run's story")
    cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    cmd.add_argument("--port", type=integer, default=DEFAULT_PORT, help="port (default: %(default)s)")
    cmd.add_argument(
        "--by", type=by_flag, default=who, help="who decides, unless the page names someone (default: %(default)s)"
    )
    cmd.add_argument("--datasets", type=Path, default=Path("evals"), metavar="DIR",
                     help="where a run page's 'Make a case' writes dataset files (default: %(default)s)")  # fmt: skip
    cmd.set_defaults(fn=cmd_console)


def token(settings: ClientSettings) -> str | None:
    secret = settings.console_token
    return secret.get_secret_value() if secret is not None else None


def check(args: argparse.Namespace) -> None:
    """Before connecting to anything: a console beyond this machine needs its token."""
    check_port(args.port)
    from durable_agent_runner.console.security import check_start

    try:
        check_start(args.host, token(args.client_settings))
    except ValueError as err:
        raise UsageError(str(err)) from None


def link(host: str, port: int, secret: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={secret}" if secret else "")


async def cmd_console(client: AgentClient, args: argparse.Namespace) -> int:
    import uvicorn  # the web server and the console's pages, loaded when they are served

    from durable_agent_runner.console.app import build_app
    from durable_agent_runner.console.security import is_loopback

    check(args)
    sock = listen(args.host, args.port)
    secret = token(args.client_settings)
    loopback = is_loopback(args.host)
    queue, datasets = args.task_queue, args.datasets
    app = build_app(client, by=args.by, task_queue=queue, token=secret, loopback=loopback, datasets=datasets)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    print(f"console: {link(args.host, args.port, secret)}", flush=True)
    await server.serve(sockets=[sock])
    return 0
