"""``GET /encoder_url_health``'s reply, as the clients read it: what this replica's probes found of each URL."""

from __future__ import annotations

from dataclasses import dataclass

from .reading import (
    Wrong,
    count,
    decoding,
    item_field,
    items_of,
    json_object,
    parse_reply,
    seconds,
    shown,
    text,
)

__all__ = ["ENCODER_STATES", "EncoderHealthReport", "EncoderUrlHealth", "decode_encoder_health"]

ENCODER_STATES = frozenset({"healthy", "failing", "unprobed", "evicted", "listed"})
"""``healthy`` and ``failing``: listed, probed; ``unprobed``: listed, not probed yet (since the last round);
``evicted``: out of the list, still probed; ``listed``: not probed (probing is off)."""


@dataclass(frozen=True, slots=True)
class EncoderUrlHealth:
    """One URL, listed or evicted, and what the probes found of it."""

    url: str
    state: str
    """One of :data:`ENCODER_STATES`."""
    failures: int = 0
    """A listed URL's failed probes in a row (0 for an evicted one)."""
    evicted_for: float | None = None
    """An evicted URL's seconds since this replica evicted it; ``None`` when this replica has not seen it
    evicted (another did), and for a listed URL."""


@dataclass(frozen=True, slots=True)
class EncoderHealthReport:
    """The reply of ``GET /encoder_url_health`` (see docs/api.md)."""

    version: int
    """The list's version, as ``/list_encoder_urls`` gives it."""
    probing: bool
    interval: float
    """Seconds between rounds of probes."""
    failures_to_evict: int
    findings: int
    """Rounds of this replica's probes that changed a finding so far (a watch's ``&findings=``)."""
    encoder_urls: tuple[EncoderUrlHealth, ...]
    """The listed URLs in the list's order, then the evicted ones."""


def _url(item: object) -> EncoderUrlHealth:
    state = text(item_field(item, "state"), "state")
    if state not in ENCODER_STATES:
        raise Wrong(f"a URL's state is {shown(state)}, not one of {', '.join(sorted(ENCODER_STATES))}")
    fields = json_object(item, "an item")
    evicted_for = fields.get("evicted_for")
    return EncoderUrlHealth(
        url=text(item_field(item, "url"), "url"),
        state=state,
        failures=count(fields.get("failures", 0), "failures"),
        evicted_for=None if evicted_for is None else seconds(evicted_for, "evicted_for"),
    )


def decode_encoder_health(payload: bytes) -> EncoderHealthReport:
    """Read ``GET /encoder_url_health``'s reply; :class:`~aiobootstrap.exceptions.UnexpectedReply` if it
    is not one."""
    with decoding("an encoder health report"):
        reply = parse_reply(payload, "an encoder health report")
        probing = item_field(reply, "probing")
        if not isinstance(probing, bool):
            raise Wrong(f"its probing is {shown(probing)}, not true or false")
        return EncoderHealthReport(
            version=count(item_field(reply, "version"), "version"),
            probing=probing,
            interval=seconds(item_field(reply, "interval"), "interval"),
            failures_to_evict=count(item_field(reply, "failures_to_evict"), "failures_to_evict"),
            findings=count(item_field(reply, "findings"), "findings"),
            encoder_urls=tuple(_url(item) for item in items_of(reply, "encoder_urls")),
        )
