"""Sentinels with a password of their own: ``sentinel_password=`` (and ``sentinel_username=``) in the URL.

One deployment serves the module: the Redis nodes require one password
(``requirepass``, and ``masterauth`` for the replica), the three Sentinels
another (``requirepass``, and ``sentinel auth-pass`` to watch the nodes).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store.sentinel_url import parse_sentinel_url
from aiobootstrap.store.url import describe
from testbed.redis_server import REDIS_SERVER, SKIP_REASON
from testbed.sentinel_cluster import SentinelCluster

from .helpers.cli import launch
from .helpers.registry import registration
from .helpers.waits import GUARD

NODES = "node-secret-1"
SENTINELS = "sentinel-secret-2"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelCluster]:
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    deployment = SentinelCluster(
        tmp_path_factory.mktemp("sentinel-auth"), node_password=NODES, sentinel_password=SENTINELS
    )
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


async def test_the_store_works_through_sentinels_with_a_password_and_follows_a_failover(
    aiohttp_client: Any, guarded: SentinelCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Both passwords given: registrations land, read back, and go on landing after SENTINEL FAILOVER; no log
    line of the replica holds either password."""
    config = ServerConfig(store=guarded.url, store_prefix="auth")
    with caplog.at_level(logging.DEBUG, logger="aiobootstrap"):
        client = await aiohttp_client(create_app(config))
        assert (await client.put("/register_transfer_engine_info", json=registration(0))).status == 200
        old = guarded.failover()
        async with asyncio.timeout(GUARD * 2):
            while not await asyncio.to_thread(guarded.promoted, old):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            while (
                reply := await client.put("/register_transfer_engine_info", json=registration(1))
            ).status != 200:
                assert reply.status == 503, await reply.text()
                await asyncio.sleep(0.05)
        for rank in (0, 1):
            assert (await client.get("/get_transfer_engine_info", params={"rank": str(rank)})).status == 200
    assert client.app[REGISTRY].store.description == describe(guarded.url)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert NODES not in logged
    assert SENTINELS not in logged
    assert "sentinel_password=***" in describe(guarded.url)


@pytest.mark.parametrize("given", ["wrong-password", None])
def test_a_wrong_or_missing_sentinel_password_stops_the_server_with_one_line_and_status_1(
    guarded: SentinelCluster, given: str | None
) -> None:
    """The Sentinels refuse the password (or its absence): exit 1 after the open timeout, not a hang, one line
    saying the Sentinels refused it, and neither password on it."""
    process = launch("--port", "0", "--store", guarded.url_with(given))
    out, err = process.communicate(timeout=GUARD * 2)
    assert process.returncode == 1, err
    assert "listening" not in out
    assert len(err.strip().splitlines()) == 1, err
    assert "the Sentinels refused the password" in err
    assert NODES not in err
    assert given is None or given not in err


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("sentinel_password=", "has an empty sentinel_password"),
        ("sentinel_username=bob", "gives sentinel_username without sentinel_password"),
        ("sentinel_password=a&sentinel_password=b", "gives sentinel_password twice"),
        ("sentinel_pasword=secret", "has the parameter 'sentinel_pasword'"),
    ],
)
def test_a_malformed_sentinel_credential_is_refused_in_one_line(query: str, said: str) -> None:
    """What the Sentinels' credentials can get wrong is one line at the config, naming no password."""
    url = f"redis+sentinel://:secret@127.0.0.1:26379/registry?{query}"
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        server_config(server_parser().parse_args(["--store", url]), {})
    assert "\n" not in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_malformed_sentinel_credential_stops_the_server_with_status_2() -> None:
    """As a user runs it: exit 2 before listening, one line, the passwords hidden."""
    url = "redis+sentinel://:secret@127.0.0.1:26379/registry?sentinel_password=hush&sentinel_password=hush"
    process = launch("--port", "0", "--store", url)
    out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "twice" in err
    assert "secret" not in err
    assert "hush" not in err


def test_the_sentinel_credentials_are_read_and_hidden() -> None:
    """sentinel_username and sentinel_password reach the parsed URL (not the nodes' URL), and neither its repr
    nor the store's description shows the password."""
    url = "redis+sentinel://u:node@h1:1,h2/registry?db=3&sentinel_username=watch&sentinel_password=p%26ss"
    parsed = parse_sentinel_url(url)
    assert (parsed.sentinel_username, parsed.sentinel_password) == ("watch", "p&ss")
    assert parsed.node_url == "redis://u:node@sentinel.named/3"
    assert "p&ss" not in repr(parsed)
    assert describe(url) == (
        "redis+sentinel://u:***@h1:1,h2/registry?db=3&sentinel_username=watch&sentinel_password=***"
    )
