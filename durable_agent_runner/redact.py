"""The API key never leaves the worker: one `Redactor`, and where the worker enforces it.

The model activity masks what it builds from a server's bytes itself; on top of that, for
every activity (tools included), `RedactingInterceptor` masks results, heartbeat details and
errors (what reaches history and the UI), and `RedactingFilter` masks log records.
`redaction_for(settings)` builds both for the worker.

Masking always comes before any cut: a key cut in two is no longer recognized, and its first
half would leak.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError, TemporalError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from durable_agent_runner.config.llm import LLMSettings

T = TypeVar("T")

MASK = "***"
# Shorter "keys" are placeholders that local servers ignore ("EMPTY", "ollama"): masking them
# everywhere would mangle ordinary text, and there is nothing to protect.
MIN_SECRET = 8
# Any run of this many characters of a key is masked too: a server that streams the key split
# over several events leaves pieces of it in each raw line, which no whole-key match finds.
FRAGMENT = 8
_MAX_CAUSES = 8


class Redactor:
    """Masks keys in text, whole or any piece of FRAGMENT characters or more (so `Bearer KEY`
    becomes `Bearer ***`), and deeply in values: str, dict, list, tuple, pydantic models and
    dataclasses. Without a key it is a no-op."""

    def __init__(self, *keys: str | None) -> None:
        self.secrets = tuple(sorted({k for k in keys if k and len(k) >= MIN_SECRET}, key=len, reverse=True))
        pieces = sorted({k[i : i + FRAGMENT] for k in self.secrets for i in range(len(k) - FRAGMENT + 1)})
        # A lookahead finds overlapping pieces; their union (a whole key, say) is what gets masked.
        self._piece = re.compile(f"(?=({'|'.join(map(re.escape, pieces))}))") if pieces else None
        # Every piece holds one of these blocks: a test much cheaper than the regex, for text without a key.
        step = FRAGMENT // 2
        self._blocks = {k[i : i + step] for k in self.secrets for i in range(0, len(k) - step + 1, step)}

    @classmethod
    def for_settings(cls, settings: LLMSettings) -> Redactor:
        return cls(*settings.keys())

    def text(self, s: str) -> str:
        return self._masked(s, 0, len(s))

    def _spans(self, s: str) -> list[list[int]]:
        """Where `s` holds keys: [start, end) of each run of overlapping key pieces."""
        spans: list[list[int]] = []
        if self._piece is None or not any(b in s for b in self._blocks):
            return spans
        for m in self._piece.finditer(s):
            if spans and m.start() <= spans[-1][1]:
                spans[-1][1] = m.start() + FRAGMENT
            else:
                spans.append([m.start(), m.start() + FRAGMENT])
        return spans

    def _masked(self, s: str, lo: int, hi: int) -> str:
        """`s` masked, without its characters outside [lo, hi) that no mask covers (a mask
        across `lo` or `hi` stays: it hides what is on both sides)."""
        out, at = [], lo
        for start, end in self._spans(s):
            if end <= lo or start >= hi:
                continue
            out += [s[at:start], MASK]
            at = max(at, end)
        return "".join([*out, s[at:hi]])

    def leaks(self, s: str) -> bool:
        return self._piece is not None and self._piece.search(s) is not None

    def visible(self, s: str, *, cut_before: bool = False, cut_after: bool = False) -> str:
        """`s` masked, when it is a piece cut out of a longer text: a secret the cut split is
        no longer recognized, so whatever could be its part at a cut edge is dropped too."""
        # Found in `s`, not in its masked form: a mask may swallow part of a split key's edge
        # (when the key's piece runs into another key), and leave the rest no longer like a key.
        lo = max((_overlap(k, s, len(k) - 1) for k in self.secrets), default=0) if cut_before else 0  # a key's end?
        tail = max((_overlap(s, k, len(k) - 1) for k in self.secrets), default=0) if cut_after else 0  # a key's start?
        return self._masked(s, lo, len(s) - tail)

    def scrub(self, value: T) -> T:
        return value if self._piece is None else cast(T, self._scrub(value))

    def _scrub(self, value: object) -> object:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, BaseModel):
            fields = type(value).model_fields
            return value.model_copy(update={name: self._scrub(getattr(value, name)) for name in fields})
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        if type(value) is list:
            return [self._scrub(v) for v in cast(list[object], value)]
        if type(value) is tuple:  # not a NamedTuple: its fields would not survive a plain rebuild
            return tuple(self._scrub(v) for v in cast(tuple[object, ...], value))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self._scrub(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
            return dataclasses.replace(value, **changes)
        return value

    def error(self, err: BaseException, depth: int = 0) -> BaseException:
        """`err` with its message, details and causes masked. An exception that is not an
        ApplicationError becomes one of the same type name, which Temporal retries alike."""
        if not self._error_leaks(err) or (isinstance(err, TemporalError) and not isinstance(err, ApplicationError)):
            return err  # nothing to mask, or the SDK's own (cancellation): leave it untouched
        if isinstance(err, ApplicationError):
            clean = ApplicationError(
                self.text(err.message),
                *self.scrub(list(err.details)),
                type=err.type,
                non_retryable=err.non_retryable,
                next_retry_delay=err.next_retry_delay,
                category=err.category,
            )
        else:
            clean = ApplicationError(self.text(str(err)), type=type(err).__name__)
        if err.__cause__ is not None and depth < _MAX_CAUSES:
            clean.__cause__ = self.error(err.__cause__, depth + 1)
        clean.__suppress_context__ = True  # the original, unmasked, must not ride along as context
        return clean.with_traceback(err.__traceback__)

    def _error_leaks(self, err: BaseException | None) -> bool:
        for _ in range(_MAX_CAUSES + 1):
            if err is None:
                return False
            details = err.details if isinstance(err, ApplicationError) else ()
            if self.leaks(str(err)) or self.leaks(repr(details)):
                return True
            err = err.__cause__
        return False


def _overlap(head: str, tail: str, most: int) -> int:
    """The length (at most `most`) of the longest end of `head` that `tail` starts with."""
    for n in range(min(most, len(head), len(tail)), 0, -1):
        if head.endswith(tail[:n]):
            return n
    return 0


# ------------------------------------------------------------------------ worker-wide


class RedactingInterceptor(Interceptor):
    """Masks every activity's result, heartbeat details and raised error."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self.redactor)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, redactor: Redactor) -> None:
        super().__init__(next)
        self._redactor = redactor

    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        super().init(_Outbound(outbound, self._redactor))

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            result = await super().execute_activity(input)
        except Exception as err:
            clean = self._redactor.error(err)
            if clean is err:
                raise
            raise clean from clean.__cause__
        return self._redactor.scrub(result)


class _Outbound(ActivityOutboundInterceptor):
    def __init__(self, next: ActivityOutboundInterceptor, redactor: Redactor) -> None:
        super().__init__(next)
        self._redactor = redactor

    def heartbeat(self, *details: Any) -> None:
        super().heartbeat(*(self._redactor.scrub(d) for d in details))


class RedactingFilter(logging.Filter):
    """Masks log records: the formatted message, the exception text and the stack. Attach it
    to handlers (a logger's filters do not see records propagated from its children)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.redactor.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging would report it; mask what it would print
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = self.redactor.text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


def redaction_for(settings: LLMSettings) -> tuple[RedactingInterceptor, RedactingFilter]:
    """What the worker installs: the interceptor (Worker(interceptors=[...])) and the log
    filter (on every handler of the root logger)."""
    redactor = Redactor.for_settings(settings)
    return RedactingInterceptor(redactor), RedactingFilter(redactor)
