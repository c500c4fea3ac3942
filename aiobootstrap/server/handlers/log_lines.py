"""The one log line of each change a handler makes, with structured fields for JSON logs."""

from __future__ import annotations

import logging

from ... import wire as protocol
from ..._logging import printable
from ..._names import DEFAULT_NAMESPACE, DEFAULT_ROLE
from ...store import Record
from ..kinds import TRANSFER_ENGINE_INFO_KIND, RecordKind

__all__ = ["log_change", "log_encoder_url"]

log = logging.getLogger("aiobootstrap")


def log_change(action: str, record: Record, kind: RecordKind) -> None:
    """One line per registration or deletion of a per-rank record."""
    if not log.isEnabledFor(logging.INFO):
        return  # the line takes a while to make: registrations come by the thousand
    key = record.key
    where = "" if key.namespace == DEFAULT_NAMESPACE else f" in namespace {key.namespace}"
    what = "" if kind is TRANSFER_ENGINE_INFO_KIND else f"{kind.noun} "
    role = "" if key.role == DEFAULT_ROLE else f" role {printable(key.role)}"
    session = ""
    if kind is TRANSFER_ENGINE_INFO_KIND:
        tagged = not protocol.is_classic(record.value)
        session = f" backend {printable(str(record.value['backend']))}" if tagged else ""
        session += f" session {printable(record.session_id)}" if "session_id" in record.value else ""
    extra: dict[str, object] = {"rank": record.rank, "version": record.version, "namespace": key.namespace}
    if kind is TRANSFER_ENGINE_INFO_KIND:
        extra["session_id"] = record.session_id
    if kind is not TRANSFER_ENGINE_INFO_KIND or key.role != DEFAULT_ROLE:
        extra["kind"] = kind.name
        extra["role"] = key.role
    log.info(
        "%s %srank %d%s%s version %d%s",
        action,
        what,
        record.rank,
        role,
        session,
        record.version,
        where,
        extra=extra,
    )


def log_encoder_url(action: str, url: str, namespace: str) -> None:
    """One line per encoder URL registered or unregistered."""
    log.info("%s encoder URL %s", action, printable(url), extra={"namespace": namespace})
