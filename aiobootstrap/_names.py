"""Names every floor agrees on, and the one rule for what a name may be.

The defaults of a namespace and a role, the kinds of record, the headers the
server sets, and how a host and port are written. Nothing here imports the
rest of the package: the error tree, the store, the wire and the CLI all stand
on it.
"""

from __future__ import annotations

import re

DEFAULT_NAMESPACE = "default"
"""The namespace the unprefixed routes address."""

DEFAULT_ROLE = "target"
"""The role of a record whose writer named none."""

MAX_ROLE_LENGTH = 128
"""The longest role, in characters: it is part of a store key, and of each change on a Redis feed."""

# -- kinds of record --------------------------------------------------------

TRANSFER_ENGINE_INFO = "transfer_engine_info"
"""The record kind of a rank's transfer-engine info."""

PARALLELISM_CONFIG = "parallelism_config"
"""The record kind of a rank's parallelism config."""

ENCODER_URLS = "encoder_urls"
"""The record kind of a namespace's encoder URL list (one record, rank 0, role ``target``)."""

RANK_KINDS = (TRANSFER_ENGINE_INFO, PARALLELISM_CONFIG)
"""The kinds kept per rank, in the order the tools and the listing name them."""

JOURNAL_DEFAULT_KIND = TRANSFER_ENGINE_INFO
"""The kind of a file store's journal line that names none: every line written before record kinds existed,
and a line of this kind today (left out, so the commonest line stays short)."""

JOURNAL_OLD_FIELDS = ("session_id", "weights_info_dict")
"""A journal line written before record kinds existed carries these two fields of its record (a string and
a JSON object) beside its rank, in place of ``value``."""

KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,62}")
"""What a kind's name may be: it is a store key's part and a metric label."""

# -- the one name rule ------------------------------------------------------

NAME_RULE = "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
"""Namespaces and store prefixes: safe in a URL path, in a metric label and inside a Redis hash tag."""

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
""":data:`NAME_RULE` as a pattern (the OpenAPI document publishes it anchored)."""


def is_name(text: str) -> bool:
    """Whether ``text`` follows :data:`NAME_RULE`."""
    return NAME_PATTERN.fullmatch(text) is not None


def check_name(text: str, what: str) -> str:
    """``text`` if it follows :data:`NAME_RULE`; else a one-line ``ValueError`` naming ``what`` it is."""
    if not is_name(text):
        raise ValueError(f"Invalid {what} {text[:80]!r}: use {NAME_RULE}.")
    return text


# -- headers ----------------------------------------------------------------

HEALTH_HEADER = "X-Aiobootstrap"
"""A header on the ``/health`` reply, naming the version: tells an aiobootstrap server from others."""

BOOT_HEADER = "X-Aiobootstrap-Boot"
"""Every reply names the server's boot: a new value means the server restarted (and may be empty)."""

VERSION_HEADER = "X-Aiobootstrap-Version"
"""On a get's reply: the version of the record served (a parallelism config's body is the bare object)."""


def is_text(text: str) -> bool:
    """Whether UTF-8 can carry ``text``: no lone surrogate (which JSON's ``\\ud800`` can smuggle in, and
    which neither Redis nor the journal could keep). ASCII, the common case, is not encoded."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets, as URLs and log lines write it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
