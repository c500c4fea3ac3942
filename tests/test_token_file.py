"""The token file (SPEC section 12): its lines, its mistakes (the line named, never the token), the lookup by digest."""

from __future__ import annotations

import pytest

from aiobootstrap import Scope, TokenSet
from aiobootstrap.server.tokens import TokenFileError

SECRET = "s3cret-Token_42"


# -- what a line says ----------------------------------------------------------


def test_a_file_of_one_bare_token_is_one_token_for_everything():
    """Today's one-token file means what it always meant: read and write, every namespace."""
    assert TokenSet.parse(f"  {SECRET}  \n\n") == TokenSet.single(SECRET)
    assert TokenSet.parse(SECRET).lookup(SECRET.encode()) == Scope()


def test_scopes_comments_and_blank_lines():
    """ns= names namespaces, read makes a token read-only, in either order; # lines and blank ones say nothing."""
    tokens = TokenSet.parse(
        "# the teams\r\n"
        "\n"
        "team-a-token ns=team-a\r\n"
        "both-token\tns=team-b,team-c   read\n"
        "monitor-token read\n"
        "   # indented comment\n"
        "reader-b read ns=team-b\n"
    )
    assert len(tokens) == 4
    assert tokens.lookup(b"team-a-token") == Scope(frozenset({"team-a"}))
    assert tokens.lookup(b"both-token") == Scope(frozenset({"team-b", "team-c"}), read_only=True)
    assert tokens.lookup(b"monitor-token") == Scope(read_only=True)
    assert tokens.lookup(b"reader-b") == Scope(frozenset({"team-b"}), read_only=True)
    assert tokens.lookup(b"# the teams") is None
    assert tokens.lookup(b"team-a-token ") is None


MALFORMED = {
    "non-printable": ("ok-token\nbad\x01token ns=a\n", 2, "not printable ASCII"),
    "non-ascii": ("ok-token\n# fine\nünïcode-token\n", 3, "not printable ASCII"),
    "a space in the token": (f"{SECRET[:6]} {SECRET[6:]}\n", 1, "word 2 is not a scope"),
    "unknown scope": (f"{SECRET} ns=a raed\n", 1, "word 3 is not a scope"),
    "bad namespace": (f"{SECRET} ns=team-a,Bad!\n", 1, "name 2 of ns= is not a namespace name"),
    "empty ns=": (f"ok\n{SECRET} ns=\n", 2, "name 1 of ns= is not a namespace name"),
    "empty name": (f"{SECRET} ns=a,,b\n", 1, "name 2 of ns="),
    "ns twice": (f"{SECRET} ns=a ns=b\n", 1, "ns= is given twice"),
    "read twice": (f"{SECRET} read read\n", 1, "read is given twice"),
    "the same token twice": (f"{SECRET} ns=a\nother\n{SECRET} read\n", 3, "the same token as line 1"),
}
"""Each kind of malformed file: its text, the line at fault, and what the message says."""


@pytest.mark.parametrize(("text", "line", "says"), MALFORMED.values(), ids=MALFORMED)
def test_a_malformed_line_is_named_by_number_never_by_its_token(text, line, says):
    """The error names the line and the mistake; no part of the token is quoted back."""
    with pytest.raises(TokenFileError) as caught:
        TokenSet.parse(text)
    message = str(caught.value)
    assert caught.value.line == line
    assert message.startswith(f"line {line}: ")
    assert says in message
    for part in (SECRET, SECRET[:6], SECRET[6:], "bad\x01token", "ünïcode-token"):
        assert part not in message


@pytest.mark.parametrize("text", ["# only a comment\n", "\n  \n# and another\n"])
def test_a_file_of_comments_holds_no_token(text):
    with pytest.raises(TokenFileError, match="holds no token") as caught:
        TokenSet.parse(text)
    assert caught.value.line is None


def test_scopes_and_sets_are_checked_when_made_in_python():
    """The Python spelling refuses what the file refuses."""
    with pytest.raises(ValueError, match="not a namespace name"):
        Scope(frozenset({"Bad!"}))
    with pytest.raises(ValueError, match="at least one namespace"):
        Scope(frozenset())
    with pytest.raises(TypeError, match="not one string"):
        Scope("team-a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="printable ASCII"):
        TokenSet({"two words": Scope()})
    with pytest.raises(ValueError, match="at least one token"):
        TokenSet({})


def test_a_token_set_keeps_and_shows_no_token():
    """Its repr counts; its slots hold digests, not the tokens."""
    tokens = TokenSet({SECRET: Scope(), "other-token": Scope(read_only=True)})
    assert repr(tokens) == "TokenSet(<2 tokens>)"
    assert SECRET not in repr(tokens)
    assert SECRET.encode() not in b"".join(tokens._scopes)
    assert tokens.lookup(SECRET.encode()) == Scope()
    assert tokens.lookup(SECRET.encode()[:-1]) is None
    assert tokens.lookup(b"") is None
