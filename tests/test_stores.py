"""The store contract: what every store promises, whatever keeps its records.

Each test runs against every store in ``FLAVORS`` (``tests/helpers/stores.py``).
A flavor is a factory for an unopened store; adding a store (Redis) to the
suite is one more entry there.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap._ranks import RankSet
from aiobootstrap.exceptions import TooManyNamespaces, TooManyOfKind, TooManyRanks
from aiobootstrap.store import Key, Record, Store, StoreLimits
from aiobootstrap.wire.bodies import session_id_of, weights_of

from .helpers.stores import ODD_VALUE, Feed, Flavor, OpenStore, exact, heard, info, key, put_all
from .helpers.stores import feed as feed  # the fixtures, made for every store flavor
from .helpers.stores import flavor as flavor
from .helpers.stores import open_store as open_store
from .helpers.stores import store as store

# -- the stores under test ----------------------------------------------


# -- versions -------------------------------------------------------------


async def test_puts_take_strictly_increasing_versions_per_namespace(store: Store) -> None:
    """Each put, a replacement included, takes its namespace's next version; another namespace counts apart."""
    red: list[int] = []
    blue: list[int] = []
    for rank in (0, 1, 0, 2):
        red.append((await store.put(key(rank, "red"), info())).version)
        blue.append((await store.put(key(rank, "blue"), info())).version)
    red.append((await store.put(key(9, "red", kind="other", role="draft"), {"x": 1})).version)
    assert red == [1, 2, 3, 4, 5]
    assert blue == [1, 2, 3, 4]
    assert await store.version("red") == 5
    assert await store.version("blue") == 4
    assert await store.version("green") == 0


async def test_concurrent_puts_never_share_a_version(store: Store) -> None:
    """Puts in flight together still take distinct versions, and the namespace's version is the highest."""
    records, errors = await put_all(store, [key(rank % 50) for rank in range(200)])
    assert errors == []
    versions = sorted(record.version for record in records)
    assert versions == list(range(1, 201))
    assert await store.version("default") == 200
    # Of the four puts of each rank, the last stamped is the one stored.
    for rank in range(50):
        stored = await store.get(key(rank))
        assert stored is not None
        assert stored.version == max(r.version for r in records if r.rank == rank)


# -- reading --------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["0-9", "3,5,2000-2002", "0-1023", "0-1024", "1-65535", "5000-9000", "100000-165535"]
)
async def test_records_in_reads_the_ranks_of_a_set(store: Store, spec: str) -> None:
    """records_in answers the records whose ranks the set holds, by rank, whether the set is read
    key by key (small) or as its table (large); other roles, kinds and namespaces stay out."""
    stored = {}
    for rank in (0, 3, 5, 1023, 1024, 2001, 4999, 5000, 9000, 9001, 100000):
        stored[rank] = await store.put(key(rank), info(f"s{rank}"))
    await store.put(key(5, role="draft"), info("draft"))
    await store.put(key(5, "blue"), info("blue"))
    await store.put(key(5, kind="layout"), {"layers": [1]})
    ranks = RankSet.parse(spec)
    expected = [stored[rank] for rank in sorted(stored) if rank in ranks]
    assert await store.records_in("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, ranks) == expected
    assert await store.records_in("green", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, ranks) == []


async def test_reads_see_what_was_put(store: Store) -> None:
    """get, get_many, records, version and namespaces answer from what the store holds."""
    zero = await store.put(key(0), info("zero"))
    two = await store.put(key(2), info("two"))
    draft = await store.put(key(1, role="draft"), info("draft"))
    layout = await store.put(key(1, kind="layout"), {"layers": [1, 2]})
    blue = await store.put(key(0, "blue"), info("blue"))

    assert await store.get(key(0)) == zero
    assert await store.get(key(1)) is None  # rank 1 holds records of other roles and kinds only
    assert await store.get(key(0, "green")) is None
    assert await store.get_many([key(2), key(1), key(1, role="draft"), key(0, "blue"), key(0)]) == [
        two,
        None,
        draft,
        blue,
        zero,
    ]
    assert await store.get_many([]) == []
    assert await store.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE) == [zero, two]
    assert await store.records("default", TRANSFER_ENGINE_INFO, "draft") == [draft]
    assert await store.records("default", "layout", DEFAULT_ROLE) == [layout]
    assert await store.records("green", TRANSFER_ENGINE_INFO, DEFAULT_ROLE) == []
    assert await store.version("default") == 4
    assert await store.version("blue") == 1
    assert await store.namespaces() == ["blue", "default"]


