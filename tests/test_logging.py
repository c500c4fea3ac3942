"""Logs: one line per registration, access log only when asked, JSON lines for log pipelines."""

from __future__ import annotations

import io
import json
import logging
import signal
import sys
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import SyncBootstrapClient
from aiobootstrap._logging import JsonFormatter, setup_logging

from .helpers.cli import serve
from .helpers.registry import registration
from .helpers.waits import GUARD


def test_json_formatter_writes_one_object_per_line() -> None:
    """Standard fields, the extra= fields, and a traceback, all inside one line of JSON."""
    logger = logging.getLogger("aiobootstrap.test")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logger.makeRecord(
            logger.name,
            logging.ERROR,
            __file__,
            1,
            "registered rank %d",
            (3,),
            sys.exc_info(),
            extra={"rank": 3, "session_id": "s", "when": object()},
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "aiobootstrap.test"
    assert entry["message"] == "registered rank 3"
    assert entry["time"].startswith(time.strftime("%Y-", time.gmtime(record.created)))
    assert (entry["rank"], entry["session_id"]) == (3, "s")
    assert entry["when"].startswith("<object")
    assert "ValueError: boom" in entry["exception"]
    assert "args" not in entry
    assert "msg" not in entry


_RECORD_FLAGS = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    flags = {name: getattr(logging, name) for name in _RECORD_FLAGS}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, value in flags.items():
        setattr(logging, name, value)


@pytest.mark.usefixtures("restore_root_logger")
def test_text_lines_are_the_stdlib_formatters() -> None:
    """The text format writes what logging.Formatter with its format string writes, traceback included,
    whichever second the time falls in."""
    stream = io.StringIO()
    setup_logging("info", "text", stream)
    [handler] = logging.getLogger().handlers
    stdlib = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger = logging.getLogger("aiobootstrap.test")
    for created in (1_700_000_000.0, 1_700_000_000.9996, 1_700_000_001.5, 1_699_999_999.25, time.time()):
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "rank %d %s", (3, "s"), None)
        record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
        assert handler.format(record) == stdlib.format(record)
    try:
        raise ValueError("boom")
    except ValueError:
        record = logger.makeRecord(logger.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert handler.format(record) == stdlib.format(record)
    assert "ValueError: boom" in handler.format(record)


@pytest.mark.usefixtures("restore_root_logger")
def test_setup_logging_replaces_the_handlers() -> None:
    """setup_logging leaves one handler, at the asked level, in the asked format."""
    stream = io.StringIO()
    setup_logging("warning", "json", stream)
    logging.getLogger("aiobootstrap").info("hidden")
    logging.getLogger("aiobootstrap").warning("shown")
    [line] = stream.getvalue().splitlines()
    assert json.loads(line)["message"] == "shown"


def run_server(*args: str) -> list[str]:
    """Serve with ``args``, register rank 0 and get it, stop with SIGTERM; the stderr lines."""
    served = serve(*args)
    try:
        with SyncBootstrapClient(served.url) as client:
            client.register(0, session_id="10.0.0.7:18000", weights_info_dict={"w": 1})
            client.get(0, timeout=GUARD)
        served.process.send_signal(signal.SIGTERM)
        _, stderr = served.process.communicate(timeout=GUARD)
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.communicate()
    assert served.process.returncode == 0
    return stderr.splitlines()


@pytest.fixture(scope="module")
def text_lines() -> list[str]:
    """A server's log in the default text format, without the access log."""
    return run_server()


@pytest.fixture(scope="module")
def json_lines() -> list[str]:
    """A server's log as JSON lines, with the access log."""
    return run_server("--access-log", "--log-format", "json")


def test_json_log_lines_parse_and_carry_the_registration(json_lines: list[str]) -> None:
    """--log-format json: every stderr line is a JSON object; the registration has its own fields."""
    entries = [json.loads(line) for line in json_lines]
    registrations = [entry for entry in entries if "rank" in entry]
    assert len(registrations) == 1
    [registration] = registrations
    assert registration["logger"] == "aiobootstrap"
    assert registration["level"] == "INFO"
    assert (registration["rank"], registration["session_id"]) == (0, "10.0.0.7:18000")
    assert registration["version"] == 1
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in entries)


def test_registration_is_logged_once(text_lines: list[str]) -> None:
    """Each registration logs one line naming rank, session id and version."""
    assert [line for line in text_lines if "registered rank" in line] == [
        line for line in text_lines if "registered rank 0 session 10.0.0.7:18000 version 1" in line
    ]
    assert any("registered rank 0 session 10.0.0.7:18000 version 1" in line for line in text_lines)


