"""The public result types a client receives, and their decoders.

Each decoder reads one reply; a reply that is not what the protocol allows
raises :class:`~aiobootstrap.exceptions.UnexpectedReply`. The server's
encoders of the same replies are the record kinds' (``server/kinds``); the
ones that need no record are here, beside what reads them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._json import dumps
from .._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO, VERSION_HEADER
from .._ranks import RankSet, rank_value
from ..exceptions import UnexpectedReply
from .reading import (
    Wrong,
    count,
    decoding,
    exactly,
    item_field,
    items_of,
    json_list,
    json_object,
    optional_text,
    parse_reply,
    seconds,
    shown,
    text,
)


def encode_encoder_urls(urls: Sequence[str], version: int) -> bytes:
    """The reply of ``GET /list_encoder_urls``."""
    return dumps({"encoder_urls": list(urls), "version": version})


def encode_items(field: str, items: Sequence[bytes], version: int) -> bytes:
    """A batch reply ``{field: [items...], "version": V}``, the encoded items spliced in."""
    return b'{"' + field.encode() + b'":[' + b",".join(items) + b'],"version":' + str(version).encode() + b"}"


@dataclass(frozen=True, slots=True)
class TransferEngineInfo:
    """One rank's transfer-engine info, as a getter receives it.

    ``fields`` is the ``transfer_engine_info`` object as far as the reply shows
    it: the whole registration for a backend-tagged one (NIXL's
    ``backend``, ``agent_name``, ``agent_metadata``, ...) or one read with
    ``whole=True``; ``session_id`` and ``weights_info_dict`` for classic info
    read in its list form. ``session_id`` is ``""`` when the rank sent none.
    """

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]
    version: int
    role: str = DEFAULT_ROLE
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.fields:
            # Built by hand with the classic fields only: they are the whole of it.
            classic = {"session_id": self.session_id, "weights_info_dict": self.weights_info_dict}
            object.__setattr__(self, "fields", classic)

    @property
    def backend(self) -> str | None:
        """The ``backend`` the rank tagged its info with (``None`` for classic info)."""
        backend = self.fields.get("backend")
        return backend if isinstance(backend, str) else None


def _info(item: Any, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    info = item_field(item, "remote_instance_transfer_engine_info")
    if isinstance(info, dict):
        # A tagged backend's object, or any registration read with form=object: every field.
        fields = dict(info)
        session_id = text(fields.get("session_id", ""), "session_id")
        weights = json_object(fields.get("weights_info_dict", {}), "its weights_info_dict")
    elif isinstance(info, list) and len(info) == 2:
        session_id = text(info[0], "session_id")
        weights = json_object(info[1], "its weights_info_dict")
        fields = {"session_id": session_id, "weights_info_dict": weights}
    else:
        raise Wrong(
            f"its remote_instance_transfer_engine_info is {shown(info)}, "
            "neither [session_id, weights_info_dict] nor an object"
        )
    return TransferEngineInfo(
        rank=count(item_field(item, "rank"), "rank"),
        session_id=session_id,
        weights_info_dict=dict(weights),
        version=count(item.get("version", 0), "version"),
        role=role,
        fields=fields,
    )


def decode_info(payload: bytes, rank: int, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    """Read the reply to a get of ``rank``, list or object form; :class:`UnexpectedReply` if it is not
    one, or is another rank's."""
    with decoding("a transfer engine info reply"):
        info = _info(parse_reply(payload, "a transfer engine info reply"), role)
    if info.rank != rank:
        raise UnexpectedReply(f"The server answered a get of rank {rank} with rank {info.rank}'s info.")
    return info


