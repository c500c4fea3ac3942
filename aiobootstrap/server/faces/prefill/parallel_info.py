"""A deployment's topology as read from its record, and decode's parallel info: made once per version.

Every decode asks ``GET /route`` with the four ``-1``s (its parallel info),
and every ``GET /route`` reads the topology record first: the same record,
for every decode, until the deployment changes. :func:`made` parses the
record once (its :class:`~aiobootstrap.wire.prefill.Topology`) and encodes
the parallel info once, per version of the record: every reply after is one
``bytes`` object, whose whole ``200`` the responder makes once per variant
and second (``JsonReply.shared``). A new version, another incarnation's
record of the same version (told by its value) or a new topology after a
``DELETE`` is made anew.
"""

from __future__ import annotations

from ....store import Key, Record
from ....wire.prefill import Topology

__all__ = ["Made", "made"]

_MOST = 1024
"""The most topologies kept (one per namespace with a deployment); past it, all are made anew."""


class Made:
    """One version of a deployment's topology record: the topology, and the parallel info's bytes."""

    __slots__ = ("info", "record", "topology")

    def __init__(self, record: Record) -> None:
        self.record = record
        self.topology = Topology.from_value(record.value)
        self.info = self.topology.parallel_info()
        """``GET /route`` with the four ``-1``s: the engines' reply, key for key."""


_MADE: dict[Key, Made] = {}


def made(record: Record) -> Made:
    """``record``'s topology and parallel info, made once per version of it (see the top)."""
    found = _MADE.get(record.key)
    if found is not None:
        seen = found.record
        if seen is record or (seen.version == record.version and seen.value == record.value):
            return found
    if len(_MADE) >= _MOST:
        _MADE.clear()
    found = _MADE[record.key] = Made(record)
    return found
