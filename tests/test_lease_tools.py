"""Leases in the tools and the figures: ``register --lease-ttl``, ``--max-leases``, ``/metrics``, the listing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import ServerConfig, ThreadedBootstrapServer, create_app
from aiobootstrap.cli.parser import server_config, server_parser

from .helpers.registry import registration
from .helpers.waits import GUARD


def test_register_with_a_lease_ttl_keeps_the_rank_until_interrupted(tmp_path: Path) -> None:
    """The tool holds the lease until SIGINT, then revokes it: the rank is unregistered, exit status 0."""
    weights = tmp_path / "weights.json"
    weights.write_text("{}")
    with ThreadedBootstrapServer(port=0) as server:
        tool = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aiobootstrap",
                "register",
                "--url",
                server.url,
                "--rank",
                "0",
                "--session-id",
                "s0",
                "--weights-file",
                str(weights),
                "--lease-ttl",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert tool.stdout is not None
        try:
            line = tool.stdout.readline()
            assert "registered rank 0" in line
            assert "on lease" in line
            assert server.get_transfer_engine_info(0) is not None
            tool.send_signal(signal.SIGINT)
            assert tool.wait(GUARD) == 0
            assert "revoked the lease" in tool.stdout.read()
            assert server.get_transfer_engine_info(0) is None
        finally:
            tool.kill()
            tool.wait(GUARD)
            tool.stdout.close()
            assert tool.stderr is not None
            tool.stderr.close()


def test_max_leases_is_an_option() -> None:
    config = server_config(server_parser().parse_args(["--max-leases", "7"]), {})
    assert config.max_leases == 7
    assert server_config(server_parser().parse_args([]), {}).max_leases == 65_536


@pytest.fixture
async def client(aiohttp_client: Any) -> Any:
    return await aiohttp_client(create_app(ServerConfig()))


async def test_metrics_count_leases_held_expired_and_revoked(client: Any) -> None:
    for _ in range(3):
        await client.post("/leases", json={"ttl": 60})
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    await client.delete(f"/leases/{lease}")
    text = await (await client.get("/metrics")).text()
    assert "aiobootstrap_leases 3.0" in text
    assert "aiobootstrap_lease_revocations_total 1.0" in text
    assert "aiobootstrap_lease_expirations_total 0.0" in text


async def test_the_listing_shows_each_records_lease_and_time_left(client: Any) -> None:
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    await client.put("/register_transfer_engine_info", json={**registration(0), "lease": lease})
    await client.put("/register_transfer_engine_info", json=registration(1))
    ranks = json.loads(await (await client.get("/ranks")).text())["ranks"]
    assert ranks[0]["lease"] == lease
    assert 59 < ranks[0]["lease_remaining"] <= 60
    assert ranks[0]["lease_ttl"] == 60
    assert "lease" not in ranks[1]
