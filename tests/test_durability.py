"""--state-file end to end: registrations survive a restart of the app and a SIGKILL of the CLI."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from aiobootstrap import BootstrapClient, ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.cli import Served, launch, serve
from .helpers.registry import info_key, registration
from .helpers.waits import GUARD


async def start_app(aiohttp_client: Any, path: Path) -> Any:
    return await aiohttp_client(
        create_app(ServerConfig(state_file=str(path))), server_kwargs={"handler_cancellation": True}
    )


async def test_restarted_app_serves_the_same_info_and_versions(aiohttp_client: Any, tmp_path: Path) -> None:
    """A new app on the same state file answers gets with the same bodies; new registrations go higher."""
    path = tmp_path / "state"
    first = await start_app(aiohttp_client, path)
    for rank in range(3):
        reply = await first.put("/register_transfer_engine_info", json=registration(rank, f"s{rank}"))
        assert reply.status == 200
    await first.put("/register_transfer_engine_info", json=registration(1, "s1 again"))
    before = {
        rank: await (await first.get(f"/get_transfer_engine_info?rank={rank}")).read() for rank in range(3)
    }
    await first.close()

    second = await start_app(aiohttp_client, path)
    for rank in range(3):
        reply = await second.get(f"/get_transfer_engine_info?rank={rank}")
        assert reply.status == 200
        assert await reply.read() == before[rank]
    assert (await (await second.get("/get_transfer_engine_info?rank=1")).json())[
        "remote_instance_transfer_engine_info"
    ][0] == "s1 again"
    assert (await second.put("/register_transfer_engine_info", json=registration(9, "new"))).status == 200
    fresh = await (await second.get("/get_transfer_engine_info?rank=9")).json()
    assert fresh["version"] == 5
    listing = await (await second.get("/ranks")).json()
    assert listing["count"] == 4


async def test_namespaced_registrations_survive_a_restart(aiohttp_client: Any, tmp_path: Path) -> None:
    """A rank registered under /ns/NAME comes back under that name only, with its version."""
    path = tmp_path / "state"
    first = await start_app(aiohttp_client, path)
    reply = await first.put("/ns/blue/register_transfer_engine_info", json=registration(0, "blue"))
    assert reply.status == 200
    before = await (await first.get("/ns/blue/get_transfer_engine_info?rank=0")).read()
    await first.close()

    second = await start_app(aiohttp_client, path)
    reply = await second.get("/ns/blue/get_transfer_engine_info?rank=0")
    assert reply.status == 200
    assert await reply.read() == before
    assert (await second.get("/get_transfer_engine_info?rank=0")).status == 404
    assert (await second.get("/ns/green/get_transfer_engine_info?rank=0")).status == 404


async def test_unregistered_rank_stays_gone_after_restart(aiohttp_client: Any, tmp_path: Path) -> None:
    """A rank the registry forgot is not brought back by a restart."""
    path = tmp_path / "state"
    first = await start_app(aiohttp_client, path)
    await first.put("/register_transfer_engine_info", json=registration(0, "gone"))
    await first.put("/register_transfer_engine_info", json=registration(1, "kept"))
    await first.app[REGISTRY].unregister(info_key(0))
    await first.close()

    second = await start_app(aiohttp_client, path)
    assert (await second.get("/get_transfer_engine_info?rank=0")).status == 404
    assert (await second.get("/get_transfer_engine_info?rank=1")).status == 200


async def test_without_state_file_nothing_is_written(
    aiohttp_client: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The default server stays in memory: no file appears, a restart starts empty."""
    monkeypatch.chdir(tmp_path)
    first = await aiohttp_client(create_app(ServerConfig()))
    await first.put("/register_transfer_engine_info", json=registration(0, "s"))
    await first.close()
    second = await aiohttp_client(create_app(ServerConfig()))
    assert (await second.get("/get_transfer_engine_info?rank=0")).status == 404
    assert os.listdir(tmp_path) == []


def test_empty_state_file_path_is_refused() -> None:
    """An empty --state-file is a configuration error, not a file named ''."""
    with pytest.raises(ValueError, match="state file"):
        ServerConfig(state_file=" ")


# -- the CLI ------------------------------------------------------------


def stop(served: Served, signum: int = signal.SIGTERM) -> int:
    """Send ``signum`` and wait for the server to exit; its exit status."""
    served.process.send_signal(signum)
    served.process.communicate(timeout=GUARD)
    return served.process.returncode


def run_to_end(*args: str) -> tuple[int, str]:
    """Run the CLI until it exits; its status and standard error."""
    process = launch("--port", "0", *args)
    _, stderr = process.communicate(timeout=GUARD)
    return process.returncode, stderr


async def test_registration_survives_sigkill_of_the_cli(tmp_path: Path) -> None:
    """Register over HTTP, SIGKILL the server, start it again: the registration and its version are there."""
    path = str(tmp_path / "state")
    served = serve("--log-level", "warning", "--state-file", path)
    try:
        async with BootstrapClient(served.url) as client:
            await client.register(3, session_id="10.0.0.7:18000", weights_info_dict={"layer": [1, 2]})
            before = await client.get(3, timeout=0)
    finally:
        status = stop(served, signal.SIGKILL)
    assert status == -signal.SIGKILL

    served = serve("--log-level", "warning", "--state-file", path)
    try:
        async with BootstrapClient(served.url) as client:
            assert await client.get(3, timeout=0) == before
            await client.register(4, session_id="after", weights_info_dict={})
            assert (await client.get(4, timeout=0)).version > before.version
    finally:
        status = stop(served)
    assert status == 0


def test_unusable_state_file_fails_the_cli_with_one_line(tmp_path: Path) -> None:
    """A state file in a missing directory: one line on stderr naming it, exit 1, no traceback."""
    status, stderr = run_to_end("--state-file", str(tmp_path / "absent" / "state"))
    assert status == 1
    assert stderr.strip().count("\n") == 0
    assert "absent" in stderr
    assert "does not exist" in stderr


async def test_second_server_on_the_same_state_file_fails_clearly(tmp_path: Path) -> None:
    """A second server pointed at a journal in use refuses to start instead of corrupting it."""
    path = str(tmp_path / "state")
    served = serve("--log-level", "warning", "--state-file", path)
    try:
        status, stderr = run_to_end("--state-file", path)
        assert status == 1
        assert "another aiobootstrap server holds it" in stderr
        assert "Traceback" not in stderr
        async with aiohttp.ClientSession() as session, session.get(f"{served.url}/health") as reply:
            assert reply.status == 200
    finally:
        stop(served)
