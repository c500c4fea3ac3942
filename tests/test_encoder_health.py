"""Dead encoders leave the list (SPEC section 7): probed, evicted after 3 failures, revived, forgotten.

Each encoder is a real tiny aiohttp server answering ``GET /health`` with
200, 500 or never; a dead one is a port nothing listens on. The server under
test probes every 0.05 s; a test awaits the list's change with a long-poll
(``after=V&wait=S``), or the prober's rounds, never a sleep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import pytest
import requests
from aiohttp import web

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.encoders.health import ENCODER_HEALTH, evicted_key
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.store import members_of
from testbed.etcd_server import unique_prefix
from testbed.redis_server import free_port

from .helpers.cli import serve
from .helpers.waits import GUARD

REGISTER = "/register_encoder_url"
UNREGISTER = "/unregister_encoder_url"
LIST = "/list_encoder_urls"
DEAD = f"http://127.0.0.1:{free_port()}"
"""Nothing listens there: every probe is refused."""


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(settings=(EncoderSettings(encoder_health_interval=0.05, encoder_health_timeout=0.5),))


def _probes(config: ServerConfig, **changes: float) -> ServerConfig:
    """``config`` with its encoder probes' settings changed."""
    return config.with_settings(dataclasses.replace(config.settings_of(EncoderSettings), **changes))


class Encoder:
    """A tiny encoder whose ``/health`` answers ``status`` (``None``: never answers)."""

    def __init__(self) -> None:
        self.status: int | None = 200
        self.probes = 0
        self.url = ""

    async def health(self, request: web.Request) -> web.Response:
        self.probes += 1
        if self.status is None:
            await asyncio.Event().wait()
        return web.Response(status=self.status or 200, text="OK")


@pytest.fixture
async def encoder(aiohttp_server: Any) -> Encoder:
    encoder = Encoder()
    app = web.Application()
    app.router.add_get("/health", encoder.health)
    server = await aiohttp_server(app)
    encoder.url = str(server.make_url("")).rstrip("/")
    return encoder


async def urls(client: Any) -> tuple[list[str], int]:
    body = await (await client.get(LIST)).json()
    return body["encoder_urls"], body["version"]


async def next_list(client: Any, after: int) -> tuple[list[str], int]:
    """The list once it changed after version ``after``: the long-poll the engines' readers could make."""
    reply = await client.get(f"{LIST}?after={after}&wait={GUARD}")
    body = await reply.json()
    assert body["version"] > after, "the list did not change in time"
    return body["encoder_urls"], body["version"]


async def evicted(client: Any) -> list[str]:
    record = await client.app[REGISTRY].get(evicted_key("default"))
    return members_of(None if record is None else record.value)


async def probed_no_more(client: Any, encoder: Encoder) -> None:
    """Once healthy again, ``encoder`` is probed no more and stays out of the list."""
    health = client.app[ENCODER_HEALTH]
    await health.after_rounds(1)  # a round in flight may still be probing it
    probes = encoder.probes
    encoder.status = 200
    await health.after_rounds(3)
    assert encoder.probes == probes
    assert (await urls(client))[0] == []


async def test_a_dead_encoder_leaves_the_list_and_a_live_one_stays(client, encoder):
    """A hard-killed encoder (refused) is evicted after 3 failed probes: readers get only the live one."""
    await client.post(REGISTER, json={"url": encoder.url})
    await client.post(REGISTER, json={"url": DEAD})
    listed, version = await urls(client)
    assert listed == [encoder.url, DEAD]
    listed, _ = await next_list(client, version)
    assert listed == [encoder.url]
    # Listed first, then out of the evicted set: by the end of the round.
    await client.app[ENCODER_HEALTH].after_rounds(1)
    assert await evicted(client) == [DEAD]
    assert encoder.probes >= 3


async def test_an_unhealthy_encoder_is_evicted_and_revived_when_healthy(client, encoder):
    """A 500 is a failure; the evicted URL is still probed and, healthy again, returns to the list (last)."""
    await client.post(REGISTER, json={"url": DEAD})
    await client.post(REGISTER, json={"url": encoder.url})
    encoder.status = 500
    listed, version = await urls(client)
    while encoder.url in listed:
        listed, version = await next_list(client, version)
    assert encoder.url in await evicted(client)
    encoder.status = 200
    while encoder.url not in listed:
        listed, version = await next_list(client, version)
    assert listed == [encoder.url]
    # Listed first, then out of the evicted set: by the end of the round.
    await client.app[ENCODER_HEALTH].after_rounds(1)
    assert await evicted(client) == [DEAD]


async def test_a_probe_past_the_timeout_is_a_failure(aiohttp_client, config, encoder):
    """An encoder that never answers its /health is evicted once the timeout has run out three times."""
    client = await aiohttp_client(create_app(_probes(config, encoder_health_timeout=0.1)))
    encoder.status = None
    await client.post(REGISTER, json={"url": encoder.url})
    _, version = await urls(client)
    assert (await next_list(client, version))[0] == []
    assert await evicted(client) == [encoder.url]


async def test_an_evicted_url_is_forgotten_after_the_ttl(aiohttp_client, config, encoder):
    """Unhealthy for the evicted TTL, a URL is no longer probed: healthy afterwards, it stays out."""
    client = await aiohttp_client(create_app(_probes(config, encoder_evicted_ttl=0.2)))
    encoder.status = 500
    await client.post(REGISTER, json={"url": encoder.url})
    _, version = await urls(client)
    assert (await next_list(client, version))[0] == []
    async with asyncio.timeout(GUARD):
        while await evicted(client):
            await client.app[ENCODER_HEALTH].after_rounds(1)
    await probed_no_more(client, encoder)


