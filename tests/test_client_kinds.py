"""BootstrapClient over the engine-info family: roles, tagged info read whole, parallelism
configs and the encoder URL list, against the real app over the memory store and Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import (
    BadRequest,
    BootstrapClient,
    BootstrapServer,
    EncoderUrls,
    ParallelismConfig,
    RankNotRegistered,
    Registry,
    ServerConfig,
    TransferEngineInfo,
)
from aiobootstrap.server.faces.encoders.keys import encoder_list_key
from aiobootstrap.store import Key

from .helpers.clients import ServerFactory, start, url_of
from .helpers.waits import GUARD, until

HttpClient = TestClient[web.Request, web.Application]

NIXL = {
    "backend": "nixl",
    "agent_name": "prefill-0",
    "agent_metadata": "bml4bC1tZXRhZGF0YQ==",
    "extra": {"nested": [1, 2]},
}


@pytest.fixture
async def bootstrap(client: HttpClient) -> AsyncIterator[BootstrapClient]:
    """A BootstrapClient on the `client` fixture's server (memory, then Redis)."""
    async with BootstrapClient(str(client.make_url("")).rstrip("/")) as bootstrap:
        yield bootstrap


def config_key(rank: int, role: str = "target") -> Key:
    return Key("default", "parallelism_config", role, rank)


async def still_parked(registry: Registry, bootstrap: BootstrapClient, task: asyncio.Task[Any]) -> None:
    """After a full round trip through the server, ``task`` is still parked: nothing woke it."""
    assert await bootstrap.health()
    assert registry.parked == 1
    assert not task.done()


# -- roles ----------------------------------------------------------------


async def test_roles_are_kept_apart_both_ways(bootstrap: BootstrapClient) -> None:
    """A draft's rank 0 and the target's rank 0 are two records, through get, get_many and unregister."""
    await bootstrap.register(0, session_id="target-0", weights_info_dict={"t": 1})
    await bootstrap.register(0, session_id="draft-0", weights_info_dict={"d": 1}, role="draft")
    assert (await bootstrap.get(0, timeout=0)).session_id == "target-0"
    draft = await bootstrap.get(0, timeout=0, role="draft")
    assert (draft.session_id, draft.weights_info_dict, draft.role) == ("draft-0", {"d": 1}, "draft")
    assert (await bootstrap.get_many([0], timeout=0, role="draft"))[0].session_id == "draft-0"
    with pytest.raises(RankNotRegistered):
        await bootstrap.get(1, timeout=0, role="draft")
    assert await bootstrap.unregister(0, role="draft")
    assert not await bootstrap.unregister(0, role="draft")
    assert (await bootstrap.get(0, timeout=0)).session_id == "target-0"


@pytest.mark.parametrize(("waited", "other"), [("draft", "target"), ("target", "draft")])
async def test_a_waiter_of_one_role_is_not_woken_by_the_other(
    bootstrap: BootstrapClient, registry: Registry, waited: str, other: str
) -> None:
    """A get parked for one role stays parked through the other role's registration of the rank."""
    task = asyncio.create_task(bootstrap.get(2, timeout=GUARD, role=waited))
    await until(lambda: registry.parked == 1)
    await bootstrap.register(2, session_id=other, weights_info_dict={}, role=other)
    await still_parked(registry, bootstrap, task)
    await bootstrap.register(2, session_id=waited, weights_info_dict={}, role=waited)
    info = await asyncio.wait_for(task, GUARD)
    assert (info.session_id, info.role) == (waited, waited)


# -- transfer-engine info whole ---------------------------------------------


async def test_a_nixl_registration_is_read_whole(bootstrap: BootstrapClient) -> None:
    """NIXL info (agent name and metadata, no session id) comes back with every field, singly and in bulk."""
    await bootstrap.register(0, weights_info_dict={"w": 1}, fields=NIXL)
    info = await bootstrap.get(0, timeout=0)
    assert info.fields == {**NIXL, "weights_info_dict": {"w": 1}}
    assert (info.backend, info.session_id, info.weights_info_dict) == ("nixl", "", {"w": 1})
    assert (await bootstrap.get_many([0], timeout=0))[0] == info


