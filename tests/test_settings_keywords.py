"""A face's setting given as a keyword of a server class, as when the faces' settings were ``ServerConfig``
fields: ``BootstrapServer(dp_room_limit=2)``, ``PrefillBootstrapServer(host, port, dp_room_limit=2)``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from aiobootstrap import BootstrapServer, PrefillBootstrapServer, ServerConfig, ThreadedBootstrapServer
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.server.faces.prefill.settings import PrefillSettings


def _room(url: str, room: int) -> int:
    body = json.dumps({"bootstrap_room": room, "dp_rank": 0}).encode()
    request = urllib.request.Request(f"{url}/register_dp_rank", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_a_faces_setting_as_a_keyword_is_that_faces_setting() -> None:
    """Keywords that are a face's settings land in its settings; a config's own fields stay its own."""
    config = BootstrapServer(dp_room_ttl=60.0, encoder_health_interval=0.0, world_size=4).config
    assert config.world_size == 4
    assert config.settings_of(PrefillSettings).dp_room_ttl == 60.0
    assert config.settings_of(EncoderSettings).encoder_health_interval == 0.0
    base = ServerConfig(settings=(PrefillSettings(dp_room_limit=7),))
    kept = BootstrapServer(base, dp_room_ttl=30.0).config.settings_of(PrefillSettings)
    assert (kept.dp_room_limit, kept.dp_room_ttl) == (7, 30.0)  # the rest of the given settings kept


def test_an_unknown_keyword_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="'no_such_option'"):
        BootstrapServer(no_such_option=1)


def test_the_in_process_servers_take_a_faces_setting_and_serve_by_it() -> None:
    """The prefill drop-in given dp_room_limit=2 refuses a third room, as it did before the settings moved."""
    server = PrefillBootstrapServer("127.0.0.1", 0, dp_room_limit=2)
    try:
        assert [_room(server.url, room) for room in (1, 2, 3)] == [200, 200, 409]
    finally:
        server.close()
    ThreadedBootstrapServer("127.0.0.1", 0, encoder_health_interval=0).close()
