"""Named records on every store: a key with a name in place of a rank (``Key.named``), kept exactly.

Each test runs against every store in ``FLAVORS`` (``tests/helpers/stores.py``): memory, the
journaled file, Redis. The names are the awkward ones a Mooncake engine sends (a segment's
``host:port``, slashes), and worse: a newline, a name that reads as a rank, non-ASCII, the longest.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap._names import DEFAULT_ROLE
from aiobootstrap._ranks import RankSet
from aiobootstrap.exceptions import TooManyRanks
from aiobootstrap.store import Key, Store, StoreLimits
from aiobootstrap.store.records import MAX_NAME_LENGTH, NO_RANK

from .helpers.stores import ODD_VALUE, Feed, OpenStore, exact, heard, put_all
from .helpers.stores import feed as feed  # the fixtures, made for every store flavor
from .helpers.stores import flavor as flavor
from .helpers.stores import open_store as open_store
from .helpers.stores import store as store

KIND = "metadata"

NAMES = [
    "mooncake/ram/10.0.0.1:1234",
    "mooncake/rpc_meta/node-1",
    "cluster-a/mooncake/ram/host:99",
    "line\nbreak",
    "7",
    ":7",
    "sp ace\ttab",
    'quote" back\\slash',
    "caf\u00e9 \u4e2d\u6587 \U0001f680",
    "{tag}:records:x",
    "x" * MAX_NAME_LENGTH,
]
"""Names no store may break on, or confuse with a rank (``"7"``) or with one another (``":7"``)."""


def named(name: str, namespace: str = "default", role: str = DEFAULT_ROLE) -> Key:
    return Key.named(namespace, KIND, role, name)


def ranked(rank: int, namespace: str = "default") -> Key:
    return Key(namespace, KIND, DEFAULT_ROLE, rank)


def value(n: int) -> dict[str, Any]:
    return {"segment": f"s{n}", "n": n}


# -- keys --------------------------------------------------------------------


def test_a_name_is_a_non_empty_string_of_valid_text_within_the_cap() -> None:
    """``Key.named`` keeps any string within the cap; an empty, overlong or lone-surrogate name is a
    ``ValueError`` (the face's 400); a name never equals a rank."""
    for name in NAMES:
        key = named(name)
        assert (key.name, key.rank) == (name, NO_RANK)
    refusals = {
        "": "non-empty string",
        "x" * (MAX_NAME_LENGTH + 1): f"at most {MAX_NAME_LENGTH} characters",
        "lone \ud800": "lone surrogate",
    }
    for bad, why in refusals.items():
        with pytest.raises(ValueError, match=why):
            named(bad)
    with pytest.raises(ValueError, match="non-empty string"):
        named(7)  # type: ignore[arg-type]
    assert named("7") != ranked(7)
    assert hash(ranked(7)) == hash(Key("default", KIND, DEFAULT_ROLE, 7)), "a rank's key is as it was"
    assert ranked(7).name is None


# -- put, get, delete ----------------------------------------------------------


async def test_named_records_round_trip_beside_a_rank(store: Store) -> None:
    """Each awkward name is its own record, read back exactly; ``"7"`` and rank 7 do not collide."""
    rank7 = await store.put(ranked(7), value(-1))
    records = [await store.put(named(name), value(n)) for n, name in enumerate(NAMES)]
    for record, name in zip(records, NAMES, strict=True):
        assert record.key == named(name)
        assert record.name == name
        assert record.rank == NO_RANK
        assert await store.get(named(name)) == record
    assert await store.get(ranked(7)) == rank7
    assert (await store.get(named("7"))).value == value(NAMES.index("7"))  # type: ignore[union-attr]
    assert await store.get(named("never")) is None
    keys = [named("7"), ranked(7), named("missing"), named(NAMES[0]), ranked(8)]
    assert await store.get_many(keys) == [records[NAMES.index("7")], rank7, None, records[0], None]
    assert await store.version("default") == len(NAMES) + 1


async def test_a_named_value_is_kept_exactly(store: Store) -> None:
    record = await store.put(named("line\nbreak"), ODD_VALUE)
    got = await store.get(named("line\nbreak"))
    assert got is not None
    assert exact(got.value) == exact(ODD_VALUE) == exact(record.value)


async def test_records_are_ranks_by_rank_then_names_by_name_and_count_both(store: Store) -> None:
    """``records`` holds the table's ranks first, by rank, then its names, by name; ``count`` counts both."""
    for rank in (10, 2):
        await store.put(ranked(rank), value(rank))
    for n, name in enumerate(NAMES):
        await store.put(named(name), value(n))
    listing = await store.records("default", KIND, DEFAULT_ROLE)
    assert [(r.rank, r.name) for r in listing] == [(2, None), (10, None)] + [
        (NO_RANK, name) for name in sorted(NAMES)
    ]
    assert await store.count("default", KIND, DEFAULT_ROLE) == len(NAMES) + 2
    assert await store.records("default", KIND, "other role") == []


async def test_a_named_record_is_deleted_once_with_a_version(store: Store, feed: Feed) -> None:
    put = await store.put(named("mooncake/ram/10.0.0.1:1234"), value(1))
    await store.put(ranked(0), value(0))
    assert await store.delete(named("mooncake/ram/10.0.0.1:1234")) == put
    assert await store.get(named("mooncake/ram/10.0.0.1:1234")) is None
    assert await store.delete(named("mooncake/ram/10.0.0.1:1234")) is None
    assert await store.delete(named("0")) is None, "a name that reads as a rank deletes no rank"
    assert await store.get(ranked(0)) is not None
    assert await store.version("default") == 3
    changes = await heard(feed, 3)
    assert [(c.key, c.version, c.deleted) for c in changes] == [
        (named("mooncake/ram/10.0.0.1:1234"), 1, False),
        (ranked(0), 2, False),
        (named("mooncake/ram/10.0.0.1:1234"), 3, True),
    ]


async def test_a_namespace_holding_only_named_records_is_forgotten_when_they_go(store: Store) -> None:
    await store.put(named("a", "red"), value(1))
    assert await store.namespaces() == ["red"]
    await store.delete(named("a", "red"))
    assert await store.namespaces() == []
    assert (await store.put(named("a", "red"), value(1))).version == 3, "versions never come back"


async def test_every_named_change_is_on_the_feed_with_its_key(store: Store, feed: Feed) -> None:
    for n, name in enumerate(NAMES):
        await store.put(named(name), value(n))
    changes = await heard(feed, len(NAMES))
    assert [c.key for c in changes] == [named(name) for name in NAMES]
    assert all(c.key.name is not None and c.key.rank == NO_RANK for c in changes)


# -- limits and rank sets --------------------------------------------------------


async def test_max_ranks_counts_names_as_ranks(open_store: OpenStore) -> None:
    """A table of a rank and a name is full at two: a third (either) is refused, a replacement is not."""
    store = await open_store(StoreLimits(max_ranks=2))
    await store.put(ranked(0), value(0))
    await store.put(named("a"), value(1))
    with pytest.raises(TooManyRanks):
        await store.put(named("b"), value(2))
    with pytest.raises(TooManyRanks):
        await store.put(ranked(1), value(2))
    await store.put(named("a"), value(3))
    assert await store.count("default", KIND, DEFAULT_ROLE) == 2


async def test_concurrent_named_puts_never_pass_the_cap(open_store: OpenStore) -> None:
    store = await open_store(StoreLimits(max_ranks=3))
    records, errors = await put_all(store, [named(f"n{i}") for i in range(6)])
    assert len(records) == 3
    assert len(errors) == 3
    assert all(isinstance(error, TooManyRanks) for error in errors)


@pytest.mark.parametrize("spec", ["0-9", "0-5000"])
async def test_a_rank_set_never_holds_a_named_record(store: Store, spec: str) -> None:
    """``records_in`` is ranks only, read key by key or as the table: the names beside them stay out."""
    await store.put(ranked(3), value(3))
    await store.put(named("3"), value(-3))
    await store.put(named("zz"), value(0))
    await store.put(ranked(7), value(7))
    found = await store.records_in("default", KIND, DEFAULT_ROLE, RankSet.parse(spec))
    assert [(r.rank, r.name) for r in found] == [(3, None), (7, None)]


# -- leases ----------------------------------------------------------------------


async def test_a_named_record_on_a_lease_leaves_with_it(store: Store, feed: Feed) -> None:
    """Put on a lease: ``leases_of`` names it, the lease's read lists it, revoking deletes it (a change);
    the rank beside it of the same digits, on no lease, stays."""
    lease = await store.grant_lease("default", 30)
    await store.put(named("7"), value(1), lease=lease.id)
    await store.put(ranked(7), value(2))
    held = await store.leases_of([(named("7"), None), (ranked(7), None)])
    assert held[0] is not None
    assert held[0][0] == lease.id
    assert held[1] is None
    assert (await store.read_lease("default", lease.id)).records == ((named("7"), None),)
    revoked = await store.revoke_lease("default", lease.id)
    assert revoked.records == ((named("7"), None),)
    assert await store.get(named("7")) is None
    assert await store.get(ranked(7)) is not None
    changes = await heard(feed, 3)
    assert (changes[-1].key, changes[-1].deleted) == (named("7"), True)


async def test_a_named_record_put_again_without_its_lease_leaves_it(store: Store) -> None:
    lease = await store.grant_lease("default", 30)
    await store.put(named("mooncake/ram/a:1"), value(1), lease=lease.id)
    await store.put(named("mooncake/ram/a:1"), value(2))
    assert await store.leases_of([(named("mooncake/ram/a:1"), None)]) == [None]
    await store.revoke_lease("default", lease.id)
    record = await store.get(named("mooncake/ram/a:1"))
    assert record is not None
    assert record.value == value(2)


async def test_a_named_set_record_takes_members_and_their_leases(store: Store) -> None:
    """``set_member`` on a named key: members in order, one on a lease that takes it out when revoked."""
    key = named("mooncake/peers")
    lease = await store.grant_lease("default", 30)
    await store.set_member(key, "a:1", present=True)
    await store.set_member(key, "b:2", present=True, lease=lease.id)
    record = await store.get(key)
    assert record is not None
    assert record.value == {"members": ["a:1", "b:2"]}
    await store.revoke_lease("default", lease.id)
    record = await store.get(key)
    assert record is not None
    assert record.value == {"members": ["a:1"]}
    assert await store.get(ranked(0)) is None
