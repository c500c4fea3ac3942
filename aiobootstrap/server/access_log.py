"""The access log (``--access-log``): aiohttp's line per request, with refusals held to a rate.

A refused request (a bad body, a bad token, a method the route lacks) costs
its sender one request and the log a line of about 300 bytes: a flood of
them would fill the disk at the sender's pace. At most
:data:`REFUSALS_A_SECOND` such lines are written a second; the next one
written after some were held back is preceded by a line saying how many.
Answers that are no refusal (a ``404`` of a rank not registered yet, which
polling getters ask for in their thousands, a ``409``, a ``410``) are
logged as they come, as is every other reply: the access log was asked for.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.web_log import AccessLogger

from .._logging import RateLimit

__all__ = ["ACCESS_LOG_FORMAT", "REFUSALS_A_SECOND", "RefusalsLimitedAccessLogger"]

ACCESS_LOG_FORMAT = '%a "%r" %s %b %Tf'
"""Client, request line, status, bytes, seconds: a long-poll's line shows how long it waited."""

REFUSALS_A_SECOND = 10
"""The most lines of refused requests the access log writes a second."""

_ANSWERS = frozenset({404, 409, 410})
"""Client-error statuses that answer a well-formed question (not there, taken, gone): not refusals."""


class RefusalsLimitedAccessLogger(AccessLogger):
    """aiohttp's access logger, its lines of refused requests (``4xx`` but :data:`_ANSWERS`) rate-limited."""

    def __init__(self, logger: logging.Logger, log_format: str = ACCESS_LOG_FORMAT) -> None:
        super().__init__(logger, log_format)
        self._refusals = RateLimit(1 / REFUSALS_A_SECOND)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if 400 <= response.status < 500 and response.status not in _ANSWERS:
            held = self._refusals.admit()
            if held is None:
                return
            if held:
                self.logger.info(
                    "%d refused requests were not logged (at most %d lines a second)", held, REFUSALS_A_SECOND
                )
        super().log(request, response, time)
