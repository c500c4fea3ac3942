"""The one log line of each registration or deletion of a per-rank record, with structured fields for
JSON logs (every field a client chose clipped: ``_logging.loggable``)."""

from __future__ import annotations

import asyncio
import logging

from ...._logging import clipped, loggable, printable
from ...._names import DEFAULT_NAMESPACE, DEFAULT_ROLE
from ....store import Record
from ....wire.bodies import is_classic, session_id_of
from .kinds import TRANSFER_ENGINE_INFO_KIND, RecordKind

__all__ = ["log_change"]

log = logging.getLogger("aiobootstrap")


def log_change(action: str, record: Record, kind: RecordKind, *, later: bool = False) -> None:
    """One line per registration or deletion of a per-rank record.

    ``later``: written at the loop's next turn, after the callbacks the change scheduled (the
    waiters' replies it answers), so the line is not on the way of their bytes. Only where no
    other line of this request follows it (the access log's comes at the end of the handler's
    step): the lines keep their order.
    """
    if not log.isEnabledFor(logging.INFO):
        return  # the line takes a while to make: registrations come by the thousand
    if later:
        asyncio.get_running_loop().call_soon(_log_change, action, record, kind)
    else:
        _log_change(action, record, kind)


def _log_change(action: str, record: Record, kind: RecordKind) -> None:
    key = record.key
    rank = record.rank
    where = "" if key.namespace == DEFAULT_NAMESPACE else f" in namespace {key.namespace}"
    what = "" if kind is TRANSFER_ENGINE_INFO_KIND else f"{kind.noun} "
    role = "" if key.role == DEFAULT_ROLE else f" role {loggable(key.role)}"
    session = ""
    extra: dict[str, object] = {"rank": rank, "version": record.version, "namespace": key.namespace}
    if kind is TRANSFER_ENGINE_INFO_KIND:
        value = record.value
        session_id = clipped(session_id_of(value))  # the field as logged; the message escapes it too
        session = "" if is_classic(value) else f" backend {loggable(str(value['backend']))}"
        session += f" session {printable(session_id)}" if "session_id" in value else ""
        extra["session_id"] = session_id
    if kind is not TRANSFER_ENGINE_INFO_KIND or key.role != DEFAULT_ROLE:
        extra["kind"] = kind.name
        extra["role"] = clipped(key.role)
    log.info(
        "%s %srank %d%s%s version %d%s",
        action,
        what,
        rank,
        role,
        session,
        record.version,
        where,
        extra=extra,
    )
