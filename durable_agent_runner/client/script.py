"""`run_script(main())`: the end of a short-lived program that talks to Temporal (a starter, an
example). It runs `main` and leaves without interpreter teardown, because temporalio's native
runtime can abort a process whose threads are still winding down while Python finalizes
("Fatal Python error: PyGILState_Release", SIGABRT after the work is done: temporalio/sdk-python#300).
`client.py` and `worker.py` end the same way."""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Coroutine
from typing import Any, NoReturn


def run_script(main: Coroutine[Any, Any, object]) -> NoReturn:
    """`asyncio.run(main)`, then exit: 0 when it returned, its code on SystemExit, 130 on Ctrl-C.
    The project's own errors, each one readable line, are printed as that line with client.py's
    exit code (`said`); any other exception with its traceback, and 1."""
    code = 0
    try:
        asyncio.run(main)
    except KeyboardInterrupt:
        code = 130
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as err:
        line, code = said(err)
        if line is None:
            traceback.print_exc()
        else:
            print(f"error: {line}", file=sys.stderr)
    exit_now(code)


def said(err: BaseException) -> tuple[str | None, int]:
    """The one line and exit code of an error the project words for a person (None: not one of them)."""
    from temporalio.client import WorkflowFailureError

    from durable_agent_runner.client.errors import AgentRunError, NoWorkerAnswered, RunFailed, failure
    from durable_agent_runner.config.env import SettingsError

    if isinstance(err, WorkflowFailureError):  # the script's own workflow (run_agent's caller, an example)
        status, error = failure(err)
        ended = "failed" if status == "failed" else f"ended {status}"
        return f"the workflow {ended}: {error['type']}: {error['message']}", 1
    if isinstance(err, NoWorkerAnswered):
        return str(err), 3
    if isinstance(err, RunFailed | ConnectionError):  # a run's end; Temporal out of reach (config/connection.py)
        return str(err), 1
    if isinstance(err, AgentRunError | SettingsError):
        return str(err), 2
    return None, 1


def exit_now(code: int) -> NoReturn:
    """Flush what is written and leave with `code`, without interpreter teardown (see above)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away; a closed stream
            pass
    os._exit(code)
