"""The encoders face: SGLang's encoder URL list (register, unregister, list, the probes' findings),
and the prober that evicts dead encoders, started and stopped with the app."""

from __future__ import annotations

from .... import wire
from ...face import Access, Face, Route
from . import openapi
from .health import encoder_health_context
from .routes import encoder_url_health, list_encoder_urls, register_encoder_url, unregister_encoder_url

__all__ = ["ENCODERS"]


def _routes() -> list[Route]:
    return [
        Route("POST", wire.ENCODER_REGISTER_PATH, register_encoder_url, Access.WRITE),
        Route("DELETE", wire.ENCODER_UNREGISTER_PATH, unregister_encoder_url, Access.WRITE),
        Route("GET", wire.ENCODER_LIST_PATH, list_encoder_urls, Access.READ),
        Route("GET", wire.ENCODER_HEALTH_PATH, encoder_url_health, Access.READ),
    ]


ENCODERS = Face.of_routes(
    "encoders",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(encoder_health_context,),
)
"""The encoder URL routes, and the prober (``health.py``) as its start-up and cleanup."""
