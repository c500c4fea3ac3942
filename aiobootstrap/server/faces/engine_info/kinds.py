"""The engine-info face's record kinds: one table entry per kind of per-rank record, with its wire shapes.

A kind is data, not a code path. Each per-rank kind is a :class:`RecordKind`
naming its routes, the register body's field that holds the record, how that
field is checked, how a get, a ``form=object`` get and a batch item are
written, what the listing shows of a record and the ``404`` sentence. One set
of handlers (``routes``), one listing (``listing``: ``/ranks``), one OpenAPI
builder (``openapi``), the registry and every store serve all of them: the
store keys records by kind and role, and the registry waits on keys whatever
their kind.

Adding a kind is an entry in :data:`KINDS`: its paths, its field, a parser for
the field (raising :class:`~aiobootstrap.exceptions.BadRequest` naming it),
encoders for its replies and their JSON schemas. Registration, deletion,
``wait=``/``after=``, the batch get, roles, namespaces, the listing, the
metrics, the OpenAPI description, the journal and every store follow from
the entry (``tests/test_kinds.py`` adds a kind that way).

The face declares these kinds to the host (:func:`kind_spec`, its
``Face.kinds``, made from the table when the face is made:
``face.engine_info_face``). The other faces' kinds (a set of encoder URLs, a
prefill rank, a Mooncake key) are theirs alone, each declared in its own
folder.

Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ...._json import dumps
from ....exceptions import BadRequest, missing_ranks_detail
from ....store import Key, Record
from ....wire.bodies import parse_engine_info, parse_object
from ....wire.kinds import PARALLELISM_CONFIG_ROUTES, TRANSFER_ENGINE_INFO_ROUTES, KindRoutes
from ...kind_spec import KindSpec
from .. import records

__all__ = ["KINDS", "TRANSFER_ENGINE_INFO_KIND", "RecordKind", "kind_named", "kind_spec"]


@dataclass(frozen=True, slots=True)
class RecordKind(KindRoutes):
    """One kind of per-rank record: its wire (:class:`KindRoutes`) and how the server handles it."""

    title: str
    """CamelCase, for OpenAPI operation ids and schema names."""
    parse: Callable[[object], dict[str, Any]]
    """The body field to the value stored (kept whole); ``BadRequest`` naming the field."""
    encode: Callable[[Record], bytes]
    """A get's reply (cached by the pre-built replies, ``fastpath.gets``, one per record version)."""
    encode_object: Callable[[Record], bytes]
    """A ``form=object`` get's reply: the registration whole."""
    item: Callable[[Record, bytes], bytes]
    """A batch item, from the record and its get reply (spliced, not re-encoded)."""
    summary: Callable[[Record], dict[str, Any]]
    """What the listing shows of a record besides rank, version and times."""
    value_schema: Mapping[str, Any]
    """JSON schema of the body field (OpenAPI)."""
    reply_schema: Mapping[str, Any]
    """JSON schema of a get's reply (OpenAPI)."""
    item_schema: Mapping[str, Any] | None = None
    """JSON schema of a batch item; ``None`` when an item is the get's reply."""

    def absent(self, rank: int) -> str:
        """The ``404`` detail of a get for an unregistered rank."""
        return missing_ranks_detail([rank], self.noun)

    def key(self, namespace: str, role: str, rank: int) -> Key:
        return Key(namespace, self.name, role, rank)


def _same_item(record: Record, reply: bytes) -> bytes:
    return reply


def _config_item(record: Record, reply: bytes) -> bytes:
    rank, version = str(record.rank).encode(), str(record.version).encode()
    return b'{"rank":' + rank + b',"parallelism_config":' + reply + b',"version":' + version + b"}"


def _encode_value(record: Record) -> bytes:
    return dumps(record.value)


_OBJECT: Mapping[str, Any] = {"type": "object", "additionalProperties": True}
_VERSION: Mapping[str, Any] = {"type": "integer", "description": "Grows with every change in the namespace."}


