"""What the page reads besides the listings it always had: waiters per rank in ``/ranks`` (and the client's
``RankListing``), and ``GET /encoder_url_health`` (and the clients' ``encoder_url_health``). The real app
through ``aiohttp_client``, no browser."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from aiohttp import web

from aiobootstrap import (
    BootstrapClient,
    EncoderHealthReport,
    EncoderUrlHealth,
    ServerConfig,
    SyncBootstrapClient,
    create_app,
)
from aiobootstrap._ranks import RankSet
from aiobootstrap.core.parking import Parking
from aiobootstrap.exceptions import UnexpectedReply
from aiobootstrap.server.app import release_waiters
from aiobootstrap.server.appkeys import HISTORY, REGISTRY
from aiobootstrap.server.faces.encoders.health import ENCODER_HEALTH
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.wire.encoder_health import decode_encoder_health
from aiobootstrap.wire.results import decode_listing
from testbed.redis_server import free_port

from .helpers.waits import until

GET = "/get_transfer_engine_info"


async def _listing(client: Any, query: str = "") -> dict[str, Any]:
    reply = await client.get("/ranks" + query)
    assert reply.status == 200
    return dict(await reply.json())


async def test_ranks_counts_the_waits_parked_on_each_rank(aiohttp_client: Any) -> None:
    """Two gets on rank 3, one on rank 5 and a batch on 0-7 (4 and 6 there): each rank with its count, in
    ranges; the client reads the same; a wait that leaves is uncounted."""
    client = await aiohttp_client(
        create_app(ServerConfig(world_size=8)), server_kwargs={"handler_cancellation": True}
    )
    registry = client.app[REGISTRY]
    for rank in (4, 6):
        body = {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": {}}}
        assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    gets = [asyncio.create_task(client.get(f"{GET}?rank={rank}&wait=30")) for rank in (3, 3, 5)]
    batch = asyncio.create_task(client.get(f"{GET}_batch?ranks=0-7&wait=30"))
    draft = asyncio.create_task(client.get(f"{GET}?rank=3&role=draft&wait=30"))
    await until(lambda: registry.parked == 5)
    listing = await _listing(client)
    assert listing["waiters"] == 5  # the namespace's, as before
    assert listing["waiters_by_rank"] == {"0-2,7": 1, "3": 3, "5": 2}
    decoded = decode_listing(await (await client.get("/ranks")).read())
    assert [decoded.waiting_on(rank) for rank in range(8)] == [1, 1, 1, 3, 0, 2, 0, 1]
    assert (await _listing(client, "?role=draft"))["waiters_by_rank"] == {"3": 1}
    gets[2].cancel()
    await asyncio.gather(gets[2], return_exceptions=True)
    await until(lambda: registry.parked == 4)
    assert (await _listing(client))["waiters_by_rank"] == {"0-2,5,7": 1, "3": 3}
    for task in [*gets[:2], batch, draft]:
        task.cancel()
    await asyncio.gather(*gets, batch, draft, return_exceptions=True)
    await until(lambda: registry.parked == 0)
    assert (await _listing(client))["waiters_by_rank"] == {}


def test_an_old_servers_listing_has_no_waiters_by_rank() -> None:
    """A listing without the field (an older server) decodes, with no waits on any rank."""
    old = b'{"version": 1, "world_size": 2, "ranks": [], "missing": [0, 1], "waiters": 0}'
    listing = decode_listing(old)
    assert listing.waiters_by_rank == ()
    assert listing.waiting_on(0) == 0


async def test_a_batch_wait_on_65536_ranks_is_one_entry() -> None:
    """Parking a wait on a set costs no write per rank: the set is kept whole, and read back as one range."""
    parking = Parking(None)
    parked = parking.park("default", "transfer_engine_info", "target", RankSet.below(65536))
    parking.park("default", "transfer_engine_info", "target", 70000)
    # Ranks with as many waits are one set: one entry, whatever their number.
    assert parking.by_rank("default", "transfer_engine_info", "target") == [
        (RankSet.parse("0-65535,70000"), 1)
    ]
    parked.ranks = RankSet([(10, 20)])  # a batch's set narrows as ranks arrive
    assert parking.by_rank("default", "transfer_engine_info", "target") == [(RankSet.parse("10-20,70000"), 1)]
    parking.unpark(parked)
    assert parking.count == 1


class Encoder:
    """A tiny encoder whose ``/health`` answers ``status``."""

    def __init__(self) -> None:
        self.status = 200

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.status, text="OK")


async def test_encoder_health_says_healthy_failing_and_evicted(
    aiohttp_client: Any, aiohttp_server: Any
) -> None:
    """A live encoder healthy, one that fails counted in failures, a dead one evicted with its age; the
    engines' /list_encoder_urls reply is unchanged (no health in it)."""
    encoder = Encoder()
    app = web.Application()
    app.router.add_get("/health", encoder.health)
    live = str((await aiohttp_server(app)).make_url("")).rstrip("/")
    dead = f"http://127.0.0.1:{free_port()}"
    config = ServerConfig(
        settings=(EncoderSettings(encoder_health_interval=0.05, encoder_health_timeout=0.5),)
    )
    client = await aiohttp_client(create_app(config))
    for url in (live, dead):
        assert (await client.post("/register_encoder_url", json={"url": url})).status == 200
    prober = client.app[ENCODER_HEALTH]
    await prober.after_rounds(4)  # three failures evict
    body = await (await client.get("/encoder_url_health")).json()
    assert body["probing"] is True
    assert body["failures_to_evict"] == 3
    states = {each["url"]: each for each in body["encoder_urls"]}
    assert states[live] == {"url": live, "state": "healthy", "failures": 0}
    assert states[dead]["state"] == "evicted"
    assert states[dead]["evicted_for"] >= 0
    encoder.status = 500
    await prober.after_rounds(1)
    body = await (await client.get("/encoder_url_health")).json()
    failing = next(each for each in body["encoder_urls"] if each["url"] == live)
    assert failing["state"] == "failing"
    assert 1 <= failing["failures"] < 3
    assert set(await (await client.get("/list_encoder_urls")).json()) == {"encoder_urls", "version"}