async def test_an_unregister_ends_probing_of_an_evicted_url(client, encoder):
    """An explicit unregister removes the URL from the evicted set too: healthy again, it is not re-added."""
    encoder.status = 500
    await client.post(REGISTER, json={"url": encoder.url})
    _, version = await urls(client)
    _, version = await next_list(client, version)
    assert await evicted(client) == [encoder.url]
    await client.delete(UNREGISTER, json={"url": encoder.url + "/"})
    assert await evicted(client) == []
    await probed_no_more(client, encoder)


async def test_every_namespace_is_probed(client, encoder):
    """A namespace's list is probed like the default one: its dead URL leaves, its live one stays."""
    await client.post("/ns/team-a/register_encoder_url", json={"url": DEAD})
    await client.post("/ns/team-a/register_encoder_url", json={"url": encoder.url})
    reply = await client.get(f"/ns/team-a{LIST}?after=2&wait={GUARD}")
    assert (await reply.json())["encoder_urls"] == [encoder.url]
    assert (await urls(client)) == ([], 0)


async def test_a_register_of_an_evicted_url_lists_it_at_once(client):
    """Registering an evicted URL lists it at once (no wait for a probe) and takes it out of the evicted set."""
    await client.post(REGISTER, json={"url": DEAD})
    _, version = await urls(client)
    assert (await next_list(client, version))[0] == []
    await client.post(REGISTER, json={"url": DEAD})
    assert (await urls(client))[0] == [DEAD]
    assert await evicted(client) == []


async def test_interval_zero_never_probes(aiohttp_client, encoder):
    """--encoder-health-interval 0 turns probing off: no prober, a dead URL stays listed."""
    client = await aiohttp_client(
        create_app(ServerConfig(settings=(EncoderSettings(encoder_health_interval=0),)))
    )
    assert ENCODER_HEALTH not in client.app
    await client.post(REGISTER, json={"url": DEAD})
    assert (await urls(client))[0] == [DEAD]


@pytest.mark.parametrize("shared", ["redis", "etcd"])
async def test_two_replicas_evict_and_revive_once(aiohttp_client, request, shared, encoder):
    """Two replicas over one Redis, or one etcd, both probe; an eviction and a revival are each one change
    of the list."""
    if shared == "redis":
        url = request.getfixturevalue("redis_server").url
    else:
        url = request.getfixturevalue("shared_etcd").url(unique_prefix())
    config = ServerConfig(
        store=url, settings=(EncoderSettings(encoder_health_interval=0.05, encoder_health_timeout=0.5),)
    )
    one = await aiohttp_client(create_app(config))
    two = await aiohttp_client(create_app(config))
    encoder.status = 500
    await one.post(REGISTER, json={"url": encoder.url})
    _, registered = await urls(two)
    listed, evicted_at = await next_list(two, registered)
    assert listed == []
    encoder.status = 200
    listed, revived_at = await next_list(one, evicted_at)
    assert listed == [encoder.url]
    for replica in (one, two):
        await replica.app[ENCODER_HEALTH].after_rounds(3)
    # No second eviction nor revival: the list is still the revived one, at its version.
    assert await urls(one) == ([encoder.url], revived_at)
    assert await evicted(one) == await evicted(two) == []


# -- the settings: options, the engines' variables, the defaults ---------------


def _config(argv: list[str], environ: dict[str, str]) -> EncoderSettings:
    return server_config(server_parser().parse_args(argv), environ).settings_of(EncoderSettings)


def test_the_engines_variables_are_defaults_and_options_win():
    """SGLANG_ENCODER_BOOTSTRAP_* set the defaults, as in the engines; an option wins over its variable."""
    assert _config([], {}).encoder_health_interval == 10.0
    assert (_config([], {}).encoder_health_timeout, _config([], {}).encoder_evicted_ttl) == (2.0, 600.0)
    environ = {
        "SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL": "0.5",
        "SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_TIMEOUT": "0.25",
        "SGLANG_ENCODER_BOOTSTRAP_EVICTED_TTL": "0",
    }
    config = _config([], environ)
    assert (config.encoder_health_interval, config.encoder_health_timeout, config.encoder_evicted_ttl) == (
        0.5,
        0.25,
        0.0,
    )
    config = _config(["--encoder-health-interval", "0", "--encoder-evicted-ttl", "30"], environ)
    assert (config.encoder_health_interval, config.encoder_health_timeout, config.encoder_evicted_ttl) == (
        0.0,
        0.25,
        30.0,
    )


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {"SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL": "soon"}, "HEALTH_CHECK_INTERVAL"),
        (["--encoder-health-interval", "-1"], {}, "encoder health interval"),
        (["--encoder-health-timeout", "0"], {}, "encoder health timeout"),
        (["--encoder-evicted-ttl", "nan"], {}, "encoder evicted ttl"),
    ],
)
def test_bad_settings_say_which(argv, environ, message):
    """A variable that is not a number, or a negative, zero-timeout or NaN setting, is a ValueError naming it."""
    with pytest.raises(ValueError, match=message):
        _config(argv, environ)


def test_the_server_reads_the_engines_variable_and_evicts() -> None:
    """python -m aiobootstrap with SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL set probes at that pace."""
    environ = {**os.environ, "SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL": "0.05"}
    served = serve("--log-level", "warning", env=environ)
    try:
        reply = requests.post(f"{served.url}{REGISTER}", json={"url": DEAD}, timeout=GUARD)
        assert reply.text == "OK"
        reply = requests.get(f"{served.url}{LIST}?after=1&wait={GUARD}", timeout=GUARD + 5)
        assert reply.json()["encoder_urls"] == []
    finally:
        served.process.terminate()
        _, err = served.process.communicate(timeout=GUARD)
    assert "evicted encoder URL" in err