def _routes_of(kind: KindRoutes) -> dict[str, Any]:
    return {field.name: getattr(kind, field.name) for field in fields(KindRoutes)}


TRANSFER_ENGINE_INFO_KIND = RecordKind(
    **_routes_of(TRANSFER_ENGINE_INFO_ROUTES),
    title="TransferEngineInfo",
    parse=parse_engine_info,
    encode=records.encode_info,
    encode_object=records.encode_info_object,
    item=_same_item,
    summary=records.engine_summary,
    value_schema={
        "type": "object",
        "description": "Kept whole, every field as sent. Without backend: session_id and "
        "weights_info_dict are required. With any backend (mooncake included; nixl sends "
        "agent_name, base64 agent_metadata, weights_info_dict) nothing else is checked.",
        "properties": {
            "backend": {
                "type": ["string", "null"],
                "minLength": 1,
                "description": "null: the same as absent.",
            },
            "session_id": {"description": "A string, for classic info."},
            "weights_info_dict": {"description": "An object, for classic info."},
        },
        "additionalProperties": True,
        "anyOf": [
            {  # classic: checked
                "properties": {
                    "backend": {"type": "null"},
                    "session_id": {"type": "string"},
                    "weights_info_dict": _OBJECT,
                },
                "required": ["session_id", "weights_info_dict"],
            },
            {  # tagged, any backend: kept whole, unchecked
                "properties": {"backend": {"type": "string"}},
                "required": ["backend"],
            },
        ],
    },
    reply_schema={
        "type": "object",
        "required": ["rank", "remote_instance_transfer_engine_info", "version"],
        "properties": {
            "rank": {"type": "integer"},
            "remote_instance_transfer_engine_info": {
                "description": "[session_id, weights_info_dict] for untagged info; the object as registered "
                "for info tagged with any backend (mooncake included), or with form=object.",
                "oneOf": [
                    {
                        "type": "array",
                        "prefixItems": [{"type": "string"}, _OBJECT],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                    _OBJECT,
                ],
            },
            "version": _VERSION,
        },
    },
)

PARALLELISM_CONFIG_KIND = RecordKind(
    **_routes_of(PARALLELISM_CONFIG_ROUTES),
    title="ParallelismConfig",
    parse=lambda value: parse_object(value, "parallelism_config"),
    encode=_encode_value,
    encode_object=_encode_value,
    item=_config_item,
    summary=lambda record: {},
    value_schema={**_OBJECT, "description": "Kept and served exactly as registered."},
    reply_schema={**_OBJECT, "description": "The config object exactly as registered."},
    item_schema={
        "type": "object",
        "required": ["rank", "parallelism_config", "version"],
        "properties": {"rank": {"type": "integer"}, "parallelism_config": _OBJECT, "version": _VERSION},
    },
)

KINDS: tuple[RecordKind, ...] = (TRANSFER_ENGINE_INFO_KIND, PARALLELISM_CONFIG_KIND)
"""Every per-rank kind the server serves. Read when an app is made and when a kind is looked up."""


def _find(name: str) -> RecordKind | None:
    # A handful of kinds: a scan is as quick as a dict, and sees the table as it is now.
    for kind in KINDS:
        if kind.name == name:
            return kind
    return None


def kind_named(name: str | None) -> RecordKind:
    """The kind a ``kind=`` parameter names (transfer-engine info when absent)."""
    if name is None:
        return TRANSFER_ENGINE_INFO_KIND
    kind = _find(name)
    if kind is None:
        names = ", ".join(sorted(kind.name for kind in KINDS))
        raise BadRequest(f"Invalid kind parameter: give one of {names}.")
    return kind


def kind_spec(kind: RecordKind) -> KindSpec:
    """What the host needs of a per-rank kind: its replies (the engine-info face declares it)."""
    return KindSpec(kind.name, kind.encode, kind.encode_object)
