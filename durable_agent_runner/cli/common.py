"""What client.py's commands share: the usage error, output as text or JSON, the run's status
names and UI link, how a run ended without an answer, the prompt read from words, standard input
or a file, and the socket a served page listens on."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any, TextIO

from durable_agent_runner.cli.args import integer, number
from durable_agent_runner.client import checks
from durable_agent_runner.client.checks import MAX_PROMPT_CHARS
from durable_agent_runner.client.errors import STATUS_NAMES, failure
from durable_agent_runner.client.status import ENDED

__all__ = ["ENDED", "STATUS_NAMES", "UsageError", "check_port", "emit", "failure", "listen", "read_prompt"]

MAX_PROMPT_BYTES = MAX_PROMPT_CHARS  # larger prompts belong in a tool's input, not a chat turn


class UsageError(Exception):
    """A mistake in what the user asked for: exit code 2."""

    @classmethod
    def of_flag(cls, err: checks.BadArgument) -> UsageError:
        """The client's refusal of a field, said with the flag it came from (`--max-turns: …`)."""
        return cls(f"--{err.field.replace('_', '-')}: {err.reason}")


def add_budget_flags(p: argparse.ArgumentParser, whose: str) -> None:
    """`--budget-usd X` and `--budget-tokens N` of one run, session or fork (`whose` spends them),
    checked by `check_budget` before connecting."""
    p.add_argument("--budget-usd", type=number, metavar="X", help=f"{whose} may spend at most $X")
    p.add_argument("--budget-tokens", type=integer, metavar="N", help=f"{whose}: at most N tokens")


def check_budget(args: argparse.Namespace) -> None:
    """`--budget-usd` and `--budget-tokens` (run, chat, schedule create, eval run), checked before
    connecting as the client checks a cap, and named as the flags are."""
    try:
        checks.budget_cap(getattr(args, "budget_usd", None), getattr(args, "budget_tokens", None))
    except ValueError as err:
        raise UsageError(f"--{str(err).replace('budget_', 'budget-', 1)}") from None


def check_port(port: int) -> None:
    """A served page's --port: 1-65535."""
    if not 0 < port < 65536:
        raise UsageError("--port must be 1-65535")


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port for a server a command serves (console, serve-hooks), bound
    before its link is printed: a port in use or an address not this machine's is one line, not a
    link that leads nowhere followed by the web server's own log line. The port is checked first
    (check_port), before anything connects."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as err:  # in use, not this machine's address, a name that does not resolve
        why = str(err.strerror or err).split(" (while attempting")[0]  # create_server adds the address again
        raise UsageError(f"cannot listen on {host}:{port}: {why} (choose another --port or --host)") from None


# What a terminal takes as a command, not as text: the C0 controls but tab and newline (a carriage
# return rewrites a line), DEL and the C1 controls. A model's reply or a tool's result may hold
# them (an escape that clears the screen, sets the title or writes the clipboard: OSC 52): on
# screen each is U+FFFD, one character for one, so a streamed reply's offsets still hold.
_NOT_TEXT = {c: "\ufffd" for c in (*range(0, 9), *range(11, 32), 127, *range(128, 160))}


def on_screen(text: str) -> str:
    """`text` as a terminal shows it, without the controls it would obey."""
    return text.translate(_NOT_TEXT)


def for_terminal(text: str, stream: TextIO) -> str:
    """Text for `stream`: without terminal controls where a terminal shows it (a run's words come
    from a model or a tool); whole through a pipe or into a file."""
    return on_screen(text) if stream.isatty() else text


def emit(as_json: bool, obj: dict[str, Any], text: str, error: bool = False) -> None:
    """JSON always goes to stdout; in text mode, an error message goes to stderr."""
    if as_json:
        print(json.dumps(obj, indent=2, default=str))
    else:
        stream = sys.stderr if error else sys.stdout
        print(for_terminal(text, stream), file=stream)


def read_prompt(args: argparse.Namespace, what: str = "prompt") -> str:
    """The prompt (`send`: the message): the words given, `-` for standard input, or
    `--prompt-file F`."""
    if args.prompt_file is not None and args.prompt:
        raise UsageError(f"give the {what} as words, '-' or --prompt-file, not several")
    if args.prompt_file is not None or args.prompt == ["-"]:
        source = "standard input" if args.prompt_file is None else str(args.prompt_file)
        try:
            raw = sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1) if args.prompt_file is None else _read(args.prompt_file)
            prompt = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UsageError(f"the {what} in {source} is not UTF-8 text ({err.reason} at byte {err.start})") from None
        if len(raw) > MAX_PROMPT_BYTES:
            raise UsageError(f"the {what} in {source} is larger than {MAX_PROMPT_BYTES // 2**20} MiB")
    else:
        prompt = " ".join(args.prompt)
    if not prompt.strip():
        raise UsageError(f"the {what} is empty")
    return prompt


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(MAX_PROMPT_BYTES + 1)
    except OSError as err:
        raise UsageError(f"cannot read --prompt-file {path}: {err.strerror or err}") from None
