"""A token file's ``*`` line: requests without a token (Mooncake's engines send none) write the namespaces
it names, while every other namespace, and the server's own routes, still need a token."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.tokens import TokenFileError, TokenSet

FILE = "admin-secret\n*  ns=mooncake-0,mooncake-1\n"
ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
async def guarded(aiohttp_client: Any) -> Any:
    return await aiohttp_client(create_app(ServerConfig(auth_tokens=TokenSet.parse(FILE))))


async def test_engines_without_a_token_write_their_namespace_only(guarded: Any) -> None:
    put = await guarded.put("/ns/mooncake-0/metadata?key=mooncake/ram/a", data=b"{}")
    assert (put.status, await put.text()) == (200, "metadata updated")
    assert (await guarded.get("/ns/mooncake-1/metadata?key=mooncake/ram/a")).status == 404
    for path in ("/metadata?key=k", "/ns/team-a/metadata?key=k"):
        refused = await guarded.put(path, data=b"{}")
        assert refused.status == 401
        assert (await refused.json())["detail"] == "This server requires an Authorization: Bearer token."
    assert (await guarded.get("/metrics")).status == 401  # the server's own routes: a known token
    assert (await guarded.put("/metadata?key=k", data=b"{}", headers=ADMIN)).status == 200
    wrong = await guarded.put(
        "/ns/mooncake-0/metadata?key=k", data=b"{}", headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status == 401  # a wrong token is refused, not taken for no token


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("admin\n*\n", "must name its namespaces"),
        ("admin\n* read\n", "must name its namespaces"),
        ("admin\n* ns=a\n* ns=b\n", r"a second \* line"),
    ],
)
def test_a_bad_star_line_names_itself(text: str, says: str) -> None:
    with pytest.raises(TokenFileError, match=says):
        TokenSet.parse(text)


def test_a_file_of_only_a_star_line_guards_every_other_namespace() -> None:
    tokens = TokenSet.parse("*  ns=mooncake-0 read\n")
    assert tokens.anonymous is not None
    assert tokens.anonymous.read_only
    assert len(tokens) == 0