async def test_classic_info_without_a_session_id_is_refused_at_once(bootstrap: BootstrapClient) -> None:
    """Without a backend session_id is required: the server's 400, raised at once."""
    with pytest.raises(BadRequest, match="session_id"):
        await bootstrap.register(0, weights_info_dict={}, timeout=GUARD)
    with pytest.raises(RankNotRegistered):
        await bootstrap.get(0, timeout=0)


async def test_extra_fields_of_classic_info_need_whole(
    client: HttpClient, bootstrap: BootstrapClient
) -> None:
    """Untagged info's list form shows two fields; whole=True (form=object) every field sent."""
    await bootstrap.register(1, session_id="s", weights_info_dict={}, fields={"x": 7})
    classic = await bootstrap.get(1, timeout=0)
    assert classic == TransferEngineInfo(1, "s", {}, classic.version)
    assert classic.backend is None
    whole = await bootstrap.get(1, timeout=0, whole=True)
    assert whole.fields == {"x": 7, "session_id": "s", "weights_info_dict": {}}
    assert (await bootstrap.get_many([1], timeout=0, whole=True))[1].fields == whole.fields
    # Tagged mooncake info is served whole without asking: every field, and its backend.
    await bootstrap.register(2, session_id="s", weights_info_dict={}, fields={"backend": "mooncake"})
    tagged = await bootstrap.get(2, timeout=0)
    assert (tagged.backend, tagged.session_id) == ("mooncake", "s")
    assert tagged.fields == {"backend": "mooncake", "session_id": "s", "weights_info_dict": {}}
    # What the server holds is what was sent, read over the wire without the client.
    reply = await client.get("/get_transfer_engine_info?rank=1&form=object")
    assert (await reply.json())["remote_instance_transfer_engine_info"] == whole.fields


# -- parallelism configs ----------------------------------------------------


async def test_parallelism_config_round_trip(bootstrap: BootstrapClient, registry: Registry) -> None:
    """A config registered comes back exactly, with its version, singly and in a batch."""
    config = {"tp_size": 8, "pp_size": 2, "layers": [0, 1], "nested": {"a": None}}
    await bootstrap.register_parallelism_config(3, config)
    await bootstrap.register_parallelism_config(4, {"tp_size": 4})
    got = await bootstrap.get_parallelism_config(3, timeout=0)
    stored = await registry.get(config_key(3))
    assert stored is not None
    assert got == ParallelismConfig(3, config, stored.version)
    both = await bootstrap.get_parallelism_configs([4, 3], timeout=0)
    assert both == {3: got, 4: ParallelismConfig(4, {"tp_size": 4}, stored.version + 1)}
    assert await bootstrap.get_parallelism_configs([], timeout=0) == {}


