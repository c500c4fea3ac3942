"""How a reply is read: JSON first, then each field checked for its type, and a batch for its ranks.

A client believes nothing of a reply it has not checked: a rank is a
non-negative integer (a JSON ``true`` is not one), a session id a string, a
version an integer, and a ``200`` to a get holds the ranks asked for, each
once. The decoders of ``results`` read each field through these; what is
wrong is said in words (:class:`Wrong`), and :func:`decoding` turns it into
:class:`~aiobootstrap.exceptions.UnexpectedReply` naming the reply. Values
shown in a message are cut short: a reply may hold megabytes where a rank
should be.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .._json import loads
from .._ranks import is_rank
from ..exceptions import UnexpectedReply

__all__ = [
    "Wrong",
    "count",
    "decoding",
    "exactly",
    "item_field",
    "items_of",
    "json_list",
    "json_object",
    "optional_text",
    "parse_reply",
    "seconds",
    "shown",
    "text",
]

T = TypeVar("T")

_SHOWN = 40
"""The most characters of a value a message shows."""


class Wrong(Exception):
    """What is wrong with a reply, in words; :func:`decoding` says which reply it is not."""


@contextmanager
def decoding(what: str) -> Iterator[None]:
    """Turn a :class:`Wrong` into :class:`UnexpectedReply`: "The server's reply is not ``what``: ..."."""
    try:
        yield
    except Wrong as exc:
        raise UnexpectedReply(f"The server's reply is not {what}: {exc}.") from None


def shown(value: object) -> str:
    """``value`` for an error message, cut short."""
    written = repr(value)
    return written if len(written) <= _SHOWN else f"{written[:_SHOWN]}..."


def parse_reply(payload: bytes, what: str) -> Any:
    """The reply's JSON, or :class:`UnexpectedReply` saying it is not ``what``."""
    try:
        return loads(payload)
    except (ValueError, RecursionError):
        raise UnexpectedReply(f"The server's reply is not JSON, so not {what}.") from None


def json_object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Wrong(f"{name} is {shown(value)}, not a JSON object")
    return value


def json_list(value: object, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise Wrong(f"its {name} is {shown(value)}, not a list")
    return value


def item_field(item: object, name: str) -> Any:
    """``item[name]``: ``item`` must be a JSON object, and have the field."""
    fields = json_object(item, "an item")
    if name not in fields:
        raise Wrong(f"it has no {name}")
    return fields[name]


def items_of(reply: object, name: str) -> list[Any]:
    """``reply[name]``, which must be a list."""
    return json_list(item_field(reply, name), name)


def count(value: object, name: str) -> int:
    """A rank, a version or a count: a non-negative integer, not a JSON ``true``."""
    if not is_rank(value):
        raise Wrong(f"its {name} is {shown(value)}, not a non-negative integer")
    assert isinstance(value, int)
    return value


def text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise Wrong(f"its {name} is {shown(value)}, not a string")
    return value


def optional_text(value: object, name: str) -> str | None:
    return None if value is None else text(value, name)


def seconds(value: object, name: str) -> float:
    """A time or an age: a JSON number (not ``true``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Wrong(f"its {name} is {shown(value)}, not a number")
    return float(value)


def exactly(asked: Collection[int], found: dict[int, T], items: int, what: str) -> dict[int, T]:
    """``found`` (read from ``items`` items) if it holds each rank ``asked`` once: what a batch's ``200`` means."""
    strays = [rank for rank in found if rank not in asked]
    if strays:
        problem = f"rank {strays[0]}, which it did not ask for"
    elif items != len(found):
        problem = "a rank twice"
    elif len(found) != len(asked):
        problem = f"{len(asked) - len(found)} of them missing"
    else:
        return found
    raise UnexpectedReply(
        f"The server answered a {what} get of {len(asked)} ranks with {problem}: a 200 holds each rank once."
    )
