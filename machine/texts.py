"""How a run's texts are cut for its events and views (one place for the sizes), and the failures
a run and an eval say in the same words."""

from __future__ import annotations

import re
from collections.abc import Mapping

EXCERPT = 300
# Event texts (a reply, the answer) are kept whole up to this size; queries stay far below
# gRPC's 4 MB message limit, and `client.py result` prints an answer of any size.
EVENT_TEXT = 32_000
EVENTS_PAGE_BYTES = 1_000_000


def said(error: Mapping[str, object]) -> str:
    """One pydantic error's message as a person reads it: a validator's own words without the
    `Value error, ` pydantic puts before them, and a bound's digits grouped (`less than or equal
    to 1,000,000,000`), a number or a boolean where text belongs named so (a YAML file's unquoted
    `secret: 12345678`): every face that says a refused value says it so."""
    text = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    given = error.get("input")
    if error.get("type") == "string_type" and isinstance(given, bool | int | float):  # never the value: a secret?
        text += f", not {'true or false' if isinstance(given, bool) else 'a number'}: quote it"
    return _BOUND.sub(lambda m: f"{m[1]}{int(m[2]):,}", text)


_BOUND = re.compile(r"(should be (?:greater|less) than (?:or equal to )?)(\d{5,})\b")


def pause_point(where: str, turn: int) -> str:
    """Where a pause holds, in words (status, inspect, the console, the run's own phase):
    `before model call 3`, `before the tool calls of turn 3`."""
    return f"before model call {turn}" if where == "before_model" else f"before the tool calls of turn {turn}"


def cost_words(usd: float, unpriced: int = 0) -> str:
    """What a run or an eval spent, and how many of its model calls are not in it (a model the
    price table lacks: activities/prices.py): `$0.0123`, `$0.0000 (+ 3 call(s) to models without
    a price)`. One wording for status, the console and an eval's status and report."""
    unknown = f" (+ {unpriced} call(s) to models without a price)" if unpriced else ""
    return f"${usd:.4f}{unknown}"


def excerpt(text: str, limit: int = EXCERPT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut(text: str, keep: int) -> str:
    """`text`, or its first `keep` characters and a note of how many more were cut."""
    return text if len(text) <= keep else f"{text[:keep]}… [{len(text) - keep} characters cut]"


def spans(numbers: list[int]) -> str:
    """[1, 2, 3, 5] → "1-3, 5"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def event_text(text: str) -> str:
    if len(text) <= EVENT_TEXT:
        return text
    return text[:EVENT_TEXT] + f"\n… [{len(text) - EVENT_TEXT} more characters: `client.py result` prints it whole]"


def no_worker_serves(agent: str, queue: str, seconds: float) -> str:
    """Why a run or an eval fails when no worker took its agent's resolve within its wait."""
    return (
        f"no worker serves agent '{agent}': nothing polled task queue {queue} "
        f"for {seconds:g}s (start a worker with --tools for that agent)"
    )


def turn_words(turn: int, max_turns: int | None, session: bool) -> str:
    """The run's turn and its limit, as status, the console and the Web UI say them. A session's
    turns add up over its messages while `max_turns` holds for each answer."""
    if not max_turns:
        return f"{turn}"
    return f"{turn} · at most {max_turns} a message" if session else f"{turn} of {max_turns}"


def pause_requested(by: str) -> str:
    """What status says of a run asked to pause (by `by`), until it does."""
    return f"pause requested by {by}: the run pauses at its next safe point"


def duration(seconds: float) -> str:
    """A span as a person reads it: `7 days`, `2 h`, `90 min`, `45 s` (whole units when exact)."""
    for size, unit in ((86_400, "day"), (3_600, "h"), (60, "min")):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''}"
    return f"{seconds:g} s"


def raised(add_tokens: int | None, add_usd: float | None) -> str:
    """`+5000 tokens and +$2.5`: a budget's raise, as its event, `resume` and chat say it."""
    tokens = f"+{add_tokens} tokens" if add_tokens else ""
    return " and ".join(x for x in (tokens, f"+${add_usd:g}" if add_usd else "") if x)
