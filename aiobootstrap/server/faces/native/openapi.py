"""The native face's OpenAPI description: the health probe, the page, with ``/watch``
(``openapi_watch.py``) and the leases (``openapi_leases.py``)."""

from __future__ import annotations

from typing import Any

from ....wire.routes import HEALTH_PATH, PAGE_PATH
from ...openapi.paths import text_reply
from . import openapi_leases
from .openapi_watch import WATCH_SCHEMAS, watch_paths

__all__ = ["paths", "schemas"]


def paths() -> dict[str, dict[str, Any]]:
    """The native face's routes."""
    return {
        HEALTH_PATH: {
            "get": {
                "operationId": "health",
                "summary": "Whether the server is up.",
                "responses": {"200": text_reply("The server is up.")},
            }
        },
        PAGE_PATH: {
            "get": {
                "operationId": "page",
                "summary": "The bring-up page for a browser: every rank of each kind and role, live from /watch "
                "(one HTML file, its script and style inline; it reads the API with the token it asks for).",
                "responses": {
                    "200": {
                        "description": "The page.",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    },
                },
            }
        },
        **watch_paths(),
        **openapi_leases.PATHS,
    }


def schemas() -> dict[str, Any]:
    """What the native face's routes take and answer."""
    return {**WATCH_SCHEMAS, **openapi_leases.SCHEMAS}
