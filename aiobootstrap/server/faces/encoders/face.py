"""The encoders face: SGLang's encoder URL list (register, unregister, list, the probes' findings),
and the prober that evicts dead encoders, started and stopped with the app."""

from __future__ import annotations

from aiohttp import web

from .... import wire
from ...face import Access, ExpectHandler, Face, RouteAccess
from . import openapi
from .health import encoder_health_context
from .routes import encoder_url_health, list_encoder_urls, register_encoder_url, unregister_encoder_url

__all__ = ["ENCODERS"]


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    return [
        web.post(wire.ENCODER_REGISTER_PATH, register_encoder_url, expect_handler=expect),
        web.delete(wire.ENCODER_UNREGISTER_PATH, unregister_encoder_url, expect_handler=expect),
        web.get(wire.ENCODER_LIST_PATH, list_encoder_urls, expect_handler=expect),
        web.get(wire.ENCODER_HEALTH_PATH, encoder_url_health, expect_handler=expect),
    ]


def _access() -> RouteAccess:
    return {
        ("POST", wire.ENCODER_REGISTER_PATH): Access.WRITE,
        ("DELETE", wire.ENCODER_UNREGISTER_PATH): Access.WRITE,
        ("GET", wire.ENCODER_LIST_PATH): Access.READ,
        ("GET", wire.ENCODER_HEALTH_PATH): Access.READ,
    }


ENCODERS = Face(
    "encoders",
    _routes,
    _access,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(encoder_health_context,),
)
"""The encoder URL routes, and the prober (``health.py``) as its start-up and cleanup."""
