"""SyncBootstrapClient offers what BootstrapClient gained with the security work: unregister and reregister."""

from __future__ import annotations

from aiobootstrap import SyncBootstrapClient, ThreadedBootstrapServer

from .conftest import GUARD


def test_unregister_says_whether_there_was_info() -> None:
    """unregister removes a rank (True), then finds nothing to remove (False), as the async client does."""
    with ThreadedBootstrapServer(port=0) as server, SyncBootstrapClient(server.url) as client:
        client.register(3, session_id="s3", weights_info_dict={})
        assert client.unregister(3) is True
        assert server.get_transfer_engine_info(3) is None
        assert client.unregister(3) is False


def test_reregister_refills_a_restarted_server() -> None:
    """With reregister=True, a server restarted empty on the same port gets the client's ranks back."""
    first = ThreadedBootstrapServer(port=0)
    port = first.port
    with SyncBootstrapClient(first.url, reregister=True) as client:
        client.register(3, session_id="s3", weights_info_dict={"w": 1})
        assert client.health() is True
        first.close()
        with ThreadedBootstrapServer(port=port) as second:
            assert client.get(3, timeout=GUARD).session_id == "s3"
            assert second.get_transfer_engine_info(3) == ("s3", {"w": 1})
