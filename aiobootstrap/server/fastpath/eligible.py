"""May this request's reply be pre-built bytes: the one rule every fast reply asks.

A pre-built reply is written below ``web.Response``: aiohttp never fills its
header multidict, never sends ``on_response_prepare``, and a woken waiter's
bytes are written before its handler (and so every middleware around it) has
even resumed. That is right only when nothing but this app's own code would
have touched the reply:

- the app's ``on_response_prepare`` holds nothing but the boot-id stamp,
  which the bytes carry themselves;
- the app's middlewares are the ones ``create_app`` put there: a middleware
  an embedder adds may change ``response.headers`` after the handler
  returns, which bytes already written (or written by ``prepare`` from a
  cache) would not show;
- the app is not mounted under another (``add_subapp``, ``add_domain``):
  the outer app's ``on_response_prepare`` and middlewares run for the
  request too, and this app cannot see what they do.

The first two are read once, as the app starts (:meth:`Eligibility.decide`,
by ``app``'s last start-up step: what an embedder adds is in place by then);
the last is read per request, as one length. The app has one
:class:`Eligibility` (``ELIGIBILITY``), which the gets' and the watches'
replies hold (``GetReplies.eligible``, ``WatchReplies.eligible``): the one
responder (``responder``) calls it before any reply is announced or built (a
get, a registration's ``OK``, a woken get, a watch's long-poll and its
stream's events, a text or JSON ``200``), one call on a request's way, and
nothing else decides: no face asks it. A request
it refuses takes aiohttp's own way, whose bytes are the same (the tests
compare them header by header).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

__all__ = ["ELIGIBILITY", "Eligibility"]


class Eligibility:
    """Whether this app's replies may be pre-built, decided once at its start (see the top)."""

    __slots__ = ("_middlewares", "_stamp", "allowed")

    def __init__(self, stamp: object = None, middlewares: Sequence[Middleware] = ()) -> None:
        """``stamp``: the app's own ``on_response_prepare`` hook (the boot id, which the bytes carry);
        ``middlewares``: the app's own. Made with neither, it allows nothing until :meth:`decide`."""
        self._stamp = stamp
        self._middlewares = list(middlewares)
        self.allowed = False
        """Whether ``on_response_prepare`` and the middlewares are the app's own; ``False`` until it starts."""

    def decide(self, app: web.Application) -> bool:
        """Read the app's hooks as it starts: pre-built bytes only when they are all its own."""
        self.allowed = (
            list(app.on_response_prepare) == [self._stamp] and list(app.middlewares) == self._middlewares
        )
        return self.allowed

    def __call__(self, request: web.Request) -> bool:
        """Whether ``request``'s reply may be pre-built bytes: the app's hooks are its own and it is not mounted."""
        return self.allowed and len(request.match_info.apps) == 1


ELIGIBILITY = web.AppKey("eligibility", Eligibility)
"""Whether the app's replies may be pre-built (``create_app`` makes it, the start-up decides)."""
