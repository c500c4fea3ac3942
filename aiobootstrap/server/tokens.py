"""The tokens a server accepts and what each may do (SPEC section 12); no I/O.

A token file has one token per line, then its scopes::

    # team A's workers write their namespace; the monitor reads them all
    3f1c...e9  ns=team-a
    77b0...42  read

``ns=NAME[,NAME...]`` names the namespaces a token may touch (without it,
every one), ``read`` makes it read-only. Blank lines and lines that start
with ``#`` say nothing; a file of one bare token means what it always meant.
A line whose token is ``*`` scopes the requests that send *no* token, in the
namespaces it names (it must name some): engines that send none, such as
Mooncake's transfer engines, write their own namespace while every other
stays guarded::

    *  ns=mooncake-0

How a token is found: a :class:`TokenSet` keeps no token, only the SHA-256
digest of each, as the keys of a dict. A presented token is hashed, the
digest looked up, and then compared with what the lookup found (a decoy of
the same length when it found nothing) by one ``hmac.compare_digest``. A hit
and a miss do the same work, whatever the number of tokens, and nothing in
the time taken depends on where the presented token and a real one differ:
the dict's own probing sees only digests, and finding a token from its
digest is a preimage search. ``bench/token_lookup.py`` measures it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from .._names import NAME_RULE, is_name

__all__ = ["ANONYMOUS", "Scope", "TokenFileError", "TokenSet", "is_token"]

ANONYMOUS = "*"
"""A token file's word for the requests that send no token (see the top)."""


def is_token(text: str) -> bool:
    """Whether ``text`` may be a token: it travels in a header, so visible ASCII only, no spaces."""
    return bool(text) and text.isascii() and text.isprintable() and not any(c.isspace() for c in text)


@dataclass(frozen=True, slots=True)
class Scope:
    """What one token may do: read, or read and write, in some namespaces or in all."""

    namespaces: frozenset[str] | None = None
    """The namespaces the token may touch; ``None`` for every one."""
    read_only: bool = False
    """It may read and not write."""

    def __post_init__(self) -> None:
        if self.namespaces is None:
            return
        if isinstance(self.namespaces, str):  # a frozenset of its letters would pass for names
            raise TypeError("a scope's namespaces are a set of names, not one string")
        names = frozenset(self.namespaces)  # any iterable of names, kept as a frozenset
        object.__setattr__(self, "namespaces", names)
        if not names:
            raise ValueError("a scope names at least one namespace (None for every namespace)")
        for name in names:
            if not is_name(name):
                raise ValueError(f"{name[:80]!r} is not a namespace name: use {NAME_RULE}")

    def covers(self, namespace: str) -> bool:
        """Whether the token may touch ``namespace`` at all."""
        return self.namespaces is None or namespace in self.namespaces

    def describe(self) -> str:
        """What it covers, for a ``403``'s detail: ``namespaces team-a, team-b``."""
        if self.namespaces is None:
            return "every namespace"
        names = sorted(self.namespaces)
        return f"namespace{'s' if len(names) > 1 else ''} {', '.join(names)}"


EVERYTHING = Scope()
"""The scope of a bare token: read and write, every namespace."""

_MISS: tuple[bytes, Scope | None] = (bytes(hashlib.sha256().digest_size), None)
"""The entry a miss finds: a digest as long as a real one (equal to none in practice), and no scope."""


class TokenFileError(ValueError):
    """A token file that cannot be used; ``line`` is the line at fault (``None``: the file as a whole).

    The message names the line, never the token: it goes to a terminal and a log.
    """

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.line = line


