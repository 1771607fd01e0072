"""What the console's eval pages read and do: an eval's status, report and baseline diff (through
the client, as `client.py eval report` reads them); the live stream of its page's `#eval` section
and its raise form (`#raise`, sent only when it changes: a half-typed raise stays), polled every
POLL_EVAL seconds while the eval runs and ended (`end`) once it has; and the raise of an eval
paused on its budget (the client's `EvalHandle.resume`, as `client.py eval resume`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError, DecisionRefused
from durable_agent_runner.console import views_evals
from durable_agent_runner.console.eval_pauses import spent_line
from durable_agent_runner.console.security import Refused
from durable_agent_runner.console.sse import KEEPALIVE, LIFETIME, frame
from durable_agent_runner.evals.report import Diff, Report, compare, report
from durable_agent_runner.workflows.types import evals as te

POLL_EVAL = 1.0
ENDED = te.EVAL_ENDED


async def eval_view(client: AgentClient, eval_id: str) -> tuple[te.EvalStatus, Report, Diff | None]:
    """The eval's status (with what it waits for that no worker takes: `unserved`), its report
    and, with a baseline, the diff (None when the baseline cannot be read: the page says what it can)."""
    handle = client.evals.get(eval_id)
    status = await handle.status()
    now = report(status, handle.ui_url)
    if not status.baseline:
        return status, now, None
    try:
        then = report(await client.evals.get(status.baseline).status(), handle.ui_url)
    except (AgentRunError, ValueError):
        return status, now, None
    return status, now, compare(now, then)


async def eval_stream(client: AgentClient, eval_id: str) -> AsyncIterator[str]:
    clock = asyncio.get_running_loop().time
    began = quiet = clock()
    shown = shown_raise = ""
    while clock() - began < LIFETIME:
        try:
            status, now, diff = await eval_view(client, eval_id)
        except AgentRunError:  # failed, or gone: the page as it is, and no more
            yield frame("end", {})
            return
        except Exception:  # Temporal restarting, a worker away: ask again at the next poll
            await asyncio.sleep(POLL_EVAL)
            continue
        form = views_evals.raise_form(status)
        if form != shown_raise:
            yield frame("section", {"id": "raise", "html": form})
            shown_raise, quiet = form, clock()
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


async def raise_budget(client: AgentClient, eval_id: str, tokens: int | None, usd: float | None, wait: float) -> str:
    """Raise the budget of an eval paused on it (a worker must take it within `wait` seconds); what
    was done, in one line. An eval not paused on its budget, or a raise of a kind of budget it has
    not, is a Refused (409); a raise out of the client's bounds its BadArgument (400)."""
    if tokens is None and usd is None:
        raise Refused(400, "add tokens or USD to raise the eval's budget")
    handle = client.evals.get(eval_id)
    status = await handle.status()
    if status.phase != "paused" or status.budget is None:
        raise Refused(409, f"eval {eval_id} is {status.phase}, not paused on its budget: nothing to raise")
    if (tokens and status.budget.tokens is None) or (usd and status.budget.usd is None):
        has = "tokens" if status.budget.tokens is not None else "USD"
        raise Refused(409, f"eval {eval_id} has no {'token' if tokens else 'cost'} budget to raise: add {has}")
    try:
        budget = await handle.resume(add_tokens=tokens, add_usd=usd, wait=wait)
    except DecisionRefused as err:  # it went on, or ended, since it was read
        raise Refused(409, f"the raise is refused: {str(err).partition(' refused it: ')[2] or err}") from None
    raised = " and ".join(x for x in (f"{tokens:,} tokens" if tokens else "", f"${usd:g}" if usd else "") if x)
    return f"eval {eval_id} resumed, its budget raised by {raised}: {spent_line(budget)}"
