"""The names of named records (``Key.named``): what a name may be.

A key names a record by rank (an integer from 0) or by *name*: any
non-empty string of at most :data:`MAX_NAME_LENGTH` characters that is
valid Unicode text. Colons, slashes, spaces, newlines, quotes and
non-ASCII are all kept exactly, by every store: each keeps a name where a
rank cannot be (a ``str`` slot beside ``int`` ones in memory and in the
file store's tables, ``name`` in place of ``rank`` on a journal line, a
``:``-prefixed hash field in Redis, whose rank fields are all digits).
A lone surrogate is refused here, as it is in a role: it is no UTF-8, so
neither Redis nor the journal could keep it. Saying so to a client in its
protocol's words (a ``400``) is the face's job.
"""

from __future__ import annotations

from .._names import is_text

__all__ = ["MAX_NAME_LENGTH", "NO_RANK", "check_key_name"]

NO_RANK = -1
"""The ``rank`` of a named key: below every rank, so a name never stands for a rank."""

MAX_NAME_LENGTH = 1024
"""The longest name a key may have, in characters."""


def check_key_name(name: object) -> str:
    """``name`` if it can name a record; ``ValueError`` saying why not."""
    if not isinstance(name, str) or not name:
        raise ValueError("A record's name is a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"A record's name is at most {MAX_NAME_LENGTH} characters, not {len(name)}.")
    if not is_text(name):
        raise ValueError("A record's name is not valid Unicode text (a lone surrogate).")
    return name
