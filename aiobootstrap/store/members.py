"""Set records: a record whose value is a set of strings (``{"members": [...]}``), such as the encoder URL list.

A set record is changed one member at a time (:meth:`~aiobootstrap.store.Store.set_member`); the
rule of such a change is written once, here, and every store follows it.
"""

from __future__ import annotations

from typing import Any

from .limits import too_many_members

__all__ = ["MAX_MEMBERS", "MEMBERS", "members_of", "with_member"]

MEMBERS = "members"
"""The field of a *set record* (see :meth:`Store.set_member`): its members, in order of first addition."""


MAX_MEMBERS = 4096
"""The most members a set record holds: adding one more is refused (:class:`TooManyRanks`, a ``409``)."""


def members_of(value: dict[str, Any] | None) -> list[str]:
    """A set record's members (a new list); none when there is no record.

    An empty ``members`` written as ``{}`` (Lua's cjson cannot tell an empty
    array from an empty object) counts as no members.
    """
    members = None if value is None else value.get(MEMBERS)
    return list(members) if isinstance(members, list) else []


def with_member(value: dict[str, Any] | None, member: str, *, present: bool) -> dict[str, Any] | None:
    """The set record's value once ``member`` is in it (``present``) or out of it; ``None`` if unchanged.

    The rule every store follows for :meth:`Store.set_member`: an added member
    goes last, a removed one leaves the others in order, and a set that loses
    its last member stays, empty (so a waiter sees that change too). Adding a
    new member to a set of :data:`MAX_MEMBERS` raises :class:`TooManyRanks`.
    """
    members = members_of(value)
    if (member in members) == present:
        return None
    if present:
        if len(members) >= MAX_MEMBERS:
            raise too_many_members(len(members))
        members.append(member)
    else:
        members.remove(member)
    return {MEMBERS: members}
