"""A store URL fit for a log line: its password hidden.

A leaf of the store: the URL parser and the Redis store both name a URL in
their messages, and neither imports the other for it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["describe"]

_QUERY_PASSWORD = re.compile(r"((?:^|&)[^&=]*(?:pas|pwd)[^&=]*=)[^&]*", re.IGNORECASE)
"""A password in the query: redis-py's (``unix:///path?password=``), the Sentinels' own
(``sentinel_password=``), and any misspelling of them, which an error message names."""


def describe(url: str) -> str:
    """``url`` without its password, for logs and error messages."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
        query = _QUERY_PASSWORD.sub(r"\1***", parts.query)
        if (netloc, query) == (parts.netloc, parts.query):
            return url
        # By hand: geturl() drops the empty authority of unix:///path.
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        # Too malformed to split: say only the scheme, which holds no secret.
        scheme = url.partition(":")[0]
        return f"{scheme}://..."
