"""The one log line of each change a handler makes, with structured fields for JSON logs (a per-rank
record's: ``engine_info/log_lines.py``).

Every field a client chose (role, session id, backend, URL) is cut to
:data:`~aiobootstrap._logging.LOGGED_CHARS` characters, with a marker saying how long it was, in
the message and in the structured fields alike: a line costs about what a
registration of sane ids costs, whatever a body holds.
"""

from __future__ import annotations

import logging

from ..._logging import clipped, printable

__all__ = ["log_encoder_url", "shown"]

log = logging.getLogger("aiobootstrap")


def shown(text: str) -> str:
    """A client's field as the message writes it: clipped, then escaped if not printable."""
    return printable(clipped(text))


def log_encoder_url(action: str, url: str, namespace: str) -> None:
    """One line per encoder URL registered or unregistered."""
    log.info("%s encoder URL %s", action, shown(url), extra={"namespace": namespace})
