"""The etcd store over real etcd members: replicas sharing it, leases, limits, prefixes, bad URLs.

The store contract (every test of ``test_stores.py`` and the other ``FLAVORS`` modules) runs over
etcd too; this module pins what only a shared store shows: two replicas of one registry, each with
its own store or server, over one member (``shared_etcd``) and over a cluster of three
(``shared_etcd_three``), a prefix per test. The three-member cluster's faults are in
``test_etcd_cluster.py``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.exceptions import StoreUnavailable, TooManyRanks
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store import Key, Store, StoreLimits
from aiobootstrap.store.url import check_store_url, describe
from aiobootstrap.wire.bodies import session_id_of
from testbed.etcd_server import Cluster, skip_reason, unique_prefix
from testbed.ports import quiet_port

from .helpers.cli import launch
from .helpers.redis_store import Recorder
from .helpers.registry import registration
from .helpers.stores import info, key
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"


def _store(cluster: Cluster, prefix: str, limits: StoreLimits | None = None) -> Store:
    from aiobootstrap.store.etcd import EtcdStore

    return EtcdStore(cluster.url(prefix), limits=limits)


@pytest.fixture(params=["one member", "three members"])
def contract_etcd(request: pytest.FixtureRequest) -> Cluster:
    """The cluster a test of the contract runs over: one member, and three (a leader and two followers,
    so a replica's calls may reach a follower)."""
    cluster: Cluster = request.getfixturevalue(
        "shared_etcd" if request.param == "one member" else "shared_etcd_three"
    )
    return cluster


@pytest.fixture
async def pair(contract_etcd: Cluster) -> AsyncIterator[tuple[Store, Recorder, Store, Recorder]]:
    """Two replicas' stores of one registry (one prefix), each with a listener that records its feed."""
    prefix = unique_prefix()
    a, b = _store(contract_etcd, prefix), _store(contract_etcd, prefix)
    heard_a, heard_b = Recorder(), Recorder()
    await a.open(heard_a)
    await b.open(heard_b)
    yield a, heard_a, b, heard_b
    await a.close()
    await b.close()


async def _servers(aiohttp_client: Any, cluster: Cluster, prefix: str | None = None) -> tuple[Any, Any]:
    config = ServerConfig(store=cluster.url(prefix or unique_prefix()))
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


def _heard_at_least(heard: Recorder, count: int) -> bool:
    return len(heard.changes) >= count


def _heard_deleted(heard: Recorder, at: Key) -> bool:
    return any(change.deleted for change in heard.about(at))


def test_the_aetcd_client_attributes_we_set() -> None:
    """The store replaces aetcd's connect and sends its protobuf messages (store/etcd/connection.py,
    messages.py): the attributes and messages it relies on are still there (fails on the release
    that changes them)."""
    if skip_reason() is not None:
        pytest.skip(skip_reason() or "")
    import aetcd
    from aetcd import rpc

    client = aetcd.Client("127.0.0.1", 1, timeout=1)
    for name in ("_connected", "_host", "_port", "_options", "_username", "_password", "_timeout"):
        assert hasattr(client, name), name
    for name in ("channel", "metadata", "kvstub", "leasestub", "clusterstub", "maintenancestub", "_watcher"):
        assert hasattr(client, name), name
    for message in ("TxnRequest", "RangeRequest", "PutRequest", "DeleteRangeRequest", "Compare", "RequestOp"):
        assert hasattr(rpc, message), message
    for message in (
        "LeaseGrantRequest",
        "LeaseRevokeRequest",
        "LeaseTimeToLiveRequest",
        "AuthenticateRequest",
    ):
        assert hasattr(rpc, message), message


async def test_a_record_put_through_one_replica_reads_back_through_the_other_at_one_version(
    pair: tuple[Store, Recorder, Store, Recorder],
) -> None:
    """A put through A is read through B at the same version; both feeds hear it; the boot id is one."""
    a, heard_a, b, heard_b = pair
    record = await a.put(key(3), info("through-a"))
    assert await b.get(key(3)) == record
    assert await b.version("default") == record.version == 1
    await heard_b.until(lambda: heard_b.heard(key(3), 1))
    assert heard_a.heard(key(3), 1)
    assert a.incarnation == b.incarnation != ""


async def test_concurrent_puts_through_two_replicas_take_distinct_versions_in_one_order(
    pair: tuple[Store, Recorder, Store, Recorder],
) -> None:
    """Puts through both at once: versions 1..N with no gap or repeat, each feed hearing them in that order."""
    a, heard_a, b, heard_b = pair
    records = await asyncio.gather(
        *(a.put(key(i), info()) for i in range(30)), *(b.put(key(i + 30), info()) for i in range(30))
    )
    assert sorted(record.version for record in records) == list(range(1, 61))
    for heard in (heard_a, heard_b):
        await heard.until(functools.partial(_heard_at_least, heard, 60))
        assert [change.version for change in heard.changes] == list(range(1, 61))


async def test_the_rank_cap_holds_under_concurrent_writers_of_two_replicas(contract_etcd: Cluster) -> None:
    """max_ranks=10, forty new ranks through each of two replicas at once: exactly ten are stored."""
    prefix = unique_prefix()
    limits = StoreLimits(max_ranks=10, max_namespaces=1)
    a, b = _store(contract_etcd, prefix, limits), _store(contract_etcd, prefix, limits)
    await a.open(Recorder())
    await b.open(Recorder())
    try:
        puts = [
            store.put(key(rank + 100 * index), info())
            for index, store in enumerate((a, b))
            for rank in range(40)
        ]
        results = await asyncio.gather(*puts, return_exceptions=True)
        assert sum(1 for result in results if not isinstance(result, BaseException)) == 10
        assert all(
            isinstance(result, TooManyRanks) for result in results if isinstance(result, BaseException)
        )
        assert len(await b.records("default", key(0).kind, key(0).role)) == 10
        refused = await asyncio.gather(
            a.put(key(0, "other"), info()), b.put(key(1, "other"), info()), return_exceptions=True
        )
        assert all(isinstance(result, Exception) for result in refused)
        assert await a.namespaces() == ["default"]
    finally:
        await a.close()
        await b.close()


async def test_two_prefixes_keep_two_registries_apart_in_one_cluster(shared_etcd: Cluster) -> None:
    """?prefix=: a record of one registry is absent from the other, whose versions and boot id are its own."""
    first, second = _store(shared_etcd, unique_prefix()), _store(shared_etcd, unique_prefix())
    await first.open(Recorder())
    await second.open(Recorder())
    try:
        await first.put(key(0), info("first"))
        assert await second.get(key(0)) is None
        assert await second.version("default") == 0
        assert await second.namespaces() == []
        assert (await second.put(key(0), info("second"))).version == 1
        record = await first.get(key(0))
        assert record is not None
        assert session_id_of(record.value) == "first"
        assert first.incarnation != second.incarnation
    finally:
        await first.close()
        await second.close()


async def test_a_lease_left_alone_expires_on_every_replica_while_one_kept_alive_through_the_other_never_does(
    pair: tuple[Store, Recorder, Store, Recorder],
) -> None:
    """Two leases granted through A, a record on each put through B; one is kept alive through B every
    third of its TTL, the other left alone. Both feeds hear the left one's record deleted, once; the
    kept one's record stays, on a lease that reads back holding it, until revoked."""
    a, heard_a, b, heard_b = pair
    left, kept = await a.grant_lease("default", 2), await a.grant_lease("default", 2)
    assert left.ttl == kept.ttl == 2
    granted = time.monotonic()
    await b.put(key(7), info(), lease=left.id)
    await b.put(key(1), info(), lease=kept.id)

    async def keep_alive() -> None:
        while True:
            assert (await b.keepalive_lease("default", kept.id)).remaining == kept.ttl
            await asyncio.sleep(kept.ttl / 3)  # the clients' keepalive cadence, not a wait for an effect

    keeper = asyncio.create_task(keep_alive())
    try:
        for heard in (heard_a, heard_b):
            await heard.until(functools.partial(_heard_deleted, heard, key(7)), GUARD + left.ttl)
        elapsed = time.monotonic() - granted
        assert await a.get(key(7)) is None
        assert [c.version for c in heard_b.about(key(7))] == [1, 3], "one delete, one version"
        with pytest.raises(Exception, match="expired or was revoked"):
            await b.read_lease("default", left.id)
        # Kept alive past the TTL the other one ended at: still there.
        while time.monotonic() - granted < 1.5 * kept.ttl:  # noqa: ASYNC110
            await asyncio.sleep(kept.ttl / 3)
        assert await a.get(key(1)) is not None
        assert not any(change.deleted for change in heard_a.about(key(1)))
        assert (await b.read_lease("default", kept.id)).records == ((key(1), None),)
    finally:
        keeper.cancel()
    await b.revoke_lease("default", kept.id)
    assert await a.get(key(1)) is None
    # Reported, not timed: etcd's lessor checks every 500 ms; the release is one transaction after.
    print(f"lease of {left.ttl:g} s ended {elapsed:.2f} s after its grant")


async def test_a_ttl_of_one_second_is_granted_as_etcds_minimum(
    pair: tuple[Store, Recorder, Store, Recorder],
) -> None:
    """etcd leases are whole seconds, 2 at least on a default cluster: ttl=1 is granted (and said) as 2."""
    a, _, _, _ = pair
    lease = await a.grant_lease("default", 1)
    assert lease.ttl == 2
    fractional = await a.grant_lease("default", 2.5)
    assert fractional.ttl == 3


async def test_two_replica_servers_serve_one_registry_and_one_watch(
    aiohttp_client: Any, contract_etcd: Cluster
) -> None:
    """A wait parked on A is woken by a registration through B; /watch and the boot id are the same on both."""
    a, b = await _servers(aiohttp_client, contract_etcd)
    waiting = asyncio.create_task(
        a.get("/get_transfer_engine_info", params={"rank": "3", "wait": str(GUARD)})
    )
    await until(lambda: a.app[REGISTRY].parked == 1)
    assert (await b.put(REGISTER, json=registration(3, "through-b"))).status == 200
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert (await reply.json())["remote_instance_transfer_engine_info"][0] == "through-b"
    assert (await a.put(REGISTER, json=registration(4, "through-a"))).status == 200
    assert (await b.delete(REGISTER, params={"rank": "3"})).status == 200
    watched = [
        await (await replica.get("/watch", params={"after": "0", "wait": "0"})).json() for replica in (a, b)
    ]
    assert watched[0] == watched[1]
    assert [change["version"] for change in watched[0]["changes"]] == [1, 2, 3]
    boots = {(await replica.get("/health")).headers.get(BOOT_HEADER) for replica in (a, b)}
    assert len(boots) == 1
    assert None not in boots


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("etcd://", "names no host"),
        ("etcd://127.0.0.1:99999", "bad port"),
        ("etcd://127.0.0.1:x", "bad port"),
        ("etcd://127.0.0.1:2379/path", "has a path"),
        ("etcd://127.0.0.1:2379?prefix=", "bad prefix"),
        ("etcd://127.0.0.1:2379?timeout=3", "unknown option"),
    ],
)
def test_a_malformed_etcd_url_is_one_line(url: str, words: str) -> None:
    """Checked at start: one line, saying what is wrong."""
    with pytest.raises(ValueError, match=words) as raised:
        check_store_url(url)
    assert "\n" not in str(raised.value)


