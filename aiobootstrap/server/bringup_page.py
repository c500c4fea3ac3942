"""``GET /`` and ``/ns/{namespace}/``: the page operators watch (SPEC section 11), which the native face serves.

It is the host's: the token check (``auth``) answers a browser's load of it
refused for want of a token with the page itself, and the host imports no
face. The page is the host's frame (``server/page/index.html``: the header, the
token form, the style and one script of what is generic: the token, the API
helper, the namespace, following ``/watch`` with lost and back, the ``410``
that reads everything again, the parked waits) and the sections of the faces
served: each face that shows something ships a script (``page.js`` in its
folder, found by :func:`page_scripts`; a face from another package declares
it, ``Face.page_script``), which pushes its section to ``aiobootstrap.sections``
(docs/architecture.md, "A face's section of the page"). Each face's script is added at the end of the page's one script, in
the faces' order, each in a function of its own (its names are its own, in
strict mode) whose failure leaves the other sections standing. A face that is
not served (``--faces``) sends nothing to the page.

So nothing is fetched but the page itself and the API routes its scripts read,
all on this server. The ``Content-Security-Policy`` allows exactly that: the
inline script and style by their digests, requests to ``'self'`` only, no
frames, no forms sent anywhere. The page and its policy are made once per set
of face scripts (:func:`_page`), so once per app's faces.

The page holds no records: it reads them with the caller's token (sent as
``Authorization`` by its ``fetch`` calls, never in a URL). So a browser asked
for a token (a ``401`` of a server with ``--auth-reads token``) is given the
page with that ``401``, and the page asks for the token; any other client
gets the JSON ``401`` every route gives.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING

from aiohttp import web

from ..wire.routes import check_namespace
from .face_registry import FACES_PACKAGE

if TYPE_CHECKING:
    from .face import Face

__all__ = ["PAGE_SCRIPTS", "PageScript", "folder_script", "page", "page_refusal", "page_scripts"]

_HTML = "text/html"
_FACES_SCRIPTS = "/* the faces' sections */"
"""Where, in ``index.html``'s script, the faces' scripts go: at its end, after the host's own part."""
_FOLDER_SCRIPT = "page.js"
"""The script a face's folder ships to show its section of the page."""

PageScript = Callable[[], str]
"""A face's section of the page: the text of its script (``Face.page_script``)."""
PAGE_SCRIPTS: web.AppKey[tuple[tuple[str, PageScript], ...]] = web.AppKey("page_scripts")
"""The page scripts of the app's faces, by face name, in the faces' order (``create_app`` sets it)."""


@functools.cache
def folder_script(package: str, name: str = _FOLDER_SCRIPT) -> PageScript:
    """The script ``name`` in a face's folder (``package``: its ``__package__``), read once when first asked
    for: what a face from another package declares as its ``page_script``."""

    @functools.cache
    def text() -> str:
        return resources.files(package).joinpath(name).read_text("utf-8")

    return text


def page_scripts(faces: Iterable[Face]) -> tuple[tuple[str, PageScript], ...]:
    """The page scripts of ``faces``, by name, in their order: each one's ``page_script``, or by convention
    the ``page.js`` its folder ships (``faces/<name>/page.js``, not imported to be found); a face with
    neither shows nothing on the page."""
    scripts = []
    folders = resources.files(FACES_PACKAGE)
    for face in faces:
        if face.page_script is not None:
            scripts.append((face.name, face.page_script))
        elif folders.joinpath(face.name, _FOLDER_SCRIPT).is_file():
            scripts.append((face.name, folder_script(f"{FACES_PACKAGE}.{face.name}")))
    return tuple(scripts)


def _section(name: str, script: PageScript) -> str:
    """A face's script as a part of the page's one script: in a function of its own (its names are its
    own, in strict mode), whose failure the console tells without stopping the other faces' sections."""
    text = script()
    if "</script" in text.lower():
        raise ValueError(f"the {name} face's page script may not hold '</script'")
    return (
        f'// The {name} face\'s section.\ntry {{ (() => {{\n"use strict";\n{text.strip()}\n}})(); }}\n'
        f'catch (error) {{ console.error({json.dumps(name)} + " face\'s section:", error); }}\n'
    )


@functools.cache
def _page(scripts: tuple[tuple[str, PageScript], ...] = ()) -> tuple[bytes, str]:
    """The page's bytes with ``scripts`` (each face's, in order, by its name) and its
    ``Content-Security-Policy``."""
    frame = resources.files("aiobootstrap.server").joinpath("page/index.html").read_text("utf-8")
    if frame.count(_FACES_SCRIPTS) != 1:
        raise ValueError(f"page/index.html has no single {_FACES_SCRIPTS!r}")
    text = frame.replace(_FACES_SCRIPTS + "\n", "".join(_section(name, script) for name, script in scripts))

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


def _reply(app: web.Application, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    body, policy = _page(app.get(PAGE_SCRIPTS, ()))
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
    return _reply(request.app)


def page_refusal(request: web.Request, refusal: web.Response) -> web.Response:
    """What a refused request gets: for a browser's load of the page refused for want of a token, the page
    itself with that ``401`` (it holds no records, and asks for the token); else ``refusal`` unchanged."""
    handler = request.match_info.route.handler
    handler = getattr(handler, "__wrapped__", handler)  # a face's handler is served through the responder
    if refusal.status != 401 or handler is not page or _HTML not in request.headers.get("Accept", ""):
        return refusal
    authenticate = refusal.headers.get("WWW-Authenticate")
    return _reply(request.app, 401, None if authenticate is None else {"WWW-Authenticate": authenticate})