async def test_the_clients_read_the_encoder_health(aiohttp_client: Any, aiohttp_server: Any) -> None:
    """``encoder_url_health()`` of both clients: the route's reply, decoded (a live URL healthy, a dead
    one evicted with its age); a reply that is not one is ``UnexpectedReply``."""
    encoder = Encoder()
    app = web.Application()
    app.router.add_get("/health", encoder.health)
    live = str((await aiohttp_server(app)).make_url("")).rstrip("/")
    dead = f"http://127.0.0.1:{free_port()}"
    server = await aiohttp_server(
        create_app(ServerConfig(settings=(EncoderSettings(encoder_health_interval=0.05),)))
    )
    url = str(server.make_url("")).rstrip("/")
    async with BootstrapClient(url) as client:
        for each in (live, dead):
            await client.register_encoder_url(each)
        await server.app[ENCODER_HEALTH].after_rounds(4)  # three failures evict
        report = await client.encoder_url_health()
    raw = await (await (await aiohttp_client(server)).get("/encoder_url_health")).json()
    assert report.probing is True
    assert (report.version, report.findings, report.interval) == (raw["version"], raw["findings"], 0.05)
    assert report.failures_to_evict == 3
    assert report.encoder_urls[0] == EncoderUrlHealth(live, "healthy", 0)
    (evicted,) = report.encoder_urls[1:]
    assert (evicted.url, evicted.state) == (dead, "evicted")
    assert evicted.evicted_for is not None
    assert evicted.evicted_for >= 0

    def blocking() -> EncoderHealthReport:
        with SyncBootstrapClient(url) as sync:
            return sync.encoder_url_health()

    assert (await asyncio.to_thread(blocking)).encoder_urls[0] == EncoderUrlHealth(live, "healthy", 0)
    for wrong in (b"[]", b'{"version": 1}', raw_with(raw, state="sleepy"), raw_with(raw, probing="yes")):
        with pytest.raises(UnexpectedReply, match="not an encoder health report"):
            decode_encoder_health(wrong)


