"""Log output for the command line: readable text, or one JSON object per line.

JSON lines carry ``time`` (UTC, ISO 8601), ``level``, ``logger`` and
``message``, plus every field the log call passed in ``extra=`` (a
registration's ``rank``, ``session_id`` and ``version``; the access log's
request fields), so a log pipeline need not parse the message.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["LOG_FORMATS", "JsonFormatter", "RateLimited", "http_logger", "printable", "setup_logging"]

LOG_FORMATS = ("text", "json")

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def printable(text: str) -> str:
    """``text`` as one safe line: escaped when it is not printable.

    Session ids come from clients. Written raw, a newline could forge a log
    line and an escape sequence could move a terminal's cursor or recolour
    it; JSON fields and replies keep the exact text.
    """
    return text if text.isprintable() else ascii(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_FIELDS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # default=str: a field json cannot encode is logged as text, never dropped with an error.
        return json.dumps(entry, default=str)


def setup_logging(level: str, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr), in ``log_format``."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


class _OneLineParseErrors(logging.Filter):
    """aiohttp logs a client's malformed request (an oversized header, say) with a
    traceback at ERROR; it is the client's mistake, worth one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Imported here: the CLI imports this module before aiohttp, to bind its port first.
        from aiohttp import web
        from aiohttp.http_exceptions import HttpProcessingError

        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, web.RequestPayloadError):  # a body aiohttp could not decode
            error = error.__cause__
        if isinstance(error, HttpProcessingError):
            said = record.getMessage()
            record.msg, record.args = "%s: %d %s", (said, error.code, error.message.strip())
            record.exc_info = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def http_logger() -> logging.Logger:
    """The logger aiohttp's connection handling writes to: ``aiobootstrap.http``, one line per bad request."""
    logger = logging.getLogger("aiobootstrap.http")
    if not any(isinstance(f, _OneLineParseErrors) for f in logger.filters):
        logger.addFilter(_OneLineParseErrors())
    return logger


class RateLimited:
    """A recurring event logged at most once per ``interval`` seconds, with a count of the ones in between.

    What an attacker or a bad day can repeat thousands of times a second
    (a full connection table, say) must not flood the log it is reported in.
    """

    def __init__(self, logger: logging.Logger, interval: float = 60.0) -> None:
        self._logger = logger
        self._interval = interval
        self._next = 0.0
        self._since = 0

    def log(self, level: int, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._since += 1
            return
        if self._since:
            message += " (and %d times more since the last such message)"
            args = (*args, self._since)
        self._logger.log(level, message, *args)
        self._next, self._since = now + self._interval, 0
