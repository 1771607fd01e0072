"""`client.py serve-hooks --config FILE`: serve the signed-webhook ingress (durable_agent_runner/
webhooks/) until stopped, as `client.py console` serves the console. The hooks file is read, and
every secret found, before anything connects: a bad file is a one-line usage error. With
COMPLETION_SECRET set it serves signed completion URLs too (`POST /complete/RUN/CALL`,
docs/outside-completion.md), and then --config may be left out."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from durable_agent_runner.cli.args import integer
from durable_agent_runner.cli.common import UsageError, check_port, listen
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.webhooks.config import MAX_BODY, HookConfigError, load

DEFAULT_PORT = 8238


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    cmd = sub.add_parser("serve-hooks", help="serve signed webhooks (POST /hooks/NAME) that start runs, once each")
    cmd.add_argument(
        "--config", type=Path, metavar="FILE", help="the hooks: a JSON or YAML file (optional with COMPLETION_SECRET)"
    )
    cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    cmd.add_argument("--port", type=integer, default=DEFAULT_PORT, help="port (default: %(default)s)")
    cmd.add_argument(
        "--max-body",
        type=integer,
        default=MAX_BODY,
        metavar="BYTES",
        help="larger bodies get 413 (default: %(default)s)",
    )
    cmd.set_defaults(fn=cmd_serve_hooks)


def check(args: argparse.Namespace) -> None:
    """Before connecting to anything: the port, the file, each hook's secret."""
    check_port(args.port)
    if not 1024 <= args.max_body <= 32 * MAX_BODY:
        raise UsageError(f"--max-body must be 1024-{32 * MAX_BODY} bytes")
    secret = args.client_settings.completion_secret
    args.completion_key = secret.get_secret_value().encode() if secret is not None else None
    if args.config is None and args.completion_key is None:
        raise UsageError("give --config FILE (the hooks), or set COMPLETION_SECRET to serve completion URLs")
    try:
        args.hooks = load(args.config) if args.config is not None else {}
    except HookConfigError as err:
        raise UsageError(str(err)) from None


async def cmd_serve_hooks(client: AgentClient, args: argparse.Namespace) -> int:
    if not hasattr(args, "hooks"):
        check(args)
    import uvicorn  # the server's own, loaded when it is served

    from durable_agent_runner.client import deliveries, stuck
    from durable_agent_runner.webhooks.app import build_app

    sock = listen(args.host, args.port)
    hooks = args.hooks
    app = build_app(client, hooks, max_body=args.max_body, completion_key=args.completion_key)
    # No access log: a sender's query string or headers are not ours to keep.
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="off")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    for name, hook in sorted(hooks.items()):
        target = f"session {hook.session}" if hook.session else f"agent {hook.agent}"
        # What a hook's deliveries would meet now, said, not refused: a session or a worker may start later.
        if hook.session:
            why = await deliveries.not_a_session(client.temporal, hook.session)
            target += f" (! {why} now: its deliveries answer 409 until it runs)" if why else ""
        else:
            why = await stuck.agent_unserved(client.temporal, client.task_queue, hook.agent)
            target += f" (! {why})" if why else ""
        print(f"hook {name}: POST http://{shown}:{args.port}/hooks/{name} ({hook.kind}-signed) -> {target}", flush=True)
    if args.completion_key is not None:
        print(f"completions: POST http://{shown}:{args.port}/complete/RUN/CALL?exp=…&sig=… (signed URLs)", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
    return 0
