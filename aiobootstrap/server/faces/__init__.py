"""The faces: each protocol a folder of thin adapters from a request to the registry and back.

Each folder ``faces/<name>/`` is one face, declared (a ``server.face.Face``)
as ``FACE`` in its ``face.py``; ``server.face_registry`` finds them by
scanning this folder (and other packages' entry points), so that no list
names them and a new face is a new folder. Those that ship with aiobootstrap:
``engine_info`` (SGLang's per-rank records, one set of handlers for each entry
of its ``kinds.KINDS``, and their listing ``/ranks``), ``encoders`` (SGLang's encoder URL list and its prober),
``prefill`` (SGLang's prefill bootstrap for PD disaggregation: ``/route``, the
bootstrap rooms), ``mooncake`` (the metadata server Mooncake's transfer engines
rendezvous through: ``/metadata?key=``), ``native`` (aiobootstrap's own: the
health probe, ``/watch``, the leases, the page). A face's settings
(its options) are a dataclass in its ``settings.py``.

No face imports another: what they share is here, beside them: ``common``
(what they read from a request, the plain replies they send), ``records``
(replies from records), ``rounds`` (probes every interval, as a task that
lives with the app), ``engine_variables`` (an engine's variable as a
setting's default). This package imports none of them: the command line reads the
faces' settings before the server (and aiohttp) loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..face_registry import installed_faces

if TYPE_CHECKING:
    from ..face import Face

__all__ = ["FACES"]


def __getattr__(name: str) -> tuple[Face, ...]:
    """``FACES``: the installed faces, in the order they are served (``face_registry.installed_faces``), for
    embedders who serve one more with ``create_app(faces=(*FACES, yours))`` as before they were found."""
    if name == "FACES":
        return installed_faces()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