async def test_records_come_back_by_rank(store: Store) -> None:
    """records() lists a table by rank, whatever order the ranks were put in."""
    for rank in (7, 3, 11, 0, 5):
        await store.put(key(rank), info(str(rank)))
    records = await store.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    assert [record.rank for record in records] == [0, 3, 5, 7, 11]


async def test_a_put_returns_the_record_it_stored(store: Store) -> None:
    """The returned record carries the key, the value and a version; a replacement supersedes it."""
    first = await store.put(key(3, "blue", role="draft"), info("one"))
    assert (first.key, first.value, first.version) == (key(3, "blue", role="draft"), info("one"), 1)
    assert session_id_of(first.value) == "one"
    assert weights_of(first.value) == {}
    second = await store.put(key(3, "blue", role="draft"), info("two"))
    assert second.version == 2
    assert await store.get(key(3, "blue", role="draft")) == second


# -- deleting -------------------------------------------------------------


async def test_delete_returns_what_was_stored_and_takes_a_version(store: Store, feed: Feed) -> None:
    """A delete removes the record, returns it, takes the next version and is announced."""
    record = await store.put(key(4), info("four"))
    await store.put(key(5), info("five"))
    assert await store.delete(key(4)) == record
    assert await store.get(key(4)) is None
    assert await store.version("default") == 3
    changes = await heard(feed, 3)
    assert (changes[-1].key, changes[-1].version, changes[-1].deleted) == (key(4), 3, True)
    assert changes[-1].record is None


async def test_a_delete_of_nothing_takes_no_version_and_announces_nothing(store: Store, feed: Feed) -> None:
    """Deleting an absent key (never put, already deleted, or only another role's) returns None and changes nothing."""
    await store.put(key(0), info())
    await store.put(key(1, role="draft"), info())
    await store.delete(key(0))
    await heard(feed, 3)
    for absent in (key(0), key(1), key(0, "blue"), key(1, kind="layout"), key(1, role="other")):
        assert await store.delete(absent) is None
    assert await store.version("default") == 3
    # A later change is the next thing heard: nothing came in between.
    await store.put(key(2), info())
    changes = await heard(feed, 4)
    assert [change.version for change in changes] == [1, 2, 3, 4]


async def test_concurrent_deletes_of_one_key_remove_it_once(store: Store, feed: Feed) -> None:
    """Of two deletes of one record in flight together, one returns it; the feed hears one deletion."""
    record = await store.put(key(0), info())
    await store.put(key(1), info())
    first, second = await asyncio.gather(store.delete(key(0)), store.delete(key(0)))
    assert sorted([first, second], key=lambda r: r is None) == [record, None]
    changes = await heard(feed, 3)
    assert [(c.key, c.deleted) for c in changes] == [(key(0), False), (key(1), False), (key(0), True)]


# -- the change feed ------------------------------------------------------


async def test_the_feed_announces_every_change_in_order(store: Store, feed: Feed, flavor: Flavor) -> None:
    """Puts and deletes in several namespaces are heard in the order applied, each with its version."""
    made: list[tuple[Key, int, Record | None]] = []

    async def put(k: Key, value: dict[str, Any]) -> None:
        record = await store.put(k, value)
        made.append((k, record.version, record))

    async def delete(k: Key) -> None:
        await store.delete(k)
        made.append((k, await store.version(k.namespace), None))

    await put(key(0), info("a"))
    await put(key(0, "blue"), info("b"))
    await put(key(0), info("c"))
    await delete(key(0))
    await put(key(1, "blue", role="draft"), info("d"))
    await delete(key(0, "blue"))
    await put(key(2, kind="layout"), {"n": 2})

    changes = await heard(feed, len(made))
    assert len(changes) == len(made)
    for change, (k, version, record) in zip(changes, made, strict=True):
        assert (change.key, change.version, change.deleted) == (k, version, record is None)
        if record is None or flavor.feed_carries_records:
            assert change.record == record
    for namespace in ("default", "blue"):
        versions = [c.version for c in changes if c.key.namespace == namespace]
        assert versions == sorted(set(versions))
    assert feed.resyncs == 0