async def test_a_waiting_parallelism_config_get_is_woken_by_its_registration(
    bootstrap: BootstrapClient, registry: Registry
) -> None:
    """get_parallelism_config parks like get, and answers the registration that wakes it."""
    task = asyncio.create_task(bootstrap.get_parallelism_config(5, timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await bootstrap.register_parallelism_config(5, {"tp_size": 2}, role="draft")
    await bootstrap.register(5, session_id="not a config", weights_info_dict={})
    await still_parked(registry, bootstrap, task)
    await bootstrap.register_parallelism_config(5, {"tp_size": 8})
    assert (await asyncio.wait_for(task, GUARD)).config == {"tp_size": 8}


async def test_a_missing_parallelism_config_names_its_kind(bootstrap: BootstrapClient) -> None:
    """The timeout of a config get says "No parallelism config", singly and for a batch."""
    await bootstrap.register_parallelism_config(1, {})
    await bootstrap.register(0, session_id="s", weights_info_dict={})
    with pytest.raises(RankNotRegistered, match=r"^No parallelism config for rank 0$") as caught:
        await bootstrap.get_parallelism_config(0, timeout=0)
    assert (caught.value.rank, caught.value.noun) == (0, "parallelism config")
    with pytest.raises(RankNotRegistered, match=r"^No parallelism config for ranks 0,2$") as many:
        await bootstrap.get_parallelism_configs([0, 1, 2], timeout=0)
    assert list(many.value.ranks) == [0, 2]


async def test_parallelism_config_roles_and_removal(bootstrap: BootstrapClient) -> None:
    """A draft's config is its own record; unregister says whether there was one."""
    await bootstrap.register_parallelism_config(0, {"tp_size": 8})
    await bootstrap.register_parallelism_config(0, {"tp_size": 1}, role="draft")
    draft = await bootstrap.get_parallelism_config(0, timeout=0, role="draft")
    assert (draft.config, draft.role) == ({"tp_size": 1}, "draft")
    assert (await bootstrap.get_parallelism_configs([0], timeout=0, role="draft"))[0] == draft
    assert await bootstrap.unregister_parallelism_config(0, role="draft")
    assert not await bootstrap.unregister_parallelism_config(0, role="draft")
    assert (await bootstrap.get_parallelism_config(0, timeout=0)).config == {"tp_size": 8}


async def test_after_waits_for_a_newer_config(bootstrap: BootstrapClient, registry: Registry) -> None:
    """after=V skips the config at version V and waits for the next registration."""
    await bootstrap.register_parallelism_config(0, {"gen": 1})
    first = await bootstrap.get_parallelism_config(0, timeout=0)
    task = asyncio.create_task(bootstrap.get_parallelism_config(0, timeout=GUARD, after=first.version))
    await until(lambda: registry.parked == 1)
    await bootstrap.register_parallelism_config(0, {"gen": 2})
    assert (await asyncio.wait_for(task, GUARD)).config == {"gen": 2}


# -- the listing ------------------------------------------------------------


async def test_the_listing_of_each_kind_and_role(bootstrap: BootstrapClient) -> None:
    """list_ranks shows one kind and role, with records that have no session id."""
    await bootstrap.register_parallelism_config(2, {"tp_size": 8}, role="draft")
    await bootstrap.register(1, weights_info_dict={}, fields=NIXL)
    configs = await bootstrap.list_ranks(kind="parallelism_config", role="draft")
    assert (configs.kind, configs.role, [r.rank for r in configs.ranks]) == (
        "parallelism_config",
        "draft",
        [2],
    )
    assert configs.ranks[0].session_id is None
    infos = await bootstrap.list_ranks()
    assert (infos.kind, infos.role) == ("transfer_engine_info", "target")
    assert [(r.rank, r.backend) for r in infos.ranks] == [(1, "nixl")]
    assert (await bootstrap.list_ranks(kind="parallelism_config")).ranks == []


# -- encoder URLs -------------------------------------------------------------


async def test_encoder_urls_register_list_and_unregister(bootstrap: BootstrapClient) -> None:
    """Registered once however often, listed in order, removed (also when absent) without error."""
    assert await bootstrap.list_encoder_urls() == []
    for url in ("http://e1:8000", "http://e0:8000", "http://e1:8000"):
        await bootstrap.register_encoder_url(url)
    assert await bootstrap.list_encoder_urls() == ["http://e1:8000", "http://e0:8000"]
    await bootstrap.unregister_encoder_url("http://e1:8000")
    await bootstrap.unregister_encoder_url("http://never")
    assert await bootstrap.list_encoder_urls() == ["http://e0:8000"]


async def test_waiting_for_the_encoder_list_is_woken_by_a_change(
    bootstrap: BootstrapClient, registry: Registry
) -> None:
    """wait_encoder_urls(after=V) parks until the list changes, and answers the new list and version."""
    await bootstrap.register_encoder_url("http://a")
    now = await bootstrap.wait_encoder_urls(timeout=0)
    assert now.urls == ["http://a"]
    task = asyncio.create_task(bootstrap.wait_encoder_urls(now.version, timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await bootstrap.register_encoder_url("http://a")  # no change
    await still_parked(registry, bootstrap, task)
    await bootstrap.unregister_encoder_url("http://a")
    assert await asyncio.wait_for(task, GUARD) == EncoderUrls([], now.version + 1)


async def test_an_encoder_wait_that_runs_out_answers_the_list_unchanged(bootstrap: BootstrapClient) -> None:
    """No change before the timeout: the list as it is, its version not past after, no error."""
    await bootstrap.register_encoder_url("http://a")
    now = await bootstrap.wait_encoder_urls(timeout=0)
    assert await bootstrap.wait_encoder_urls(now.version, timeout=0.05) == now


async def test_watching_the_encoder_list_yields_each_new_list(
    bootstrap: BootstrapClient, registry: Registry
) -> None:
    """watch_encoder_urls yields the list at every change, waiting on the server in between."""
    seen: list[EncoderUrls] = []

    async def watch() -> None:
        async for urls in bootstrap.watch_encoder_urls():
            seen.append(urls)
            if len(seen) == 3:
                return

    task = asyncio.create_task(watch())
    await until(lambda: registry.parked == 1)
    await bootstrap.register_encoder_url("http://a")
    await until(lambda: len(seen) == 1 and registry.parked == 1)
    await bootstrap.register_encoder_url("http://b")
    await until(lambda: len(seen) == 2 and registry.parked == 1)
    await bootstrap.unregister_encoder_url("http://a")
    await asyncio.wait_for(task, GUARD)
    assert [urls.urls for urls in seen] == [["http://a"], ["http://a", "http://b"], ["http://b"]]
    record = await registry.get(encoder_list_key("default"))
    assert record is not None
    assert seen[-1].version == record.version


async def test_an_encoder_wait_past_the_servers_cap_is_asked_again(aiohttp_server: ServerFactory) -> None:
    """A server that answers the unchanged list at its --max-wait is asked again until the change."""
    server, seen = await start(aiohttp_server, ServerConfig(max_wait=0.02))
    async with BootstrapClient(url_of(server)) as bootstrap:
        task = asyncio.create_task(bootstrap.wait_encoder_urls(timeout=GUARD))
        await until(lambda: len(seen.requests) >= 3)
        assert not task.done()
        await bootstrap.register_encoder_url("http://late")
        assert (await asyncio.wait_for(task, GUARD)).urls == ["http://late"]
    lists = [query for _, path, query, _ in seen.requests if path == "/list_encoder_urls"]
    assert all(query["after"] == "0" for query in lists)


async def test_an_encoder_list_below_after_is_a_change(aiohttp_server: ServerFactory) -> None:
    """A version below after (a restarted server counts again) ends the wait with the list as it is."""
    server, _ = await start(aiohttp_server, ServerConfig(max_wait=0.01))
    async with BootstrapClient(url_of(server)) as bootstrap:
        await bootstrap.register_encoder_url("http://a")
        urls = await asyncio.wait_for(bootstrap.wait_encoder_urls(50, timeout=GUARD), GUARD)
        assert urls == EncoderUrls(["http://a"], 1)


# -- restarts ---------------------------------------------------------------


async def test_reregister_refills_configs_and_encoder_urls() -> None:
    """A reregister=True client replays its parallelism configs and encoder URLs on a restarted server,
    and not a URL it removed."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as client:
            await client.register_parallelism_config(0, {"tp_size": 8}, role="draft")
            await client.register_encoder_url("http://kept")
            await client.register_encoder_url("http://removed")
            await client.unregister_encoder_url("http://removed")
            port = server.port
            await server.close()
            server = BootstrapServer(port=port)
            await server.start()
            assert await client.health()
        async with BootstrapClient(server.url) as reader:
            config = await reader.get_parallelism_config(0, timeout=0, role="draft")
            assert config.config == {"tp_size": 8}
            assert await reader.list_encoder_urls() == ["http://kept"]
    finally:
        await server.close()