def raw_with(raw: dict[str, Any], **changed: Any) -> bytes:
    """``raw`` re-encoded, with ``state`` given to its first URL and any other field replaced."""
    state = changed.pop("state", None)
    urls = [dict(raw["encoder_urls"][0], **({} if state is None else {"state": state}))]
    return json.dumps({**raw, **changed, "encoder_urls": urls}).encode()


async def test_a_url_not_probed_yet_is_unprobed_then_healthy(
    aiohttp_client: Any, aiohttp_server: Any
) -> None:
    """A URL listed since the last round of probes is ``unprobed``, not ``healthy`` (the page showed it as
    answering /health); the round that probes it makes it healthy, a finding the page's watch hears."""
    app = web.Application()
    app.router.add_get("/health", Encoder().health)
    live = str((await aiohttp_server(app)).make_url("")).rstrip("/")
    client = await aiohttp_client(
        create_app(ServerConfig(settings=(EncoderSettings(encoder_health_interval=3600),)))
    )
    assert (await client.post("/register_encoder_url", json={"url": live})).status == 200
    body = await (await client.get("/encoder_url_health")).json()
    assert body["encoder_urls"] == [{"url": live, "state": "unprobed", "failures": 0}]
    findings = body["findings"]
    await client.app[ENCODER_HEALTH].round()
    body = await (await client.get("/encoder_url_health")).json()
    assert body["encoder_urls"] == [{"url": live, "state": "healthy", "failures": 0}]
    assert body["findings"] == findings + 1


async def test_encoder_health_without_probing_says_listed(aiohttp_client: Any) -> None:
    """With --encoder-health-interval 0 the URLs are listed, unprobed; in a namespace as in the default."""
    client = await aiohttp_client(
        create_app(
            dataclasses.replace(ServerConfig(), settings=(EncoderSettings(encoder_health_interval=0),))
        )
    )
    await client.post("/ns/team-a/register_encoder_url", json={"url": "http://10.0.0.9:8000"})
    body = await (await client.get("/ns/team-a/encoder_url_health")).json()
    assert body["probing"] is False
    assert body["encoder_urls"] == [{"url": "http://10.0.0.9:8000", "state": "listed", "failures": 0}]
    assert (await (await client.get("/ns/bad name/encoder_url_health")).json())["detail"]


async def test_a_revival_is_one_put_on_the_watch(aiohttp_client: Any, aiohttp_server: Any) -> None:
    """An eviction is one delete and a revival one put on /watch: the evicted set's own changes are not
    read as changes of the list (they were: a revival came as a put and then a delete)."""
    encoder = Encoder()
    encoder.status = 500
    app = web.Application()
    app.router.add_get("/health", encoder.health)
    url = str((await aiohttp_server(app)).make_url("")).rstrip("/")
    client = await aiohttp_client(
        create_app(ServerConfig(settings=(EncoderSettings(encoder_health_interval=0.05),)))
    )
    await client.post("/register_encoder_url", json={"url": url})
    registered = (await (await client.get("/list_encoder_urls")).json())["version"]
    prober = client.app[ENCODER_HEALTH]
    while (await (await client.get("/list_encoder_urls")).json())["encoder_urls"]:
        await prober.after_rounds(1)
    await prober.after_rounds(1)  # the eviction's two writes done
    evicted = (await (await client.get("/watch?after=0")).json())["version"]
    encoder.status = 200
    while not (await (await client.get("/list_encoder_urls")).json())["encoder_urls"]:
        await prober.after_rounds(1)
    await prober.after_rounds(1)
    changes = (await (await client.get(f"/watch?after={registered}")).json())["changes"]
    assert [(each["op"], each["version"] > evicted) for each in changes] == [("delete", False), ("put", True)]


