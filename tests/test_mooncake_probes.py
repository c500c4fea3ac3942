"""The Mooncake prober's rule, without an engine: an RPC address that does not answer loses its engine's
keys after 3 rounds in a row, not before, and not when the engine wrote its entry again meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.mooncake.probes import MooncakeProbes, ram_key
from aiobootstrap.store import Key
from testbed.redis_server import free_port

DEAD = b'{"ip_or_host_name":"127.0.0.1","rpc_port":%d}'


def _key(name: str) -> Key:
    return Key.named("default", "metadata", "target", name)


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_three_failed_rounds_forget_the_engine_a_rewrite_starts_again(client: Any) -> None:
    registry = client.app[REGISTRY]
    rpc = "/metadata?key=mc-1/mooncake/rpc_meta/10.0.0.7:1"
    ram = "/metadata?key=mc-1/mooncake/ram/10.0.0.7:1"
    assert (await client.put(rpc, data=DEAD % free_port())).status == 200
    assert (await client.put(ram, data=b"{}")).status == 200
    probes = MooncakeProbes(registry, timeout=0.5)
    await probes.round()
    await probes.round()
    assert (await client.put(rpc, data=DEAD % free_port())).status == 400  # another value: still refused
    await client.delete(rpc)
    assert (await client.put(rpc, data=DEAD % 1)).status == 200  # the engine wrote it again: counting anew
    await probes.round()
    await probes.round()
    assert (await client.get(rpc)).status == 200
    await probes.round()
    assert (await client.get(rpc)).status == 404
    assert (await client.get(ram)).status == 404


def test_the_segment_key_of_an_rpc_key_keeps_its_cluster_prefix() -> None:
    assert ram_key(_key("cluster-a/mooncake/rpc_meta/10.0.0.7:1")).name == "cluster-a/mooncake/ram/10.0.0.7:1"
    assert ram_key(_key("mooncake/rpc_meta/h:2")).name == "mooncake/ram/h:2"
