"""The listeners of one namespace each (``--listen``) as ``GET /namespaces`` tells them, both ways.

A server with such listeners adds two fields to that reply: ``listeners``, each listener the caller may
see as ``{"namespace": NAME, "url": URL}`` (on a listener's port, its own alone), and, on a listener's
port, ``listener``: the namespace whose routes that port serves unprefixed. A server without listeners
adds neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .reading import decoding, item_field, json_list, json_object, optional_text, parse_reply, text

__all__ = ["ListenerListing", "decode_listening", "listening_fields"]


@dataclass(frozen=True, slots=True)
class ListenerListing:
    """What ``/namespaces`` says of a server's listeners: each ``(namespace, url)``, and the namespace of
    the port asked (``None``: the main port, or a server without listeners)."""

    listeners: tuple[tuple[str, str], ...] = ()
    here: str | None = None


def listening_fields(listeners: Sequence[tuple[str, str]], here: str | None) -> dict[str, Any]:
    """The fields ``/namespaces`` adds for a server with listeners: ``listeners`` and, on a listener's
    port (``here``), ``listener``."""
    fields: dict[str, Any] = {"listeners": [{"namespace": name, "url": url} for name, url in listeners]}
    if here is not None:
        fields["listener"] = here
    return fields


def decode_listening(payload: bytes) -> ListenerListing:
    """The listeners a ``/namespaces`` reply names (none from a server that names none);
    :class:`~aiobootstrap.exceptions.UnexpectedReply` for a reply that is not one."""
    with decoding("a namespace listing"):
        reply = json_object(parse_reply(payload, "a namespace listing"), "the reply")
        listeners = tuple(
            (text(item_field(item, "namespace"), "namespace"), text(item_field(item, "url"), "url"))
            for item in json_list(reply.get("listeners", []), "listeners")
        )
        return ListenerListing(listeners, optional_text(reply.get("listener"), "listener"))