async def test_watch_with_waits_answers_once_a_wait_parks_or_goes(aiohttp_client: Any) -> None:
    """``/watch?after=V&waits=N&wait=S`` (the page's): parked while nothing changes and no wait moves,
    answered with no change as a get parks and as it goes, each reply saying the new ``waits``; answered
    by a change as any watch; at once when ``N`` is already behind. ``/namespaces`` says the first ``N``."""
    client = await aiohttp_client(create_app(ServerConfig()), server_kwargs={"handler_cancellation": True})
    registry = client.app[REGISTRY]
    first = await (await client.get("/namespaces")).json()

    def follow(waits: int, after: int = 0) -> asyncio.Task[Any]:
        return asyncio.create_task(client.get(f"/watch?after={after}&waits={waits}&wait=30"))

    watch = follow(first["waits"])
    await until(lambda: registry.parked == 0 and client.app[HISTORY].watchers == 1)
    assert not watch.done()
    get = asyncio.create_task(client.get(f"{GET}?rank=0&wait=30"))
    parked = await (await asyncio.wait_for(watch, 10)).json()
    assert parked["changes"] == []
    assert parked["waits"] > first["waits"]
    namespaces = await (await client.get("/namespaces")).json()
    assert namespaces["waits"] == parked["waits"]
    assert [(n["namespace"], n["waiters"]) for n in namespaces["namespaces"]] == [("default", 1)]
    watch = follow(parked["waits"])
    await until(lambda: client.app[HISTORY].watchers == 1)
    get.cancel()
    await asyncio.gather(get, return_exceptions=True)
    gone = await (await asyncio.wait_for(watch, 10)).json()
    assert gone["changes"] == []
    assert gone["waits"] > parked["waits"]
    watch = follow(gone["waits"])
    await until(lambda: client.app[HISTORY].watchers == 1)
    body = {"rank": 1, "transfer_engine_info": {"session_id": "s1", "weights_info_dict": {}}}
    assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    changed = await (await asyncio.wait_for(watch, 10)).json()
    assert [(c["op"], c["rank"]) for c in changed["changes"]] == [("put", 1)]
    assert changed["waits"] == gone["waits"]
    behind = await (
        await client.get(f"/watch?after={changed['version']}&waits={first['waits']}&wait=30")
    ).json()
    assert behind["changes"] == []
    assert behind["waits"] == gone["waits"]


async def test_watch_refuses_a_bad_waits_and_a_stop_lets_it_go(aiohttp_client: Any) -> None:
    """A ``waits`` that is no count is a 400 that names it; a stopping server answers a parked one."""
    client = await aiohttp_client(create_app(ServerConfig()), server_kwargs={"handler_cancellation": True})
    for bad in ("-1", "x", "1.5", ""):
        reply = await client.get(f"/watch?after=0&waits={bad}&wait=5")
        assert reply.status == 400, bad
        assert "waits" in (await reply.json())["detail"]
    registry = client.app[REGISTRY]
    watch = asyncio.create_task(
        client.get(f"/watch?after=0&waits={registry.parking.wait_changes.count}&wait=30")
    )
    await until(lambda: client.app[HISTORY].watchers == 1)
    await release_waiters(client.app)
    assert (await asyncio.wait_for(watch, 10)).status == 503


async def test_watch_with_findings_answers_when_a_probe_finds_a_url_failing(aiohttp_client: Any) -> None:
    """``&findings=M``: answered, with no change, once a probe round found something else (here: a URL
    that stopped answering, failing once, long before its eviction); the reply says the new count."""
    config = ServerConfig(
        settings=(EncoderSettings(encoder_health_interval=0.1, encoder_health_timeout=0.5),)
    )
    client = await aiohttp_client(create_app(config), server_kwargs={"handler_cancellation": True})
    dead = f"http://127.0.0.1:{free_port()}"
    assert (await client.post("/register_encoder_url", json={"url": dead})).status == 200
    version = (await (await client.get("/watch?after=0")).json())["version"]
    seen = (await (await client.get("/encoder_url_health")).json())["findings"]
    # Whatever round it is in (healthy, failing once or twice): the next round's finding answers it.
    reply = await (await client.get(f"/watch?after={version}&findings={seen}&wait=30")).json()
    if reply["changes"]:  # the third failure came first: the eviction, a change of the list
        assert [(c["op"], c["url"]) for c in reply["changes"]] == [("delete", dead)]
    else:
        assert reply["findings"] > seen
    failing = await (await client.get("/encoder_url_health")).json()
    assert failing["encoder_urls"][0]["state"] in ("failing", "evicted")
    assert failing["findings"] >= reply["findings"]
    for bad in ("-1", "x"):
        refused = await client.get(f"/watch?after=0&waits=0&findings={bad}&wait=5")
        assert refused.status == 400
        assert "findings" in (await refused.json())["detail"]