def test_access_log_only_when_asked(text_lines: list[str], json_lines: list[str]) -> None:
    """Requests are logged only with --access-log."""
    assert not any("aiohttp.access" in line for line in text_lines)
    entries = [json.loads(line) for line in json_lines]
    access = [entry for entry in entries if entry["logger"] == "aiohttp.access"]
    assert any('"PUT /register_transfer_engine_info' in entry["message"] for entry in access)
    assert any(
        "GET /get_transfer_engine_info?rank=0" in entry["message"] and " 200 " in entry["message"]
        for entry in access
    )


async def test_registration_line_stays_one_line_and_names_its_namespace(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    """A session id with a newline is logged escaped (the field keeps it exact); a namespace is named."""
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    body = registration(2, session_id="evil\nINFO forged line")
    response = await client.put("/ns/blue/register_transfer_engine_info", json=body)
    assert response.status == 200
    [record] = [record for record in caplog.records if record.getMessage().startswith("registered")]
    assert "\n" not in record.getMessage()
    assert (
        record.getMessage()
        == "registered rank 2 session 'evil\\nINFO forged line' version 1 in namespace blue"
    )
    assert record.__dict__["session_id"] == "evil\nINFO forged line"
    assert record.__dict__["namespace"] == "blue"


def test_a_recurring_event_is_logged_once_a_minute_with_a_count(monkeypatch, caplog) -> None:
    """RateLimited logs the first occurrence, keeps quiet for its interval, then logs again with how many it held back."""
    from aiobootstrap._logging import RateLimited

    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    limited = RateLimited(logging.getLogger("aiobootstrap.test"), interval=60.0)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap.test"):
        for _ in range(5):
            limited.log(logging.WARNING, "table full at %d", 64)
        now[0] += 61
        limited.log(logging.WARNING, "table full at %d", 64)
    assert [r.getMessage() for r in caplog.records] == [
        "table full at 64",
        "table full at 64 (and 4 times more since the last such message)",
    ]


_BAD_LINE = b"GET /health?" + b"\x01" * 8100 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
"""The request line of issue 18: no token needed, 8 KB of control characters, a 400 from aiohttp's parser."""


async def test_a_flood_of_malformed_request_lines_is_one_bounded_line(caplog) -> None:
    """Twenty malformed request lines: one WARNING line of bounded length, not twenty of 32 KB each."""
    import asyncio

    from aiobootstrap import BootstrapServer

    async with BootstrapServer(port=0) as server:
        with caplog.at_level(logging.WARNING, logger="aiobootstrap.http"):
            for _ in range(20):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(_BAD_LINE)
                head = await asyncio.wait_for(reader.read(), GUARD)
                writer.close()
                assert head.split(b" ")[1] == b"400"
    [record] = [r for r in caplog.records if r.name == "aiobootstrap.http"]
    message = record.getMessage()
    assert (record.levelno, record.exc_info) == (logging.WARNING, None)
    assert "\n" not in message
    assert len(message) < 400
    assert message.startswith("Error handling request from 127.0.0.1: 400 Invalid char in url query")
    assert "...[32" in message  # the request quoted, cut, and its full length named


def test_bad_requests_are_counted_between_their_lines(monkeypatch, caplog) -> None:
    """Held back for the interval, then the next line says how many there were; other records pass."""
    from aiohttp.http_exceptions import BadHttpMessage

    from aiobootstrap._logging import http_logger

    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    log = http_logger(interval=60.0)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap.http"):
        for _ in range(5):
            log.exception("Error handling request from %s", "10.0.0.9", exc_info=BadHttpMessage("bad\nline"))
        log.warning("something else")
        now[0] += 61
        log.exception("Error handling request from %s", "10.0.0.9", exc_info=BadHttpMessage("bad"))
    assert [r.getMessage() for r in caplog.records] == [
        "Error handling request from 10.0.0.9: 400 bad line",
        "something else",
        "Error handling request from 10.0.0.9: 400 bad (and 4 times more since the last such message)",
    ]


def test_clipped_cuts_a_long_text_with_a_marker() -> None:
    """clipped() cuts at 256 characters by default, naming the full length; a short text is unchanged."""
    from aiobootstrap._logging import clipped

    assert clipped("10.0.0.7:18000") == "10.0.0.7:18000"
    assert clipped("x" * 5000) == "x" * 256 + "...[5000 chars]"
    assert clipped("x" * 5000, 100) == "x" * 100 + "...[5000 chars]"
