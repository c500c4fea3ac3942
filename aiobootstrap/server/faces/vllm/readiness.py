"""``GET /query?wait=S&tp_size=N[&pp_size=K][&dp_size=M][&after=V]``: what decode (or a proxy) waits for, as
a core condition over the namespace's worker records, kept from their names as they come and go (one read
seeds it, shared by every waiter asking the same; no record is read again per arrival)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from ...._names import DEFAULT_ROLE
from ....core.registry import Condition
from ....store import Change, Key, Record
from ....wire.vllm import VLLM_WORKER, Readiness, ranks_of_name

__all__ = ["QueryReady"]


class QueryReady(Condition):
    """Met when the workers registered make ``readiness`` (``None``: any) and, with ``after``, a worker
    changed after that version."""

    def __init__(self, namespace: str, readiness: Readiness | None, after: int) -> None:
        super().__init__(namespace, VLLM_WORKER, DEFAULT_ROLE)
        self.readiness, self.after = readiness, after
        self._ranks: dict[Key, tuple[int, int, int]] = {}
        self._per_dp: Counter[int] = Counter()  # every worker of a dp rank
        self._inside: Counter[int] = Counter()  # those inside the sizes waited for
        self._complete = 0  # dp ranks with every tp and pp rank
        self._newest = 0

    @property
    def identity(self) -> Hashable:
        return (type(self), self.namespace, self.kind, self.role, self.readiness, self.after)

    def seed(self, records: Sequence[Record]) -> None:
        self._ranks.clear()
        self._per_dp.clear()
        self._inside.clear()
        self._complete = 0
        for record in records:
            self._add(record.key)
            self._newest = max(self._newest, record.version)

    def changed(self, change: Change) -> None:
        self._newest = max(self._newest, change.version)
        if change.deleted:
            self._remove(change.key)
        else:
            self._add(change.key)

    def _whole(self) -> int:
        return 0 if self.readiness is None else self.readiness.whole

    def _is_inside(self, tp: int, pp: int) -> bool:
        readiness = self.readiness
        if readiness is None or readiness.tp_size is None:
            return False
        return tp < readiness.tp_size and pp < readiness.pp_size

    def _add(self, key: Key) -> None:
        ranks = ranks_of_name(key.name or "")
        if ranks is None or key in self._ranks:
            return
        self._ranks[key] = ranks
        dp, tp, pp = ranks
        self._per_dp[dp] += 1
        if self._is_inside(tp, pp):
            self._inside[dp] += 1
            if self._inside[dp] == self._whole():
                self._complete += 1

    def _remove(self, key: Key) -> None:
        ranks = self._ranks.pop(key, None)
        if ranks is None:
            return
        dp, tp, pp = ranks
        self._per_dp[dp] -= 1
        if not self._per_dp[dp]:
            del self._per_dp[dp]
        if self._is_inside(tp, pp):
            if self._inside[dp] == self._whole():
                self._complete -= 1
            self._inside[dp] -= 1
            if not self._inside[dp]:
                del self._inside[dp]

    @property
    def met(self) -> bool:
        if self.after and self._newest <= self.after:
            return False
        readiness = self.readiness
        if readiness is None:
            return True
        held = len(self._per_dp)
        if readiness.tp_size is None:
            return held >= readiness.dp_size
        return held >= readiness.dp_size and self._complete == held