def test_the_password_of_an_etcd_url_is_never_shown() -> None:
    """describe() (every log line and error) hides the password, in a malformed URL too."""
    assert describe("etcd://root:s3cret@a:2379,b:2379?prefix=x") == "etcd://root:***@a:2379,b:2379?prefix=x"
    with pytest.raises(ValueError, match="bad port") as raised:
        check_store_url("etcd://root:s3cret@a:99999")
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("url", ["etcd://", "etcd://127.0.0.1:0"])
def test_the_server_refuses_a_malformed_etcd_url_with_one_line_and_status_2(url: str) -> None:
    """As a malformed Redis URL: one line on standard error, exit status 2, no traceback."""
    process = launch("--port", "0", "--store", url)
    _, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_an_unreachable_etcd_at_start_is_one_line_and_status_1() -> None:
    """As an unreachable Redis (docs/cli.md): retried for 3 s, then one line naming it, and status 1."""
    if skip_reason() is not None:
        pytest.skip(skip_reason() or "")
    url = f"etcd://127.0.0.1:{quiet_port()}"
    process = launch("--port", "0", "--store", url)
    _, err = process.communicate(timeout=GUARD + 5)
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert url in lines[0]
    assert "unreachable" in lines[0]
    assert "gave up after 3 s" in lines[0]


