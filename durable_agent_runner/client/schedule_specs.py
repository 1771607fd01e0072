"""What a schedule is made of, checked at the door (as client/checks.py checks a run's arguments):
its name, a cron expression or an interval, durations written as a person writes them ("90s",
"10m", "1h30m", "2d"), a time zone, an overlap policy and a backfill's range. A bad one is a
BadArgument naming its field, one line; the server checks a cron expression again when it is
created and its refusal is said the same way."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from temporalio.client import ScheduleOverlapPolicy
from temporalio.common import SearchAttributeKey

from durable_agent_runner.client.checks import BadArgument, string

# A schedule's name is its Temporal schedule id and part of its runs' ids and of console links:
# letters, digits and . _ - only, so it needs no quoting anywhere.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Temporal sets it on every run a schedule starts: the schedule's id (our schedule's name).
SCHEDULED_BY = SearchAttributeKey.for_keyword("TemporalScheduledById")
Overlap = Literal["skip", "buffer-one", "cancel-other", "allow-all"]
OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,  # a run still going: this one is skipped (the default)
    "buffer-one": ScheduleOverlapPolicy.BUFFER_ONE,  # ... it starts when that one ends; one waits at most
    "cancel-other": ScheduleOverlapPolicy.CANCEL_OTHER,  # ... that one is cancelled, then this one starts
    "allow-all": ScheduleOverlapPolicy.ALLOW_ALL,  # every run starts, however many run at once
}
OVERLAP_NAMES = {v: k for k, v in OVERLAPS.items()}
UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d))+")
PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
MAX_DURATION = timedelta(days=366)
MIN_EVERY = timedelta(seconds=1)
MIN_CATCHUP = timedelta(seconds=10)  # Temporal's own floor on a catch-up window
CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
CRON_FIELD = re.compile(r"[0-9A-Za-z*/,?#-]+")
MAX_CRON = 200
MAX_NOTE = 1000


def name(value: object, field: str = "name") -> str:
    text = string(value, field)
    if not NAME.fullmatch(text):
        raise BadArgument(
            field,
            f"{text[:40]!r} is not a schedule name: 1-100 letters, digits, '.', '_' or '-', from a letter or digit",
        )
    return text


def duration(value: object, field: str, *, low: timedelta = timedelta(0)) -> timedelta:
    """A duration: a timedelta, a number of seconds, or text such as "90s", "10m", "1h30m", "2d"."""
    if isinstance(value, timedelta):
        found = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise BadArgument(field, f"must be a finite number of seconds, not {value!r}")
        found = timedelta(seconds=value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text):
            found = timedelta(seconds=float(text))
        elif DURATION.fullmatch(text):
            found = timedelta(seconds=sum(float(n) * UNIT_SECONDS[u] for n, u in PART.findall(text)))
        else:
            raise BadArgument(field, f"{value[:40]!r} is not a duration: write it as 90s, 10m, 1h30m or 2d")
    else:
        raise TypeError(
            f"{field} must be a duration (timedelta, seconds, or text like '10m'), not {type(value).__name__}"
        )
    if not low <= found <= MAX_DURATION:
        raise BadArgument(field, f"must be from {said(low)} to {MAX_DURATION.days} days, not {said(found)}")
    return found


def cron(value: object) -> str:
    """A cron expression: five fields (minute hour day month weekday), six or seven with seconds
    and years, or a macro (@daily, @hourly, ...). The server parses it for good."""
    text = " ".join(string(value, "cron").split())
    fields = text.split(" ")
    if text.lower() in CRON_MACROS or text.lower().startswith("@every "):
        return text
    if (
        not text
        or len(text) > MAX_CRON
        or not 5 <= len(fields) <= 7
        or not all(CRON_FIELD.fullmatch(f) for f in fields)
    ):
        raise BadArgument(
            "cron", f"{text[:60]!r} is not a cron expression: five fields (minute hour day month weekday), or @daily"
        )
    if len(fields) == 5:  # the common form, checked here before anything connects; the others by the server
        for field, (what, low, high) in zip(fields, CRON_RANGES, strict=True):
            for number in _numbers(field):
                if not low <= number <= high:
                    raise BadArgument("cron", f"{text[:60]!r}: the {what} is {low}-{high}, not {number}")
    return text


# The five fields' names and bounds (a weekday: 0 or 7 is Sunday).
CRON_RANGES = (("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 7))


def _numbers(field: str) -> list[int]:
    """The values a cron field names in digits (`5`, `1-5`, `*/15`'s none: a step is a count)."""
    bases = [item.split("/", 1)[0] for item in field.split(",")]
    return [int(n) for base in bases for n in base.split("-") if n.isascii() and n.isdigit()]


def jitter_within(jitter: timedelta | None, every: timedelta | None) -> None:
    """A jitter longer than the interval would be cut by Temporal to the time until the next run:
    refused, so the schedule is the one asked for."""
    if jitter is not None and every is not None and jitter > every:
        raise BadArgument(
            "jitter", f"must be at most the interval, {said(every)} (Temporal caps it there), not {said(jitter)}"
        )


def timezone(value: object) -> str:
    text = string(value, "timezone")
    try:
        if not text or len(text) > 100 or text.startswith(("/", ".")):
            raise ZoneInfoNotFoundError(text)
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        if not available_timezones():  # no time zone database here (Windows without tzdata): the server checks
            return text
        raise BadArgument(
            "timezone", f"{text[:60]!r} is not a time zone: give an IANA name such as Europe/Paris"
        ) from None
    return text


def zone_for(zone: object, cron: object) -> str | None:
    """The time zone a schedule's cron is read in (None: UTC); an interval has none to take."""
    if zone is None:
        return None
    if cron is None:
        why = "is for a cron: an interval (every) is counted from 1970 in seconds, in no time zone"
        raise BadArgument("timezone", why)
    return timezone(zone)


def note(value: object) -> str:
    """A schedule's note, shown beside its state: one line of at most 1,000 printable characters."""
    text = string(value, "note")
    if len(text) > MAX_NOTE or not text.isprintable():
        raise BadArgument("note", f"must be one line of at most {MAX_NOTE:,} printable characters")
    return text


def overlap(value: object) -> ScheduleOverlapPolicy:
    text = string(value, "overlap")
    if text not in OVERLAPS:
        raise BadArgument("overlap", f"must be one of {', '.join(OVERLAPS)}, not {text[:40]!r}")
    return OVERLAPS[text]


def moment(value: object, field: str) -> datetime:
    """A point in time: a datetime, or ISO 8601 text ("2026-12-01T09:00", "2026-12-01"); without a
    zone it is UTC."""
    if isinstance(value, datetime):
        found = value
    elif isinstance(value, str):
        try:
            found = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            why = f"{value[:40]!r} is not a time: write it as 2026-12-01T09:00 (UTC) or with +02:00"
            raise BadArgument(field, why) from None
    else:
        raise TypeError(f"{field} must be a datetime or ISO 8601 text, not {type(value).__name__}")
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def said(d: timedelta) -> str:
    """A duration as a person writes it: 10s, 5m, 1h30m, 2d."""
    seconds = int(d.total_seconds())
    if seconds != d.total_seconds() or seconds <= 0:
        return f"{d.total_seconds():g}s"
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out
