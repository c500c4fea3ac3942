"""Conditions: a predicate over the records of one (namespace, kind, role), kept as changes land, with no I/O
of its own (h11's state machines do none either): the registry seeds it with one read and tells it each change
of its kind (``watchers``), and it answers :attr:`Condition.met` at any moment from what it holds.

A face says what it waits for as a condition (the prefill face's readiness is :class:`AtLeast` of the
topology's ranks), never by reading the records again at each change.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence

from ...store import Change, Key, Record

__all__ = ["AtLeast", "Condition"]


class Condition(abc.ABC):
    """A predicate over the records of one (namespace, kind, role), kept as changes land; no I/O.

    A subclass says what it keeps (:meth:`seed`, :meth:`changed`) and when it
    is met (:attr:`met`); its :attr:`identity` names what makes two equal.
    """

    def __init__(self, namespace: str, kind: str, role: str) -> None:
        self.namespace, self.kind, self.role = namespace, kind, role

    @property
    def identity(self) -> Hashable:
        """Equal for conditions that are one (their waiters share a seed); a subclass adds its parameters."""
        return (type(self), self.namespace, self.kind, self.role)

    @abc.abstractmethod
    def seed(self, records: Sequence[Record]) -> None:
        """Start from ``records``, every record of the kind and role as read now."""

    @abc.abstractmethod
    def changed(self, change: Change) -> None:
        """``change`` (of this kind and role) landed; it may have been in the seed already."""

    @property
    @abc.abstractmethod
    def met(self) -> bool:
        """Whether the records satisfy the condition now."""


class AtLeast(Condition):
    """At least ``count`` distinct records (ranks or names) of the kind and role, counted as they come and go."""

    def __init__(self, namespace: str, kind: str, role: str, count: int) -> None:
        super().__init__(namespace, kind, role)
        self.count = count
        self._present: set[Key] = set()

    @property
    def identity(self) -> Hashable:
        return (type(self), self.namespace, self.kind, self.role, self.count)

    def seed(self, records: Sequence[Record]) -> None:
        self._present = {record.key for record in records}

    def changed(self, change: Change) -> None:
        if change.deleted:
            self._present.discard(change.key)
        else:
            self._present.add(change.key)

    @property
    def present(self) -> int:
        return len(self._present)

    @property
    def met(self) -> bool:
        return len(self._present) >= self.count
