"""``/watch``'s words for the changes the history logs (``server/change_words.py``): the generic form by key,
and a face's own (the encoder list's URL), byte for byte what the wire wrote before the history kept
store-level changes."""

from __future__ import annotations

from aiobootstrap._names import DEFAULT_ROLE, ENCODER_URLS, TRANSFER_ENGINE_INFO
from aiobootstrap.core.history import LoggedChange
from aiobootstrap.server.change_words import ChangeWords
from aiobootstrap.server.faces.encoders.face import describe_url_change
from aiobootstrap.server.kind_spec import KindSpec
from aiobootstrap.store import NO_RANK
from aiobootstrap.wire.watch import WatchedChange, encode_watch, sse_event

WORDS = ChangeWords(
    {ENCODER_URLS: KindSpec(ENCODER_URLS, lambda record: b"", describe_change=describe_url_change)}
)


def test_a_rank_and_a_named_change_keep_their_bytes() -> None:
    rank = LoggedChange("put", TRANSFER_ENGINE_INFO, 1, DEFAULT_ROLE, 3)
    named = LoggedChange("delete", "metadata", 2, DEFAULT_ROLE, NO_RANK, name="mooncake/ram/a\nb")
    shown = [
        WatchedChange("put", TRANSFER_ENGINE_INFO, 1, role=DEFAULT_ROLE, rank=3),
        WatchedChange("delete", "metadata", 2, key="mooncake/ram/a\nb"),
    ]
    assert WORDS.reply([rank, named], 2) == encode_watch(shown, 2)
    assert WORDS.reply([rank], 7, waits=3, findings=4) == encode_watch(shown[:1], 7, waits=3, findings=4)
    assert WORDS.events(named) == sse_event(shown[1])
    assert WORDS.shown(rank)
    assert WORDS.shown(named)


def test_a_member_of_the_encoder_list_is_its_url_and_the_evicted_set_is_shown_to_nobody() -> None:
    joined = LoggedChange("put", ENCODER_URLS, 4, DEFAULT_ROLE, 0, member="http://e:1")
    left = LoggedChange("delete", ENCODER_URLS, 5, DEFAULT_ROLE, 0, member="http://e:1")
    evicted = LoggedChange("put", ENCODER_URLS, 6, "evicted", 0, member="http://e:1")
    assert WORDS.reply([joined, left], 5) == encode_watch(
        [
            WatchedChange("put", ENCODER_URLS, 4, url="http://e:1"),
            WatchedChange("delete", ENCODER_URLS, 5, url="http://e:1"),
        ],
        5,
    )
    assert (
        WORDS.events(left)
        == b'id: 5\ndata: {"op":"delete","kind":"encoder_urls","url":"http://e:1","version":5}\n\n'
    )
    assert WORDS.shown(joined)
    assert not WORDS.shown(evicted)
    assert WORDS.events(evicted) == b""


def test_a_member_of_a_kind_without_words_is_shown_by_its_key_and_member() -> None:
    change = LoggedChange("put", "peers", 8, DEFAULT_ROLE, 0, member="a:1")
    assert WORDS.of(change) == [
        {"op": "put", "kind": "peers", "role": DEFAULT_ROLE, "rank": 0, "member": "a:1", "version": 8}
    ]
    assert ChangeWords().shown(change)