async def test_concurrent_puts_are_announced_in_version_order(store: Store, feed: Feed) -> None:
    """A burst of puts is heard once each, a namespace's versions rising."""
    records, errors = await put_all(store, [key(rank) for rank in range(100)])
    assert errors == []
    changes = await heard(feed, 100)
    assert len(changes) == 100
    assert [change.version for change in changes] == list(range(1, 101))
    assert {change.key for change in changes} == {record.key for record in records}


# -- limits ---------------------------------------------------------------


async def test_rank_cap_is_exact_under_concurrent_new_ranks(open_store: OpenStore) -> None:
    """500 new ranks put at once under a cap of 100: exactly 100 are stored, the rest refused."""
    store = await open_store(StoreLimits(max_ranks=100))
    records, errors = await put_all(store, [key(rank) for rank in range(500)])
    assert len(records) == 100
    assert len(errors) == 400
    assert all(isinstance(error, TooManyRanks) for error in errors)
    stored = await store.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    assert sorted(record.rank for record in stored) == sorted(record.rank for record in records)


async def test_a_replacement_always_has_room_under_the_rank_cap(open_store: OpenStore) -> None:
    """At the cap, every stored rank may be replaced, even with new ranks racing it; a new rank may not."""
    store = await open_store(StoreLimits(max_ranks=10))
    await put_all(store, [key(rank) for rank in range(10)])
    records, errors = await put_all(
        store, [key(rank) for rank in range(10)] + [key(rank) for rank in range(10, 30)]
    )
    assert sorted(record.rank for record in records) == list(range(10))
    assert len(errors) == 20
    assert all(isinstance(error, TooManyRanks) for error in errors)
    with pytest.raises(TooManyRanks):
        await store.put(key(10), info())
    # Deleting a rank makes room for one new rank.
    await store.delete(key(0))
    await store.put(key(10), info())
    with pytest.raises(TooManyRanks):
        await store.put(key(11), info())


async def test_rank_cap_counts_each_namespace_kind_and_role_apart(open_store: OpenStore) -> None:
    """A full table of ranks leaves room in another namespace, kind or role, each capped on its own."""
    store = await open_store(StoreLimits(max_ranks=3))
    for where in ({}, {"namespace": "blue"}, {"kind": "layout"}, {"role": "draft"}):
        records, errors = await put_all(store, [key(rank, **where) for rank in range(5)])
        assert len(records) == 3, where
        assert len(errors) == 2, where
        assert all(isinstance(error, TooManyRanks) for error in errors)


def _room(name: int) -> Key:
    return Key.named("default", "room", DEFAULT_ROLE, str(name))


async def test_a_kinds_cap_counts_its_records_in_place_of_the_rank_cap(open_store: OpenStore) -> None:
    """A capped kind's records (named ones too) count against its cap, exactly under concurrency, and not
    against ``max_ranks``: each refusal names the kind and the cap; a replacement always has room, a delete
    frees one place; another kind keeps the rank cap; a set record of a capped kind counts alike."""
    store = await open_store(StoreLimits(max_ranks=2, kind_caps={"room": 5, "urls": 1}))
    records, errors = await put_all(store, [_room(n) for n in range(20)])
    assert len(records) == 5
    assert len(errors) == 15
    assert all(isinstance(error, TooManyOfKind) for error in errors)
    assert all((error.kind, error.cap) == ("room", 5) for error in errors if isinstance(error, TooManyOfKind))
    assert "room" in str(errors[0])
    assert "cap of 5" in str(errors[0])
    assert await store.count("default", "room", DEFAULT_ROLE) == 5
    await store.put(records[0].key, {"replaced": True})
    await store.delete(records[1].key)
    await store.put(_room(99), {"n": 99})
    with pytest.raises(TooManyOfKind):
        await store.put(_room(100), {"n": 100})
    ranks, refused = await put_all(store, [key(rank) for rank in range(5)])
    assert len(ranks) == 2
    assert all(type(error) is TooManyRanks for error in refused)
    await store.set_member(Key("default", "urls", DEFAULT_ROLE, 0), "http://e", present=True)
    with pytest.raises(TooManyOfKind):
        await store.set_member(Key("default", "urls", DEFAULT_ROLE, 1), "http://e", present=True)