def decode_batch(
    payload: bytes, ranks: Collection[int], role: str = DEFAULT_ROLE
) -> dict[int, TransferEngineInfo]:
    """Read the reply to a batch get of ``ranks``; :class:`UnexpectedReply` if it is not one, or does not
    hold exactly those ranks."""
    with decoding("a batch reply"):
        infos = [_info(item, role) for item in items_of(parse_reply(payload, "a batch reply"), "infos")]
    return exactly(ranks, {info.rank: info for info in infos}, len(infos), "batch")


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One line of the listing of registered ranks."""

    rank: int
    session_id: str | None
    """``None`` for a record without one (a parallelism config, NIXL-tagged info)."""
    version: int
    registered_at: float
    age: float
    backend: str | None = None
    """The backend transfer-engine info was tagged with; ``None`` for classic info and other kinds."""


@dataclass(frozen=True, slots=True)
class RankListing:
    """The server's listing of one kind and role: who has registered, and who is missing."""

    version: int
    world_size: int | None
    ranks: list[RankSummary]
    missing: list[int] | None
    """The ranks of ``[0, world_size)`` not registered: all of them, or the first
    :data:`MISSING_LIST_MAX` when there are more (``missing_ranks`` has them all);
    ``None`` without a world size."""
    waiters: int
    """How many waits are parked on the server right now."""
    kind: str = TRANSFER_ENGINE_INFO
    role: str = DEFAULT_ROLE
    missing_ranks: RankSet | None = None
    """Every rank of ``[0, world_size)`` not registered, as ranges (exact however many);
    ``None`` without a world size."""
    waiters_by_rank: tuple[tuple[RankSet, int], ...] = ()
    """The waits parked on ranks of this kind and role: each set of ranks with the count of waits on
    each of its ranks, only ranks with waits (empty from a server that does not count them)."""

    def waiting_on(self, rank: int) -> int:
        """How many waits are parked on ``rank`` of this kind and role."""
        return next((waits for ranks, waits in self.waiters_by_rank if rank in ranks), 0)


def missing_in_world(world_size: int, registered: Iterable[int]) -> RankSet:
    """The ranks of ``[0, world_size)`` not in ``registered``: its cost grows with what is registered,
    not with the world size."""
    return RankSet.below(world_size).without(registered)


def decode_listing(payload: bytes) -> RankListing:
    """Read a ``/ranks`` reply of any kind and role; :class:`UnexpectedReply` if it is not one.

    An older server's listing (no ``kind`` or ``role``) is transfer-engine info of role ``target``.
    """
    with decoding("a rank listing"):
        reply = json_object(parse_reply(payload, "a rank listing"), "it")
        world_size, listed = reply.get("world_size"), reply.get("missing")
        missing = (
            None if listed is None else [count(rank, "missing rank") for rank in json_list(listed, "missing")]
        )
        return RankListing(
            version=count(item_field(reply, "version"), "version"),
            world_size=None if world_size is None else count(world_size, "world_size"),
            ranks=[_summary(item) for item in items_of(reply, "ranks")],
            missing=missing,
            waiters=count(reply.get("waiters", 0), "waiters"),
            kind=text(reply.get("kind", TRANSFER_ENGINE_INFO), "kind"),
            role=text(reply.get("role", DEFAULT_ROLE), "role"),
            missing_ranks=_listed_missing(reply.get("missing_ranks"), missing),
            waiters_by_rank=_waiters_by_rank(reply.get("waiters_by_rank", {})),
        )


def _waiters_by_rank(spec: object) -> tuple[tuple[RankSet, int], ...]:
    """A listing's ``waiters_by_rank``: rank specs to counts."""
    try:
        return tuple(
            (RankSet.parse(text(ranks, "waiters_by_rank"), name="waiters_by_rank"), count(waits, "waiters"))
            for ranks, waits in json_object(spec, "waiters_by_rank").items()
        )
    except ValueError as exc:
        raise Wrong(str(exc)) from None


def _listed_missing(spec: object, missing: list[int] | None) -> RankSet | None:
    """A listing's missing ranks: its ``missing_ranks`` spec, or, from a server that sends
    none (its ``missing`` then lists them all), its ``missing``."""
    if spec is None:
        return None if missing is None else RankSet.from_ranks(missing)
    spec = text(spec, "missing_ranks")
    try:
        return RankSet.parse(spec, name="missing_ranks") if spec else RankSet()
    except ValueError as exc:
        raise Wrong(str(exc)) from None


def _summary(item: Any) -> RankSummary:
    return RankSummary(
        rank=count(item_field(item, "rank"), "rank"),
        session_id=optional_text(item.get("session_id"), "session_id"),
        version=count(item_field(item, "version"), "version"),
        registered_at=seconds(item_field(item, "registered_at"), "registered_at"),
        age=seconds(item_field(item, "age"), "age"),
        backend=optional_text(item.get("backend"), "backend"),
    )


# -- the client's side of roles, parallelism configs and encoder URLs ----


@dataclass(frozen=True, slots=True)
class NamespaceSummary:
    """One namespace of the server, as ``GET /namespaces`` shows it."""

    name: str
    version: int
    """The namespace's version: it grows with every change in it."""
    ranks: int
    """Ranks holding transfer-engine info of role ``target``."""
    waiters: int
    """Waits parked in the namespace right now."""
    encoder_urls: int = 0
    others: Mapping[str, int] = field(default_factory=dict)
    """The other counts a server's faces keep of the namespace (a face of another package's), by name."""


