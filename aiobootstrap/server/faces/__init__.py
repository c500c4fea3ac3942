"""The faces: each protocol a folder of thin adapters from a request to the registry and back.

:data:`FACES` lists the app's faces, each declared (a ``server.face.Face``)
in its own folder's ``face.py``: ``engine_info`` (SGLang's per-rank records,
one set of handlers for each entry of ``kinds.KINDS``), ``encoders`` (SGLang's
encoder URL list and its prober), ``prefill`` (SGLang's prefill bootstrap for PD
disaggregation: ``/route``, the bootstrap rooms), ``mooncake`` (the metadata server Mooncake's
transfer engines rendezvous through: ``/metadata?key=``), ``native`` (aiobootstrap's own: the health
probe, ``/ranks``, ``/watch``, the leases, the page). No face imports
another: what they share is here, beside them: ``common`` (what they read
from a request, the plain replies they send), ``kinds`` (the record kinds'
table), ``records`` (replies from records), ``log_lines`` (the one log line
of each change), ``rounds`` (probes every interval, as a task that lives with
the app). ``create_app`` puts them on their routes.
"""

from __future__ import annotations

from ..face import Face
from .encoders.face import ENCODERS
from .engine_info.face import ENGINE_INFO
from .mooncake.face import MOONCAKE
from .native.face import NATIVE
from .prefill.face import PREFILL

__all__ = ["ENCODERS", "ENGINE_INFO", "FACES", "MOONCAKE", "NATIVE", "PREFILL"]

FACES: tuple[Face, ...] = (ENGINE_INFO, ENCODERS, PREFILL, MOONCAKE, NATIVE)
"""The app's faces (``create_app(faces=...)`` serves others): a new one is a folder and an entry here."""