async def test_a_set_records_changes_name_their_member_on_the_feed(store: Store, feed: Feed) -> None:
    """Every change ``set_member`` makes is told with the member it added (``+M``) or removed (``-M``), and
    so is a member's removal when its lease ends; a whole record's put or delete names none."""
    key = Key("default", "urls", DEFAULT_ROLE, 0)
    lease = await store.grant_lease("default", 30)
    await store.set_member(key, "http://a", present=True)
    await store.set_member(key, "http://b", present=True, lease=lease.id)
    await store.set_member(key, "http://a", present=True)  # no change: nothing told
    await store.set_member(key, "http://a", present=False)
    await store.revoke_lease("default", lease.id)
    await store.put(Key("default", "urls", DEFAULT_ROLE, 1), {"members": ["http://c"]})
    changes = await heard(feed, 5)
    assert [(change.version, change.member) for change in changes] == [
        (1, "+http://a"),
        (2, "+http://b"),
        (3, "-http://a"),
        (4, "-http://b"),
        (5, None),
    ]


async def test_namespace_cap_is_exact_under_concurrency(open_store: OpenStore) -> None:
    """100 new namespaces at once under a cap of 10: exactly 10 hold records, the rest are refused."""
    store = await open_store(StoreLimits(max_namespaces=10))
    records, errors = await put_all(store, [key(0, f"ns{n}") for n in range(100)])
    assert len(records) == 10
    assert len(errors) == 90
    assert all(isinstance(error, TooManyNamespaces) for error in errors)
    assert await store.namespaces() == sorted(record.key.namespace for record in records)
    # A namespace already held takes more records, of any rank, kind and role.
    held = records[0].key.namespace
    await store.put(key(1, held), info())
    await store.put(key(1, held, kind="layout", role="draft"), {"n": 1})


async def test_a_namespace_is_freed_when_its_last_record_is_deleted(open_store: OpenStore) -> None:
    """At the namespace cap, deleting one of two records frees nothing; deleting the last frees the place."""
    store = await open_store(StoreLimits(max_namespaces=2))
    await store.put(key(0, "red"), info())
    await store.put(key(1, "red", role="draft"), info())
    await store.put(key(0, "blue"), info())
    with pytest.raises(TooManyNamespaces):
        await store.put(key(0, "green"), info())
    await store.delete(key(0, "red"))
    with pytest.raises(TooManyNamespaces):
        await store.put(key(0, "green"), info())
    await store.delete(key(1, "red", role="draft"))
    assert await store.namespaces() == ["blue"]
    # One place came free: two new namespaces race for it, one gets it.
    records, errors = await put_all(store, [key(0, "green"), key(0, "yellow")])
    assert len(records) == 1
    assert len(errors) == 1
    assert isinstance(errors[0], TooManyNamespaces)
    assert await store.namespaces() == sorted(["blue", records[0].key.namespace])


async def test_a_refused_put_changes_nothing(open_store: OpenStore, feed: Feed) -> None:
    """A put past a limit takes no version, stores nothing and announces nothing."""
    store = await open_store(StoreLimits(max_ranks=1, max_namespaces=1))
    await store.put(key(0), info())
    with pytest.raises(TooManyRanks):
        await store.put(key(1), info())
    with pytest.raises(TooManyNamespaces):
        await store.put(key(0, "blue"), info())
    assert await store.version("default") == 1
    assert await store.namespaces() == ["default"]
    assert await store.get(key(1)) is None
    await store.put(key(0), info("again"))
    assert [change.version for change in await heard(feed, 2)] == [1, 2]


# -- versions of a forgotten namespace ----------------------------------


async def test_an_emptied_namespace_never_reuses_a_version(store: Store) -> None:
    """A namespace whose last record went is forgotten, but its versions go on above the ones it took."""
    await store.put(key(0, "red"), info())
    await store.put(key(1, "red"), info())
    await store.delete(key(0, "red"))
    await store.delete(key(1, "red"))
    assert await store.namespaces() == []
    assert await store.version("red") >= 4
    record = await store.put(key(0, "red"), info("back"))
    assert record.version > 4
    assert await store.version("red") == record.version


