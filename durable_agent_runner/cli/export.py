"""`client.py export RUN_ID`: a whole run as JSON lines, as the Python client's
`RunHandle.export()` reads it from its history (durable_agent_runner/client/export.py: the lines)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from durable_agent_runner.cli.common import UsageError
from durable_agent_runner.client.agent_client import AgentClient


async def cmd_export(client: AgentClient, args: argparse.Namespace) -> int:
    if args.out is not None and args.out.is_dir():  # said before the run is read
        raise UsageError(f"--out {args.out} is a folder: give a file's path (e.g. {args.out / 'run.jsonl'})")
    if args.out is not None and not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: its folder {args.out.parent} does not exist")
    if args.captures is not None and not args.captures.is_dir():
        raise UsageError(f"--captures {args.captures} is not a folder: give the capture directory (LLM_CAPTURE_DIR)")
    lines = await client.get(args.run_id).export(captures=args.captures)
    write_jsonl(lines, args.out)
    if args.out:
        calls = sum(1 for line in lines if line["type"] == "model_call")
        kept = sum(1 for line in lines if line["type"] == "model_call" and line["capture"])
        print(f"wrote {len(lines)} lines to {args.out}: {calls} model calls, {kept} with wire captures")
    return 0


def write_jsonl(lines: list[dict[str, Any]], path: Path | None) -> None:
    text = "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines)
    if path is None:
        print(text, end="")
    else:
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as err:
            raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
