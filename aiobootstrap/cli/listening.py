"""What ``status`` says of the listeners of one namespace each (``--listen``), and ``status --namespaces``.

``status`` asks ``/namespaces`` for the listeners itself (``read_listening``): the client's
``list_namespaces`` gives the namespaces alone. A tool pointed at a listener's port addresses that
listener's namespace (its unprefixed routes are that namespace's), so ``status`` names that namespace, not
the ``default`` the tool's ``--namespace`` says; the listeners of the namespace shown follow its first line,
as the server's start-up words them (``also listening on URL``).
"""

from __future__ import annotations

import argparse
import ssl
from typing import TYPE_CHECKING, TextIO

from .._names import DEFAULT_NAMESPACE
from ..exceptions import UnexpectedReply
from ..wire.listeners import ListenerListing, decode_listening
from ..wire.routes import NAMESPACES_PATH
from .face_tools import plural

if TYPE_CHECKING:
    from ..client.client import BootstrapClient

__all__ = ["addressed", "listener_lines", "namespaces_tool", "read_listening", "shown_namespace"]

_READ_TIME = 10.0
"""The longest the read of the listeners may take; past it ``status`` says nothing of them."""


async def read_listening(url: str, token: str | None, tls: ssl.SSLContext | bool) -> ListenerListing:
    """The server's listeners as ``/namespaces`` names them; none when it names none, or cannot be read
    (an older server, a token that may not list namespaces, no answer in time)."""
    import aiohttp  # here: serving imports the tools, and never pays for the client's libraries

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_READ_TIME)) as session,
            session.get(url.rstrip("/") + NAMESPACES_PATH, headers=headers, ssl=tls) as reply,
        ):
            if reply.status != 200:
                return ListenerListing()
            payload = await reply.read()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return ListenerListing()
    try:
        return decode_listening(payload)
    except UnexpectedReply:
        return ListenerListing()


def shown_namespace(client: BootstrapClient, listening: ListenerListing) -> str:
    """The namespace ``client`` addresses: on a listener's port, unprefixed, the listener's."""
    if listening.here is not None and client.namespace == DEFAULT_NAMESPACE:
        return listening.here
    return client.namespace


async def addressed(client: BootstrapClient, args: argparse.Namespace) -> str:
    """The namespace a tool's ``client`` addresses, as its report names it: on a listener's port with no
    ``--namespace``, the listener's (one read of ``/namespaces``)."""
    if client.namespace != DEFAULT_NAMESPACE:
        return client.namespace
    return shown_namespace(client, await read_listening(args.url, args.bearer, args.tls))


def listener_lines(namespace: str, listening: ListenerListing) -> list[str]:
    """``also listening on URL`` for each listener of ``namespace``."""
    return [f"also listening on {url}" for name, url in listening.listeners if name == namespace]


async def namespaces_tool(client: BootstrapClient, out: TextIO, listening: ListenerListing) -> int:
    """``status --namespaces``: one line per namespace the server shows this token, then its listeners."""
    namespaces = await client.list_namespaces()
    print(plural(len(namespaces), "namespace"), file=out)
    for each in namespaces:
        print(
            f"  {each.name}: version {each.version}, {plural(each.ranks, 'rank')} registered, "
            f"{each.waiters} waiting, {plural(each.encoder_urls, 'encoder URL')}",
            file=out,
        )
    if listening.listeners:
        count = len(listening.listeners)
        print(f"{count} listener{'' if count == 1 else 's'} (--listen)", file=out)
        for name, url in listening.listeners:
            print(f"  namespace {name} also listening on {url}", file=out)
    return 0