def namespace_summary(name: str, version: int, waiters: int, counts: Mapping[str, int]) -> NamespaceSummary:
    """A namespace as ``GET /namespaces`` shows it, from the counts the server's faces keep, by name
    (``Face.counts``): ``ranks`` and ``encoder_urls`` are the reply's own fields, any other is added."""
    others = dict(counts)
    return NamespaceSummary(
        name, version, others.pop("ranks", 0), waiters, others.pop("encoder_urls", 0), others
    )


def encode_namespaces(
    namespaces: Sequence[NamespaceSummary], waits: int | None = None, others: Mapping[str, Any] | None = None
) -> bytes:
    """The reply of ``GET /namespaces``, in order of name; ``waits``: the server's count of moves of parked
    waits, which a page sends back to be told of the next (``?waits=N&wait=S``); ``others``: fields of the
    server's beside them (``wire.listeners``)."""
    return dumps(
        {
            **({} if waits is None else {"waits": waits}),
            **(others or {}),
            "namespaces": [
                {
                    "namespace": each.name,
                    "version": each.version,
                    "ranks": each.ranks,
                    "waiters": each.waiters,
                    "encoder_urls": each.encoder_urls,
                    **each.others,
                }
                for each in namespaces
            ],
        }
    )


def decode_namespaces(payload: bytes) -> list[NamespaceSummary]:
    """Read ``GET /namespaces``'s reply; :class:`UnexpectedReply` if it is not one."""
    with decoding("a namespace listing"):
        reply = parse_reply(payload, "a namespace listing")
        return [
            NamespaceSummary(
                name=text(item_field(item, "namespace"), "namespace"),
                version=count(item_field(item, "version"), "version"),
                ranks=count(item_field(item, "ranks"), "ranks"),
                waiters=count(item_field(item, "waiters"), "waiters"),
                encoder_urls=count(json_object(item, "an item").get("encoder_urls", 0), "encoder_urls"),
            )
            for item in items_of(reply, "namespaces")
        ]


def decode_version_header(value: str | None) -> int:
    """The version an ``X-Aiobootstrap-Version`` header names; 0 when absent (a server without it),
    :class:`UnexpectedReply` when it names something else."""
    if value is None:
        return 0
    version = rank_value(value)
    if version is None:
        raise UnexpectedReply(f"The server's {VERSION_HEADER} header is {shown(value)}, not a version.")
    return version


@dataclass(frozen=True, slots=True)
class ParallelismConfig:
    """One rank's parallelism config, as a getter receives it: the object exactly as registered."""

    rank: int
    config: dict[str, Any]
    version: int
    role: str = DEFAULT_ROLE


def decode_config(
    payload: bytes, rank: int, version: str | None, role: str = DEFAULT_ROLE
) -> ParallelismConfig:
    """Read a parallelism config get's reply: the bare object; its version travels in the header."""
    config = parse_reply(payload, "a parallelism config")
    if not isinstance(config, dict):
        raise UnexpectedReply("The server's reply is not a parallelism config: not a JSON object.")
    return ParallelismConfig(rank, config, decode_version_header(version), role)


def decode_config_batch(
    payload: bytes, ranks: Collection[int], role: str = DEFAULT_ROLE
) -> dict[int, ParallelismConfig]:
    """Read the reply ``{"configs": [...], "version": V}`` to a parallelism config batch get of ``ranks``."""
    what = "a parallelism config batch reply"
    with decoding(what):
        configs = [
            ParallelismConfig(
                count(item_field(item, "rank"), "rank"),
                json_object(item_field(item, "parallelism_config"), "its parallelism_config"),
                count(item_field(item, "version"), "version"),
                role,
            )
            for item in items_of(parse_reply(payload, what), "configs")
        ]
    return exactly(
        ranks, {config.rank: config for config in configs}, len(configs), "parallelism config batch"
    )


@dataclass(frozen=True, slots=True)
class EncoderUrls:
    """The encoder URL list at one version, in order of first registration."""

    urls: list[str]
    version: int
    """Grows with every change of the list; ``after=`` this to wait for the next one."""


def decode_encoder_urls(payload: bytes) -> EncoderUrls:
    """Read ``GET /list_encoder_urls``'s reply; a server without versions gives version 0."""
    with decoding("an encoder URL list"):
        reply = json_object(parse_reply(payload, "an encoder URL list"), "it")
        urls = [text(url, "encoder URL") for url in items_of(reply, "encoder_urls")]
        return EncoderUrls(urls, count(reply.get("version", 0), "version"))
