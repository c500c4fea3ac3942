"""``PrefillBootstrapServer(host, port)``, constructed as SGLang's prefill side constructs its
``CommonKVBootstrapServer``, and driven by the engines' own calls (``register_to_bootstrap``, decode's read
of the parallel info, its dp-rank query), written from their protocol in ``helpers/prefill.py``."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

import aiobootstrap
from aiobootstrap import AddressInUse, PrefillBootstrapServer, ThreadedBootstrapServer
from aiobootstrap.server.faces.prefill.settings import PrefillSettings

from .helpers.prefill import ensure_parallel_info, query_prefill_dp_ranks, rank_body, register_to_bootstrap
from .threads import wait_until


def _threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("aiobootstrap server")]


def test_it_is_public_and_a_threaded_server() -> None:
    assert "PrefillBootstrapServer" in aiobootstrap.__all__
    assert issubclass(PrefillBootstrapServer, ThreadedBootstrapServer)


def test_the_engines_calls_work_through_it_and_close_frees_the_port() -> None:
    """Prefill ranks register; decode polls, gets None until the last, then the parallel info; rooms are
    answered; close() stops the thread and the port can be bound again."""
    server = PrefillBootstrapServer("127.0.0.1", 0)
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        assert ensure_parallel_info(bootstrap) is None  # a 503: decode asks again next cycle
        for tp, dp in ((0, 0), (1, 0), (0, 1)):
            assert register_to_bootstrap(bootstrap, rank_body(tp, dp))
        assert ensure_parallel_info(bootstrap) is None
        assert register_to_bootstrap(bootstrap, rank_body(1, 1))
        info = ensure_parallel_info(bootstrap)
        assert info is not None
        assert (info["attn_tp_size"], info["dp_size"], info["follow_bootstrap_room"]) == (2, 2, False)
        assert query_prefill_dp_ranks(bootstrap, [5, 6]) == {}
    finally:
        server.close()
    assert _threads() == []
    PrefillBootstrapServer("127.0.0.1", server.port).close()  # the port is free for the next server


def test_one_waiting_decode_request_instead_of_polling() -> None:
    """decode adding wait= learns the topology with one request, answered when the last rank registers."""
    server = PrefillBootstrapServer("127.0.0.1", 0)
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        register_to_bootstrap(bootstrap, rank_body(0, 0, tp_size=1, dp_size=1, pp=(0, 2)))

        async def decode_then_last_rank() -> dict[str, object] | None:
            decode = asyncio.create_task(asyncio.to_thread(ensure_parallel_info, bootstrap, 60))
            await asyncio.to_thread(wait_until, lambda: server.parked >= 1)
            assert not decode.done()
            last = rank_body(0, 0, tp_size=1, dp_size=1, pp=(1, 2))
            await asyncio.to_thread(register_to_bootstrap, bootstrap, last)
            return await decode

        info = asyncio.run(decode_then_last_rank())
        assert info is not None
        assert info["pp_size"] == 2
    finally:
        server.close()


def test_a_taken_port_is_one_clear_error_naming_it() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(AddressInUse) as caught:
            PrefillBootstrapServer("127.0.0.1", port)
    assert f"127.0.0.1:{port}" in caught.value.detail
    assert _threads() == []


def test_the_engines_variable_sets_the_rooms_life(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_DISAGGREGATION_BOOTSTRAP_ENTRY_CLEANUP_INTERVAL", "7")
    server = PrefillBootstrapServer("127.0.0.1", 0)
    try:
        assert server._server.config.settings_of(PrefillSettings).dp_room_ttl == 7
    finally:
        server.close()
