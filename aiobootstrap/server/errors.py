"""The server's one error reply: JSON ``{"detail": "<one clear sentence>"}`` with its status.

Every error the server answers goes through :func:`json_error`: the error
middleware's (``_app``, for every error a handler raises) and the token and
``Expect`` checks' (``_auth``, which answer before any handler runs). The
body is ``_protocol``'s, the one writer of the wire.
"""

from __future__ import annotations

from aiohttp import web

from .. import wire as protocol

__all__ = ["json_error"]


def json_error(status: int, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    """An error reply: JSON ``{"detail": ...}`` with ``status`` (and ``headers``, such as ``Retry-After``)."""
    return web.Response(
        status=status, body=protocol.error_body(detail), content_type=protocol.JSON_TYPE, headers=headers
    )
