"""The public result types a client receives, and their decoders.

Each decoder reads one reply; a reply that is not what the protocol allows
raises :class:`~aiobootstrap.exceptions.UnexpectedReply`. The server's
encoders of the same replies are the record kinds' (``server/kinds``); the
ones that need no record are here, beside what reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._json import dumps, loads
from .._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from .._ranks import RankSet, is_rank, rank_value
from ..exceptions import UnexpectedReply


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


def _reply(payload: bytes, what: str) -> Any:
    try:
        return loads(payload)
    except (ValueError, RecursionError):
        raise UnexpectedReply(f"The server's reply is not JSON, so not {what}.") from None


def _info(item: Any, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    info = item["remote_instance_transfer_engine_info"]
    if isinstance(info, dict):
        # A tagged backend's object, or any registration read with form=object: every field.
        fields = dict(info)
        session_id, weights = fields.get("session_id", ""), fields.get("weights_info_dict", {})
    else:
        session_id, weights = info
        fields = {"session_id": session_id, "weights_info_dict": weights}
    return TransferEngineInfo(
        rank=int(item["rank"]),
        session_id=str(session_id),
        weights_info_dict=dict(weights),
        version=int(item.get("version", 0)),
        role=role,
        fields=fields,
    )


def decode_info(payload: bytes, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    """Read a get reply, list or object form; :class:`UnexpectedReply` if it is not one."""
    try:
        return _info(_reply(payload, "a transfer engine info reply"), role)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a transfer engine info reply: {exc!r}.") from None


def decode_batch(payload: bytes, role: str = DEFAULT_ROLE) -> dict[int, TransferEngineInfo]:
    """Read a batch get reply; :class:`UnexpectedReply` if it is not one."""
    try:
        infos = [_info(item, role) for item in _reply(payload, "a batch reply")["infos"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a batch reply: {exc!r}.") from None
    return {info.rank: info for info in infos}


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


def missing_in_world(world_size: int, registered: Iterable[int]) -> RankSet:
    """The ranks of ``[0, world_size)`` not in ``registered``: its cost grows with what is registered,
    not with the world size."""
    return RankSet.below(world_size).without(registered)


def decode_listing(payload: bytes) -> RankListing:
    """Read a ``/ranks`` reply of any kind and role; :class:`UnexpectedReply` if it is not one.

    An older server's listing (no ``kind`` or ``role``) is transfer-engine info of role ``target``.
    """
    reply = _reply(payload, "a rank listing")
    try:
        return RankListing(
            version=int(reply["version"]),
            world_size=reply.get("world_size"),
            ranks=[_summary(item) for item in reply["ranks"]],
            missing=reply.get("missing"),
            waiters=int(reply.get("waiters", 0)),
            kind=str(reply.get("kind", TRANSFER_ENGINE_INFO)),
            role=str(reply.get("role", DEFAULT_ROLE)),
            missing_ranks=_listed_missing(reply),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a rank listing: {exc!r}.") from None


def _listed_missing(reply: dict[str, Any]) -> RankSet | None:
    """A listing's missing ranks: its ``missing_ranks`` spec, or, from a server that sends
    none (its ``missing`` then lists them all), its ``missing``."""
    spec = reply.get("missing_ranks")
    if isinstance(spec, str):
        return RankSet.parse(spec, name="missing_ranks") if spec else RankSet()
    missing = reply.get("missing")
    return None if missing is None else RankSet.from_ranks(int(rank) for rank in missing)


def _summary(item: Any) -> RankSummary:
    session_id, backend = item.get("session_id"), item.get("backend")
    return RankSummary(
        rank=int(item["rank"]),
        session_id=None if session_id is None else str(session_id),
        version=int(item["version"]),
        registered_at=float(item["registered_at"]),
        age=float(item["age"]),
        backend=None if backend is None else str(backend),
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


def encode_namespaces(namespaces: Sequence[NamespaceSummary]) -> bytes:
    """The reply of ``GET /namespaces``, in order of name."""
    return dumps(
        {
            "namespaces": [
                {
                    "namespace": each.name,
                    "version": each.version,
                    "ranks": each.ranks,
                    "waiters": each.waiters,
                    "encoder_urls": each.encoder_urls,
                }
                for each in namespaces
            ]
        }
    )


def decode_namespaces(payload: bytes) -> list[NamespaceSummary]:
    """Read ``GET /namespaces``'s reply; :class:`UnexpectedReply` if it is not one."""
    try:
        return [
            NamespaceSummary(
                name=_string(item["namespace"]),
                version=_integer(item["version"]),
                ranks=_integer(item["ranks"]),
                waiters=_integer(item["waiters"]),
                encoder_urls=_integer(item.get("encoder_urls", 0)),
            )
            for item in _reply(payload, "a namespace listing")["namespaces"]
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a namespace listing: {exc!r}.") from None


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _integer(value: object) -> int:
    number = None if isinstance(value, str) else rank_value(value)  # a JSON true is not one
    if number is None:
        raise TypeError(f"{value!r} is not a non-negative integer")
    return number


def decode_version_header(value: str | None) -> int:
    """The version an ``X-Aiobootstrap-Version`` header names; 0 when absent (a server without it)."""
    version = None if value is None else rank_value(value)
    return 0 if version is None else version


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
    config = _reply(payload, "a parallelism config")
    if not isinstance(config, dict):
        raise UnexpectedReply("The server's reply is not a parallelism config: not a JSON object.")
    return ParallelismConfig(rank, config, decode_version_header(version), role)


def decode_config_batch(payload: bytes, role: str = DEFAULT_ROLE) -> dict[int, ParallelismConfig]:
    """Read a parallelism config batch reply ``{"configs": [...], "version": V}``."""
    try:
        items = _reply(payload, "a parallelism config batch reply")["configs"]
        configs = [
            ParallelismConfig(int(item["rank"]), dict(item["parallelism_config"]), int(item["version"]), role)
            for item in items
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(
            f"The server's reply is not a parallelism config batch reply: {exc!r}."
        ) from None
    return {config.rank: config for config in configs}


@dataclass(frozen=True, slots=True)
class EncoderUrls:
    """The encoder URL list at one version, in order of first registration."""

    urls: list[str]
    version: int
    """Grows with every change of the list; ``after=`` this to wait for the next one."""


def decode_encoder_urls(payload: bytes) -> EncoderUrls:
    """Read ``GET /list_encoder_urls``'s reply; a server without versions gives version 0."""
    reply = _reply(payload, "an encoder URL list")
    urls = reply.get("encoder_urls") if isinstance(reply, dict) else None
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise UnexpectedReply(
            "The server's reply is not an encoder URL list: no list of strings in encoder_urls."
        )
    version = reply.get("version", 0)
    if not is_rank(version):  # the same grammar: a non-negative integer
        raise UnexpectedReply("The server's reply is not an encoder URL list: its version is not an integer.")
    return EncoderUrls(urls, version)
