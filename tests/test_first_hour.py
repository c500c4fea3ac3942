"""The client as a newcomer first meets it (issue 19): retries it logs, a placeholder it names."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from aiohttp import web

from aiobootstrap import Backoff, BootstrapClient, ServerConfig, create_app

from .helpers.waits import GUARD, until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_retries_are_logged_at_debug_and_the_answer_once_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server not up yet: a DEBUG line per retry on aiobootstrap.client, one INFO when it answers."""
    caplog.set_level(logging.DEBUG, logger="aiobootstrap.client")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with BootstrapClient(url, backoff=Backoff(0.01, 0.02)) as client:
        waiting = asyncio.create_task(client.get(3, timeout=GUARD))

        def retries() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.levelno == logging.DEBUG and "trying again" in r.message]

        await until(lambda: len(retries()) >= 2)
        runner = web.AppRunner(create_app(ServerConfig()))
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", port).start()
            await client.register(3, session_id="s:1", weights_info_dict={})
            info = await asyncio.wait_for(waiting, GUARD)
        finally:
            await runner.cleanup()
    assert info.session_id == "s:1"
    assert f"{url} could not be reached" in retries()[0].message
    answered = [r for r in caplog.records if r.levelno == logging.INFO and r.name == "aiobootstrap.client"]
    assert len(answered) == 1, [r.message for r in answered]
    assert answered[0].message.startswith(f"the server at {url} answers, after ")


async def test_a_placeholder_in_place_of_a_dict_is_a_type_error_naming_the_argument() -> None:
    """docs' ``{...}`` (a set) copied as is: a TypeError from the call that names the argument, before any request."""
    async with BootstrapClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(TypeError, match=r"weights_info_dict must be a mapping \(a dict\), not set"):
            await client.register(3, session_id="s", weights_info_dict={...}, timeout=0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"config must be a mapping \(a dict\), not set"):
            await client.register_parallelism_config(3, {...}, timeout=0)  # type: ignore[arg-type]
