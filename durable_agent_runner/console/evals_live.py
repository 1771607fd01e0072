"""What the console's eval pages read: an eval's status, report and baseline diff (through the
client, as `client.py eval report` reads them), and the live stream of its page's `#eval`
section, polled every POLL_EVAL seconds while the eval runs and ended (`end`) once it has."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError
from durable_agent_runner.client.status import ui_url
from durable_agent_runner.console import views_evals
from durable_agent_runner.console.sse import KEEPALIVE, LIFETIME, frame
from durable_agent_runner.evals.report import Diff, Report, compare, report
from durable_agent_runner.workflows.types import evals as te

POLL_EVAL = 1.0
ENDED = ("completed", "failed", "cancelled")


async def eval_view(client: AgentClient, eval_id: str) -> tuple[te.EvalStatus, Report, Diff | None]:
    """The eval's status, its report and, with a baseline, the diff (None when the baseline
    cannot be read: the page says what it can)."""
    status = await client.evals.get(eval_id).status()
    now = report(status, ui_url)
    if not status.baseline:
        return status, now, None
    try:
        then = report(await client.evals.get(status.baseline).status(), ui_url)
    except (AgentRunError, ValueError):
        return status, now, None
    return status, now, compare(now, then)


async def eval_stream(client: AgentClient, eval_id: str) -> AsyncIterator[str]:
    clock = asyncio.get_running_loop().time
    began = quiet = clock()
    shown = ""
    while clock() - began < LIFETIME:
        try:
            status, now, diff = await eval_view(client, eval_id)
        except AgentRunError:  # failed, or gone: the page as it is, and no more
            yield frame("end", {})
            return
        except Exception:  # Temporal restarting, a worker away: ask again at the next poll
            await asyncio.sleep(POLL_EVAL)
            continue
        html = views_evals.eval_section(status, now, diff)
        if html != shown:
            yield frame("section", {"id": "eval", "html": html})
            shown, quiet = html, clock()
        elif clock() - quiet > KEEPALIVE:
            yield ": still here\n\n"
            quiet = clock()
        if status.phase in ENDED:
            yield frame("end", {})
            return
        await asyncio.sleep(POLL_EVAL)
