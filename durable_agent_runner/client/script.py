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
    """`asyncio.run(main)`, then exit: 0 when it returned, its code on SystemExit, 130 on Ctrl-C,
    1 on any other exception (its traceback printed first)."""
    code = 0
    try:
        asyncio.run(main)
    except KeyboardInterrupt:
        code = 130
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Flush what is written and leave with `code`, without interpreter teardown (see above)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away; a closed stream
            pass
    os._exit(code)
