"""Namespaces: several deployments on one server, each with its own registry.

Theory of operation
-------------------
A namespace is a name and a :class:`Registry` of its own: its ranks, its
versions and its waiters are nobody else's. The ``default`` namespace exists
from the start and is never forgotten; any other comes into being the first
time a request names it, so a deployment needs no set-up step.

Names come from clients, so a prober naming random namespaces must not grow
the server without bound. A namespace that holds no record and no parked wait
is *idle*: nothing is lost by forgetting it, since a later request recreates
it empty. Idle namespaces are swept when a new one is made and the count has
doubled since the last sweep, which keeps the work per request constant and
the count at most about twice the live ones. A limit caps the live ones.

Forgetting a namespace must not let its versions go backwards: a consumer
waiting with ``after=V`` would miss a registration numbered ``V`` or lower.
So the highest version of any forgotten namespace is kept, and a new
namespace's versions start above it.

This module is pure asyncio, like the registry: it knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ._protocol import DEFAULT_NAMESPACE, check_namespace
from ._registry import Registry
from .exceptions import ServerUnavailable, ShuttingDown

__all__ = ["Namespace", "Namespaces"]

_FIRST_SWEEP = 16
"""How many namespaces may exist before idle ones are first swept."""


@dataclass(eq=False, slots=True)
class Namespace:
    """One deployment's registry, with the counts the metrics read."""

    name: str
    registry: Registry
    registrations: int = 0
    """Registrations answered in this namespace since it was made."""

    @property
    def idle(self) -> bool:
        """Holds nothing worth keeping: no record and no parked wait."""
        return len(self.registry) == 0 and self.registry.parked == 0


class Namespaces:
    """The namespaces of one server, made on demand and forgotten when idle.

    ``new_registry(last_version)`` makes the registry of a new namespace,
    whose versions must continue above ``last_version``.
    """

    def __init__(
        self,
        default: Registry,
        new_registry: Callable[[int], Registry],
        *,
        limit: int | None = None,
    ) -> None:
        self.default = Namespace(DEFAULT_NAMESPACE, default)
        self._new_registry = new_registry
        self._limit = limit
        self._namespaces: dict[str, Namespace] = {DEFAULT_NAMESPACE: self.default}
        self._sweep_at = _FIRST_SWEEP
        self._forgotten_version = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._namespaces)

    def __iter__(self) -> Iterator[Namespace]:
        return iter(list(self._namespaces.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._namespaces

    @property
    def parked(self) -> int:
        """How many waits are parked right now, in every namespace."""
        return sum(namespace.registry.parked for namespace in self._namespaces.values())

    def get(self, name: str) -> Namespace:
        """The namespace called ``name``, made now if it does not exist.

        Raises :class:`~aiobootstrap.exceptions.BadRequest` for a name that
        cannot be a namespace, and :class:`ServerUnavailable` when making it
        would pass the limit.
        """
        namespace = self._namespaces.get(name)
        if namespace is not None:
            return namespace
        check_namespace(name)
        if self._closed:
            raise ShuttingDown("The server is shutting down.")
        if len(self._namespaces) >= self._sweep_at or self._full():
            self._sweep()
        if self._full():
            raise ServerUnavailable(
                f"The server already hosts {len(self._namespaces)} namespaces, its limit "
                "(--max-namespaces); a namespace is freed when it holds no ranks and no waits."
            )
        registry = self._new_registry(self._forgotten_version)
        namespace = self._namespaces[name] = Namespace(name, registry)
        return namespace

    def close(self) -> None:
        """Answer every parked wait in every namespace with :class:`ShuttingDown`."""
        self._closed = True
        for namespace in self._namespaces.values():
            namespace.registry.close()

    def _full(self) -> bool:
        return self._limit is not None and len(self._namespaces) >= self._limit

    def _sweep(self) -> None:
        for name, namespace in list(self._namespaces.items()):
            if namespace is not self.default and namespace.idle:
                self._forgotten_version = max(self._forgotten_version, namespace.registry.version)
                del self._namespaces[name]
        self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._namespaces))