async def test_a_namespace_emptied_again_and_again_keeps_climbing(store: Store) -> None:
    """Each time a namespace empties and fills again, its versions keep rising."""
    versions: list[int] = []
    for _ in range(5):
        versions.append((await store.put(key(0, "red"), info())).version)
        await store.delete(key(0, "red"))
        versions.append(await store.version("red"))
    assert versions == sorted(set(versions))


# -- values ---------------------------------------------------------------


async def test_values_round_trip_exactly(store: Store) -> None:
    """Nested JSON, unicode and 64-bit integers come back equal, with the same types and key order."""
    await store.put(key(0), ODD_VALUE)
    await store.put(key(0, "blue", kind="layout", role="draft"), {"value": ODD_VALUE, "list": [ODD_VALUE]})
    record = await store.get(key(0))
    assert record is not None
    assert exact(record.value) == exact(ODD_VALUE)
    other = await store.get(key(0, "blue", kind="layout", role="draft"))
    assert other is not None
    assert exact(other.value) == exact({"value": ODD_VALUE, "list": [ODD_VALUE]})
    [listed] = await store.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    assert exact(listed.value) == exact(ODD_VALUE)


# -- set records (the encoder URL list) ----------------------------------


def members_key(namespace: str = "default") -> Key:
    return key(0, namespace, kind="encoder_urls")


async def test_set_member_keeps_first_addition_order_and_takes_versions_only_for_changes(
    store: Store, feed: Feed
) -> None:
    """Added members go last, a removal keeps the others' order, an emptied set stays; no-ops are silent."""
    k = members_key()
    assert await store.set_member(k, "a", present=False) is None
    for member in ("b", "a", "c"):
        await store.set_member(k, member, present=True)
    unchanged = await store.set_member(k, "a", present=True)
    assert unchanged is not None
    assert (unchanged.value, unchanged.version) == ({"members": ["b", "a", "c"]}, 3)
    record = await store.set_member(k, "a", present=False)
    assert record is not None
    assert (record.value, record.version) == ({"members": ["b", "c"]}, 4)
    again = await store.set_member(k, "zz", present=False)
    assert again is not None
    assert again.version == 4
    await store.set_member(k, "b", present=False)
    emptied = await store.set_member(k, "c", present=False)
    assert emptied is not None
    assert (emptied.value, emptied.version) == ({"members": []}, 6)
    stored = await store.get(k)
    assert stored is not None
    assert (stored.value, stored.version) == ({"members": []}, 6)
    changes = await heard(feed, 6)
    assert [(change.key, change.version, change.deleted) for change in changes] == [
        (k, version, False) for version in range(1, 7)
    ]


async def test_concurrent_member_changes_are_never_lost(store: Store) -> None:
    """50 members added at once all land, each change with its own version; one member added 10 times once."""
    k = members_key()
    await asyncio.gather(*(store.set_member(k, f"m{i}", present=True) for i in range(50)))
    await asyncio.gather(*(store.set_member(k, "same", present=True) for _ in range(10)))
    record = await store.get(k)
    assert record is not None
    assert sorted(record.value["members"]) == sorted([f"m{i}" for i in range(50)] + ["same"])
    assert record.value["members"][-1] == "same"
    assert record.version == 51 == await store.version("default")


async def test_a_new_set_record_counts_against_the_namespace_cap(open_store: OpenStore, feed: Feed) -> None:
    """The first member in a namespace past the cap is refused like a put: nothing stored, nothing announced."""
    store = await open_store(StoreLimits(max_namespaces=1))
    await store.set_member(members_key(), "a", present=True)
    with pytest.raises(TooManyNamespaces):
        await store.set_member(members_key("blue"), "a", present=True)
    assert await store.namespaces() == ["default"]
    assert await store.get(members_key("blue")) is None
    assert len(await heard(feed, 1)) == 1


async def test_a_full_set_refuses_one_more_member(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_MEMBERS a new member is TooManyRanks and nothing changes; a member already in still is."""
    monkeypatch.setattr("aiobootstrap.store.members.MAX_MEMBERS", 2)
    k = members_key()
    await store.set_member(k, "a", present=True)
    await store.set_member(k, "b", present=True)
    with pytest.raises(TooManyRanks):
        await store.set_member(k, "c", present=True)
    record = await store.set_member(k, "a", present=True)
    assert record is not None
    assert (record.value, record.version) == ({"members": ["a", "b"]}, 2)
