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

__all__ = [
    "LOGGED_CHARS",
    "LOG_FORMATS",
    "JsonFormatter",
    "RateLimit",
    "RateLimited",
    "clipped",
    "http_logger",
    "loggable",
    "printable",
    "setup_logging",
]

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


LOGGED_CHARS = 256
"""The most characters of one client-chosen text a log line quotes (:func:`clipped`)."""


def clipped(text: str, limit: int = LOGGED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending ``...[N chars]`` (its full length) when it was longer."""
    return text if len(text) <= limit else f"{text[:limit]}...[{len(text)} chars]"


def loggable(text: str) -> str:
    """A client's text as a log message quotes it: :func:`clipped`, then :func:`printable`.

    A line costs about what a registration of sane ids costs, whatever a body holds.
    """
    return printable(clipped(text))


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


class _TextFormatter(logging.Formatter):
    """``_TEXT_FORMAT``'s lines, the same characters as ``logging.Formatter(_TEXT_FORMAT)`` writes,
    with the time's text made once per second rather than once per line."""

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)
        self._second: int | None = None
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"  # default_msec_format, %s,%03d

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)  # a traceback or a stack: the stdlib's way, appended
        record.message = message = record.getMessage()
        record.asctime = asctime = self.formatTime(record)
        return f"{asctime} {record.levelname} {record.name}: {message}"


class _LineHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic only in typeshed
    """A ``StreamHandler`` that writes and flushes each line under the one lock ``handle`` takes
    (``StreamHandler.flush`` takes it again, and asks the stream whether it can flush)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            stream = self.stream
            stream.write(line)
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


def setup_logging(level: str, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr), in ``log_format``."""
    handler = _LineHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else _TextFormatter())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    _lean_records()


def _lean_records() -> None:
    """Make each log record without the fields no format here writes (Python's logging docs, "Optimization").

    Both formats write the time, the level, the logger's name, the message, and (JSON) the
    ``extra=`` fields: never the caller's file, line and function (a walk up the stack per
    record), the thread, the process or the asyncio task. A registration logs a line, and those
    lookups were about half its cost.
    """
    logging._srcfile = None  # no caller lookup: pathname, lineno and funcName stay "(unknown ...)"
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.logAsyncioTasks = False  # type: ignore[attr-defined,unused-ignore]  # Python 3.12+


class RateLimit:
    """One kind of recurring event, let through at most once per ``interval`` seconds.

    What an attacker or a bad day can repeat thousands of times a second (a
    full connection table, a flood of malformed requests) must not flood the
    log it is reported in: the first is logged, the ones within the interval
    after it are counted, and the next one logged says how many there were.
    """

    def __init__(self, interval: float = 60.0) -> None:
        self._interval = interval
        self._next = 0.0
        self._since = 0

    def admit(self) -> int | None:
        """``None``: hold this one back. Else how many were held back since the last one let through."""
        now = time.monotonic()
        if now < self._next:
            self._since += 1
            return None
        held, self._since = self._since, 0
        self._next = now + self._interval
        return held


class RateLimited:
    """A logger's recurring event logged at most once per ``interval`` seconds (a :class:`RateLimit`),
    with a count of the ones in between."""

    def __init__(self, logger: logging.Logger, interval: float = 60.0) -> None:
        self._logger = logger
        self._limit = RateLimit(interval)

    def log(self, level: int, message: str, *args: object) -> None:
        held = self._limit.admit()
        if held is None:
            return
        if held:
            message += _HELD_BACK
            args = (*args, held)
        self._logger.log(level, message, *args)


_HELD_BACK = " (and %d times more since the last such message)"


class _HttpLog(logging.LoggerAdapter):  # type: ignore[type-arg]  # generic only in typeshed
    """One server's log of its connection handling, through logger ``aiobootstrap.http``.

    aiohttp logs a request its parser refused (an oversized or malformed
    request line or header, a body it could not decode) with a traceback at
    ERROR, and the message quotes the request's bytes over several lines.
    It is the client's mistake, and anyone can repeat it thousands of times
    a second: here it becomes one WARNING line, its account of the request
    :func:`clipped`, at most one
    per ``interval`` (the next one saying how many were held back).
    Everything else passes unchanged.
    """

    def __init__(self, logger: logging.Logger, interval: float) -> None:
        super().__init__(logger, {})
        self._bad_requests = RateLimit(interval)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        error = _parse_error(kwargs.get("exc_info"))
        if error is None:
            super().log(level, msg, *args, **kwargs)
            return
        if not self.isEnabledFor(min(level, logging.WARNING)):
            return
        held = self._bad_requests.admit()
        if held is None:
            return
        said = str(msg) % args if args else str(msg)
        # Whitespace folded (aiohttp's account spans lines), cut, then escaped: one short, safe line.
        detail = printable(clipped(" ".join(str(error.message).split())))
        line = f"{printable(clipped(said))}: {error.code} {detail}"
        if held:
            line += _HELD_BACK % held
        self.logger.log(min(level, logging.WARNING), "%s", line)


def _parse_error(exc_info: object) -> Any:
    """The aiohttp parser's error (an ``HttpProcessingError``) a log call carries, or ``None``."""
    # Imported here: the CLI imports this module before aiohttp, to bind its port first.
    from aiohttp import web
    from aiohttp.http_exceptions import HttpProcessingError

    if isinstance(exc_info, tuple):
        exc_info = exc_info[1]
    elif exc_info is True:
        exc_info = sys.exc_info()[1]
    if isinstance(exc_info, web.RequestPayloadError):  # a body aiohttp could not decode
        exc_info = exc_info.__cause__
    return exc_info if isinstance(exc_info, HttpProcessingError) else None


def http_logger(interval: float = 60.0) -> logging.LoggerAdapter:  # type: ignore[type-arg]
    """The logger one server's connection handling writes to: ``aiobootstrap.http``, a bad request
    at most once per ``interval`` seconds, in one bounded line (give each server its own)."""
    return _HttpLog(logging.getLogger("aiobootstrap.http"), interval)
