"""The worker's log, written to standard error by a thread of its own: a standard error that
nobody reads (a pipe whose 64 KiB are full) then costs log lines, never a stalled worker.

Records are masked (the handler's filters run first) and formatted in the thread that logs them,
then queued. The queue holds at most QUEUE_RECORDS lines; a record that finds it full is counted
and dropped, and once the writer has caught up it says how many were.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUEUE_RECORDS = 10_000
CLOSE_SECONDS = 2.0  # how long a stopping worker waits for its last lines to be written


class RelayHandler(logging.Handler):
    def __init__(self, stream: TextIO | None = None, records: int = QUEUE_RECORDS) -> None:
        super().__init__()
        self._stream = stream if stream is not None else sys.stderr
        self._lines: queue.Queue[str | None] = queue.Queue(records)
        self._dropped = 0  # counted by the logging threads, reported by the writer
        self._count = threading.Lock()
        self._writer = threading.Thread(target=self._write, name="log-relay", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        try:
            self._lines.put_nowait(line)
        except queue.Full:
            with self._count:
                self._dropped += 1

    def _write(self) -> None:
        while (line := self._lines.get()) is not None:
            self._say(line)
            if self._lines.empty():
                self._caught_up()
        self._caught_up()

    def _caught_up(self) -> None:
        """Say what was dropped meanwhile, and flush."""
        with self._count:
            dropped, self._dropped = self._dropped, 0
        if dropped:
            self._say(self._dropped_line(dropped))
        self._say(None)

    def _say(self, line: str | None) -> None:
        """One line (None: flush); a closed standard error leaves nowhere to say it."""
        try:
            if line is None:
                self._stream.flush()
            else:
                self._stream.write(line + "\n")
        except (OSError, ValueError):
            pass

    def _dropped_line(self, dropped: int) -> str:
        note = logging.makeLogRecord(
            {
                "name": __name__,
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "%d log records dropped: standard error was not being read",
                "args": (dropped,),
            }
        )
        return self.format(note)

    def close(self) -> None:
        """Write what is queued, waiting at most CLOSE_SECONDS: a blocked stderr may never take it."""
        try:
            self._lines.put(None, timeout=CLOSE_SECONDS)
        except queue.Full:
            pass
        self._writer.join(CLOSE_SECONDS)
        super().close()


@contextlib.contextmanager
def log_to_stderr(level: int | str) -> Iterator[RelayHandler]:
    """The root logger at `level`, through one RelayHandler, closed on the way out; as
    `logging.basicConfig`, nothing changes if the root logger has handlers already."""
    handler = RelayHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    try:
        yield handler
    finally:
        handler.close()