class TokenSet:
    """Tokens and their scopes, looked up in constant time (see the module's docstring).

    ``TokenSet({"secret": Scope(frozenset({"team-a"}))})``, :meth:`single`,
    or :meth:`parse` of a token file's text. Its ``repr`` counts the tokens
    and shows none of them.
    """

    __slots__ = ("_entries", "anonymous")

    def __init__(self, tokens: Mapping[str, Scope], *, anonymous: Scope | None = None) -> None:
        """``anonymous``: what a request without a token may do (a file's ``*`` line); ``None``: nothing."""
        if not tokens and anonymous is None:
            raise ValueError("a token set holds at least one token")
        if anonymous is not None and anonymous.namespaces is None:
            raise ValueError("the scope of requests without a token names its namespaces")
        self.anonymous = anonymous
        for token in tokens:
            if not is_token(token):
                raise ValueError("an auth token must be non-empty printable ASCII without spaces")
        # Each entry keeps its digest beside the scope: the one comparison is against it.
        self._entries: dict[bytes, tuple[bytes, Scope | None]] = {}
        for token, scope in tokens.items():
            digest = _digest(token.encode("ascii"))
            self._entries[digest] = (digest, scope)

    @classmethod
    def single(cls, token: str) -> TokenSet:
        """One token that may do everything: ``--auth-token-file`` of one bare token, or the environment's."""
        return cls({token: EVERYTHING})

    @classmethod
    def parse(cls, text: str) -> TokenSet:
        """The tokens of a token file's ``text``; :class:`TokenFileError` names the first bad line."""
        tokens: dict[str, Scope] = {}
        anonymous: Scope | None = None
        seen: dict[str, int] = {}
        # Lines as an editor numbers them: split on newlines only, not on every
        # character str.splitlines() takes for a line break.
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            token, *words = line.split()
            if token == ANONYMOUS:
                if anonymous is not None:
                    raise TokenFileError(
                        number, f"a second {ANONYMOUS} line (name every namespace in one ns=A,B)"
                    )
                anonymous = _scope(number, words)
                if anonymous.namespaces is None:
                    raise TokenFileError(
                        number,
                        f"{ANONYMOUS} (requests without a token) must name its namespaces: ns=NAME[,NAME...]",
                    )
                continue
            if not is_token(token):
                raise TokenFileError(number, "the token holds a character that is not printable ASCII")
            if token in seen:
                raise TokenFileError(number, f"the same token as line {seen[token]}")
            seen[token] = number
            tokens[token] = _scope(number, words)
        if not tokens and anonymous is None:
            raise TokenFileError(None, "holds no token (every line is blank or a # comment)")
        return cls(tokens, anonymous=anonymous)

    def lookup(self, presented: bytes) -> Scope | None:
        """The scope of the token ``presented`` (the header's bytes), or ``None`` if it is not one."""
        digest = _digest(presented)
        # The same steps, hit or miss: a miss finds the decoy and compares with it.
        stored, scope = self._entries.get(digest, _MISS)
        return scope if hmac.compare_digest(digest, stored) else None

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TokenSet(<{len(self)} token{'s' if len(self) != 1 else ''}>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenSet) and self._entries == other._entries

    def __hash__(self) -> int:
        return hash(frozenset(self._entries))


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def _scope(number: int, words: list[str]) -> Scope:
    """The scope the words after a line's token give; :class:`TokenFileError` for a bad one.

    The words are not quoted back: one of them may be the rest of a token
    that holds a space.
    """
    namespaces: frozenset[str] | None = None
    read_only = False
    for position, word in enumerate(words, start=2):
        if word == "read":
            if read_only:
                raise TokenFileError(number, "read is given twice")
            read_only = True
        elif word.startswith("ns="):
            if namespaces is not None:
                raise TokenFileError(number, "ns= is given twice (name every namespace in one ns=A,B)")
            namespaces = _namespaces(number, word.removeprefix("ns="))
        else:
            raise TokenFileError(
                number,
                f"word {position} is not a scope (a scope is ns=NAME[,NAME...] or read; "
                "a token holds no spaces)",
            )
    return Scope(namespaces, read_only)


def _namespaces(number: int, names: str) -> frozenset[str]:
    listed = names.split(",")
    for position, name in enumerate(listed, start=1):
        if not is_name(name):
            raise TokenFileError(
                number, f"name {position} of ns= is not a namespace name (use {NAME_RULE}, commas between)"
            )
    return frozenset(listed)
