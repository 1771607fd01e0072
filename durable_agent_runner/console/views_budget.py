"""A run's budget on its page: per kind its limit, what is spent, reserved and left (for the
tree too when it differs), its children's shares, and the fields of a raise (`client.py resume
--add-tokens N | --add-usd X`) for a paused run or a session waiting for its next message."""

from __future__ import annotations

from typing import Any

from durable_agent_runner.client.errors import cli
from durable_agent_runner.console.views import h


def budget_rows(b: dict[str, Any] | None, run_id: str) -> list[tuple[str, str]]:
    """The run's budget as status has it (client/budget.py): per kind, its limit, what is spent,
    reserved (the call in flight, children's shares) and left; for the tree too when it differs."""
    if not b:
        return []
    rows = []
    for scope in ("run", "tree"):
        for kind in ("tokens", "usd"):
            line = (b.get(scope) or {}).get(kind)
            if not line or (scope == "tree" and line == (b.get("run") or {}).get(kind)):
                continue
            money, over = _usd if kind == "usd" else _count, max(-line["left"], 0)  # a last call's overshoot
            left = f"{money(0)} left ({money(over)} over)" if over else f"{money(line['left'])} left"
            text = (
                f"{money(line['spent'])} spent · {money(line['reserved'])} reserved · "
                f"<b>{left}</b> of {money(line['limit'])}{' tokens' if kind == 'tokens' else ''}"
            )
            rows.append((f"budget{' (tree)' if scope == 'tree' else ''}", f'<span class="budget {kind}">{text}</span>'))
    if rows and b.get("on_budget") == "pause":
        raise_it = h(cli(f"resume {run_id} --add-tokens N | --add-usd X"))
        rows.append(("on budget", f"pauses when spent: raise it with Resume, or {raise_it}"))
    children = b.get("children") or []
    if children:
        shares = ", ".join(
            f"{h(c['child_id'])} ({' · '.join(x for x in (_share_tokens(c), _share_usd(c)) if x) or 'no share'})"
            for c in children[:20]
        )
        rows.append(("children's shares", shares + (f" and {len(children) - 20} more" if len(children) > 20 else "")))
    return rows


def raise_fields(s: dict[str, Any]) -> str:
    """A paused run with a budget may go on with it raised (`client.py resume --add-tokens N |
    --add-usd X`), one paused on its budget only so: the raise's fields, for the kinds it has."""
    fields = _fields(s)
    if not fields:
        return ""
    on_budget = (s.get("paused") or {}).get("reason") == "budget"
    return ("<b>Paused on its budget: raise it to go on</b> " if on_budget else "Raise its budget: ") + fields


def session_raise(s: dict[str, Any], action: str) -> str:
    """A session waiting for its next message takes a raise alone (2.0.4), so one whose budget is
    spent can go on: the raise's form (posted to `action`, marked `between`), for the kinds it has."""
    fields = _fields(s)
    if not fields:
        return ""
    run = (s.get("budget") or {}).get("run") or {}
    spent = any(line and line["left"] <= 0 for line in run.values())
    say = "<b>Its budget is spent: raise it for the next message</b> " if spent else "Raise its budget: "
    return f"""<form class="act" method="post" action="{action}"><input type="hidden" name="between" value="1">
{say}{fields}<button>Raise budget</button><span class="msg" role="status"></span></form>"""


def _fields(s: dict[str, Any]) -> str:
    run = (s.get("budget") or {}).get("run") or {}
    tokens = '<label>Add tokens <input name="add_tokens" size="10" inputmode="numeric"></label>'
    usd = '<label>Add USD <input name="add_usd" size="8" inputmode="decimal"></label>'
    return (tokens if run.get("tokens") else "") + (usd if run.get("usd") else "")


def _usd(x: float) -> str:
    return f"${x:,.4f}"


def _count(x: float) -> str:
    return f"{x:,.0f}"


def _share_tokens(c: dict[str, Any]) -> str:
    return f"{c['tokens']:,} tokens" if c.get("tokens") is not None else ""


def _share_usd(c: dict[str, Any]) -> str:
    return f"${c['usd']:,.4f}" if c.get("usd") is not None else ""
