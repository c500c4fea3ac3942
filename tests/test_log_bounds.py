"""A registration's log line is bounded whatever its body holds: long fields are cut, with a marker."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from aiobootstrap._logging import LOGGED_CHARS, JsonFormatter
from aiobootstrap.wire.bodies import MAX_URL_LENGTH

LONG = 50_000


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "aiobootstrap"]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
@pytest.mark.parametrize("text", ["s" * LONG, "\x01" * LONG], ids=["plain", "unprintable"])
async def test_a_huge_session_id_is_logged_cut_in_the_message_and_the_fields(
    client: Any, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    """A 50,000-character session id: the text line and the JSON line stay a few KiB, saying it was cut.

    Fails before issue 18: the session id was logged whole, twice in a JSON line.
    """
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    body = {"rank": 0, "transfer_engine_info": {"session_id": text, "weights_info_dict": {}}}
    assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    (line,) = _lines(caplog)
    message = line.getMessage()
    assert len(message) < 8 * LOGGED_CHARS
    assert f"[{LONG} chars]" in message
    assert len(JsonFormatter().format(line)) < 16 * LOGGED_CHARS
    assert json.loads(JsonFormatter().format(line))["session_id"].endswith(f"...[{LONG} chars]")


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_a_huge_encoder_url_is_logged_cut(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """An encoder URL as long as the server takes: its line stays short and says how long the URL was."""
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    url = "http://e/" + "u" * (MAX_URL_LENGTH - len("http://e/"))
    assert (await client.post("/register_encoder_url", json={"url": url})).status == 200
    (line,) = _lines(caplog)
    assert len(line.getMessage()) < 2 * LOGGED_CHARS
    assert f"[{len(url)} chars]" in line.getMessage()


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_a_short_session_id_is_logged_whole(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A session id within the bound is logged exactly as before."""
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    body = {"rank": 0, "transfer_engine_info": {"session_id": "10.0.0.7:18000", "weights_info_dict": {}}}
    assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    (line,) = _lines(caplog)
    assert line.getMessage() == "registered rank 0 session 10.0.0.7:18000 version 1"