async def test_open_gives_up_on_an_unreachable_etcd_and_calls_after_are_503() -> None:
    """Nothing listening: open raises StoreUnavailable in one line naming the URL once."""
    if skip_reason() is not None:
        pytest.skip(skip_reason() or "")
    from aiobootstrap.store.etcd import EtcdStore

    url = f"etcd://127.0.0.1:{quiet_port()}"
    store = EtcdStore(url, timeout=0.3, open_timeout=0.5)
    with pytest.raises(StoreUnavailable) as raised:
        await store.open(Recorder())
    assert raised.value.detail.count(url) == 1
    assert "\n" not in raised.value.detail
    with pytest.raises(StoreUnavailable):
        await store.get(key(0))


async def test_a_wiped_member_changes_the_boot_id_and_a_stopped_one_is_503(
    aiohttp_client: Any, etcd_member: Cluster
) -> None:
    """etcd down: /ready and a get 503, /health 200; wiped and started anew: one new boot id on both replicas."""
    a, b = await _servers(aiohttp_client, etcd_member)
    assert (await a.put(REGISTER, json=registration(0))).status == 200
    before = (await a.get("/health")).headers[BOOT_HEADER]
    member = etcd_member.members[0]
    member.wipe()
    ready = await a.get("/ready")
    assert ready.status == 503
    assert "Retry-After" in ready.headers
    assert (await a.get("/health")).status == 200
    assert (await b.get("/get_transfer_engine_info", params={"rank": "0"})).status == 503
    etcd_member.start()

    async def boots() -> set[str | None]:
        return {(await replica.get("/health")).headers.get(BOOT_HEADER) for replica in (a, b)}

    async with asyncio.timeout(GUARD):
        while (found := await boots()) == {before} or len(found) != 1:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert before not in found
    async with asyncio.timeout(GUARD):
        while (await b.get("/get_transfer_engine_info", params={"rank": "0"})).status != 404:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
