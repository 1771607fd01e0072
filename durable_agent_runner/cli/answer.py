"""`client.py answer RUN_ID CALL_ID TEXT | --choice N`: a person's answer to an `ask_person` question,
through the Python client (`RunHandle.answer_question`, as the console's). The run refuses (exit 2,
nothing recorded) a choice outside the list, an empty answer, a call with no question waiting and
one already answered; the same answer sent again counts once."""

from __future__ import annotations

import argparse
from typing import Any

from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import add_ids, bounded, by_flag
from durable_agent_runner.cli.common import UsageError, emit
from durable_agent_runner.client import checks
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.workflows.types.questions import MAX_CHOICES


def add_parser(sub: argparse._SubParsersAction[Any], who: str) -> None:
    answer = sub.add_parser("answer", help="answer a question the agent asked a person (ask_person)")
    add_ids(answer, call="the question (an ask_person call)")
    what = answer.add_mutually_exclusive_group(required=True)
    what.add_argument("text", nargs="?", metavar="TEXT", help="the answer, as text (with choices: one of them)")
    what.add_argument("--text", dest="text_flag", metavar="TEXT", help=argparse.SUPPRESS)  # as people also write it
    what.add_argument(
        "--choice", type=bounded(int, 1, MAX_CHOICES), metavar="N", help="the number of one of the question's choices"
    )
    answer.add_argument("--by", type=by_flag, default=who, help="who answers (default: %(default)s)")
    answer.add_argument("--json", action="store_true", help="print JSON")
    session.add_wait(answer)
    answer.set_defaults(fn=cmd_answer)


async def cmd_answer(client: AgentClient, args: argparse.Namespace) -> int:
    try:
        receipt = await client.get(args.run_id).answer_question(
            args.call_id,
            args.text if args.text is not None else args.text_flag,
            choice=args.choice,
            by=args.by,
            wait=args.worker_wait,
        )
    except checks.BadArgument as err:
        raise UsageError(str(err)) from None
    choice = f" (choice {receipt.choice})" if receipt.choice is not None else ""
    at = f"{receipt.recorded_at:%Y-%m-%d %H:%M:%S}"
    text = f"{args.call_id} answered{choice} by {receipt.by} at {at}: {receipt.answer}"
    emit(args.json, {"run_id": args.run_id, **receipt.model_dump(mode="json")}, text)
    return 0
