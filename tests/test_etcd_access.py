"""The etcd store's ways in: a user and password (etcd's authentication), TLS with a private CA.

Each test starts an etcd member of its own with the option it needs (``etcd_member``,
``etcd_unstarted``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import trustme

from aiobootstrap.exceptions import StoreUnavailable
from aiobootstrap.store.etcd import EtcdStore
from testbed.etcd_server import Cluster, unique_prefix

from .helpers.redis_store import Recorder
from .helpers.stores import info, key
from .helpers.waits import GUARD


def _enable_auth(cluster: Cluster, password: str) -> None:
    member = cluster.members[0]
    cluster.etcdctl(member, "user", "add", f"root:{password}")
    cluster.etcdctl(member, "auth", "enable")
    cluster.ctl_args = ["--user", f"root:{password}"]


async def test_a_user_and_password_open_the_store_and_a_wrong_password_is_one_line(
    etcd_member: Cluster,
) -> None:
    """With etcd's authentication on: the URL's user and password are sent (puts, reads, leases and the
    feed work); a wrong password is StoreUnavailable in one line that does not show it."""
    _enable_auth(etcd_member, "s3cret")
    prefix = unique_prefix()
    store = EtcdStore(etcd_member.url(prefix, credentials="root:s3cret"))
    heard = Recorder()
    await store.open(heard)
    try:
        record = await store.put(key(0), info("with a password"))
        assert await store.get(key(0)) == record
        await heard.until(lambda: heard.heard(key(0), 1))
        lease = await store.grant_lease("default", 5)
        assert (await store.keepalive_lease("default", lease.id)).remaining == 5
    finally:
        await store.close()
    wrong = EtcdStore(etcd_member.url(prefix, credentials="root:nope"), open_timeout=1.0)
    with pytest.raises(StoreUnavailable) as raised:
        await wrong.open(Recorder())
    assert "authentication failed" in raised.value.detail
    assert "nope" not in raised.value.detail
    assert "\n" not in raised.value.detail


async def test_a_member_restarted_under_authentication_is_served_again_with_a_new_token(
    etcd_member: Cluster,
) -> None:
    """etcd's tokens live in a member's memory: after its restart every call is refused for its token
    once, and the store takes a new one and goes on (reads, writes and the feed), never stuck on the old."""
    _enable_auth(etcd_member, "s3cret")
    store = EtcdStore(etcd_member.url(unique_prefix(), credentials="root:s3cret"))
    heard = Recorder()
    await store.open(heard)
    try:
        await store.put(key(0), info())
        member = etcd_member.members[0]
        member.kill()
        member.start()
        await asyncio.to_thread(etcd_member.wait_healthy)
        async with asyncio.timeout(GUARD):
            while True:
                try:
                    record = await store.put(key(1), info("after the restart"))
                    break
                except StoreUnavailable:
                    await asyncio.sleep(0.05)  # a client's retry after a 503
        await heard.until(lambda: heard.heard(key(1), record.version))
        assert await store.get(key(0)) is not None
    finally:
        await store.close()


def _tls(tmp_path: Path) -> tuple[str, str, str]:
    """A private CA's file, and a certificate and key it signed for 127.0.0.1."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.cert_chain_pems[0].write_to_path(str(paths[1]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    return str(paths[0]), str(paths[1]), str(paths[2])


async def test_etcds_speaks_tls_to_a_member_signed_by_the_ca_it_names(
    etcd_unstarted: Cluster, tmp_path: Path
) -> None:
    """etcds://...?cacert=PATH: TLS, trusting that CA; without it (the system's CAs) the member's
    certificate is refused, in one line; an unreadable CA file is one line too."""
    ca, cert, key_file = _tls(tmp_path)
    etcd_unstarted.members[0].tls = (cert, key_file)
    etcd_unstarted.ctl_args = ["--cacert", ca]
    etcd_unstarted.start()
    prefix = unique_prefix()
    url = etcd_unstarted.url(prefix, scheme="etcds")
    store = EtcdStore(f"{url}&cacert={ca}")
    heard = Recorder()
    await store.open(heard)
    try:
        record = await store.put(key(0), info("over tls"))
        assert await store.get(key(0)) == record
        await heard.until(lambda: heard.heard(key(0), 1))
    finally:
        await store.close()
    for untrusting in (EtcdStore(url, open_timeout=0.3), EtcdStore(f"{url}&cacert={tmp_path}/none.pem")):
        with pytest.raises(StoreUnavailable) as raised:
            await untrusting.open(Recorder())
        assert "\n" not in raised.value.detail
