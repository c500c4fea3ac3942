"""The token file (``--auth-token-file``), read from disk: at start, and again on ``SIGHUP``."""

from __future__ import annotations

from ..server.tokens import TokenFileError, TokenSet

__all__ = ["read_token_file"]


def read_token_file(path: str) -> TokenSet:
    """The tokens of the token file at ``path``; a ``ValueError`` names the file and the line, never a token.

    Read at start and again on ``SIGHUP``.
    """
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ValueError(f"cannot read the auth token file {path}: {reason}") from None
    if not text.strip():
        raise ValueError(f"the auth token file {path} is empty")
    try:
        return TokenSet.parse(text)
    except TokenFileError as exc:
        where = "," if exc.line is not None else ""
        raise ValueError(f"the auth token file {path}{where} {exc}") from None
