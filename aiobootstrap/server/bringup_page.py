"""``GET /`` and ``/ns/{namespace}/``: the page operators watch (SPEC section 11), which the native face serves.

It is the host's: the token check (``auth``) answers a browser's load of it
refused for want of a token with the page itself, and the host imports no
face. The page is one file shipped in the package (``server/page/index.html``): its
script and style are inline, so nothing is fetched but the page itself and
the API routes it reads (``/namespaces``, ``/ranks``, ``/list_encoder_urls``,
``/encoder_url_health``, ``/watch``), all on this server. The ``Content-Security-Policy`` allows
exactly that: the inline script and style by their digests, requests to
``'self'`` only, no frames, no forms sent anywhere.

The page holds no records: it reads them with the caller's token (sent as
``Authorization`` by its ``fetch`` calls, never in a URL). So a browser asked
for a token (a ``401`` of a server with ``--auth-reads token``) is given the
page with that ``401``, and the page asks for the token; any other client
gets the JSON ``401`` every route gives.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources

from aiohttp import web

from ..wire.routes import check_namespace

__all__ = ["page", "page_refusal"]

_HTML = "text/html"


@cache
def _page() -> tuple[bytes, str]:
    """The page's bytes and its ``Content-Security-Policy`` (read once, from the package)."""
    text = resources.files("aiobootstrap.server").joinpath("page/index.html").read_text("utf-8")

    def digests(tag: str) -> str:
        bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" for body in bodies
        )

    policy = (
        f"default-src 'none'; script-src {digests('script')}; style-src {digests('style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return text.encode(), policy


def _reply(status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    body, policy = _page()
    return web.Response(
        status=status,
        body=body,
        content_type=_HTML,
        charset="utf-8",
        headers={
            **(headers or {}),
            "Content-Security-Policy": policy,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


async def page(request: web.Request) -> web.Response:
    """``GET /``: the bring-up page of the namespace (a read of it, as ``access`` classifies it)."""
    namespace = request.match_info.get("namespace")
    if namespace is not None:
        check_namespace(namespace)  # /ns/<not a namespace>/ is a 400, as on every other route
    return _reply()


def page_refusal(request: web.Request, refusal: web.Response) -> web.Response:
    """What a refused request gets: for a browser's load of the page refused for want of a token, the page
    itself with that ``401`` (it holds no records, and asks for the token); else ``refusal`` unchanged."""
    handler = request.match_info.route.handler
    handler = getattr(handler, "__wrapped__", handler)  # a face's handler is served through the responder
    if refusal.status != 401 or handler is not page or _HTML not in request.headers.get("Accept", ""):
        return refusal
    authenticate = refusal.headers.get("WWW-Authenticate")
    return _reply(401, None if authenticate is None else {"WWW-Authenticate": authenticate})
