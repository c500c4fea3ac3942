"""The token file (SPEC section 12): its lines, its mistakes (exit 2, the line named, never the token),
the lookup by digest, and rotation on SIGHUP under a parked long-poll."""

from __future__ import annotations

import asyncio
import re
import signal
from typing import Any

import aiohttp
import pytest

from aiobootstrap import Scope, ServerConfig, TokenSet
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.server.tokens import TokenFileError

from .helpers.cli import _environ, launch, serve
from .helpers.waits import GUARD

SECRET = "s3cret-Token_42"


def _config(*argv: str, environ: dict[str, str] | None = None) -> ServerConfig:
    """The config ``python -m aiobootstrap ARGV`` would serve with, in ``environ``."""
    return server_config(server_parser().parse_args(list(argv)), environ or {})


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
    assert SECRET.encode() not in b"".join(tokens._entries)
    assert tokens.lookup(SECRET.encode()) == Scope()
    assert tokens.lookup(SECRET.encode()[:-1]) is None
    assert tokens.lookup(b"") is None


# -- the CLI ---------------------------------------------------------------------


def test_the_one_token_file_and_the_variable_read_as_before(tmp_path):
    """A one-token file is that one token for everything; the variable is one token; the file wins."""
    path = tmp_path / "token"
    path.write_text(f"{SECRET}\n")
    from_file = _config("--auth-token-file", str(path), environ={"AIOBOOTSTRAP_AUTH_TOKEN": "from-env"})
    assert from_file.tokens == TokenSet.single(SECRET)
    from_env = _config(environ={"AIOBOOTSTRAP_AUTH_TOKEN": f" {SECRET}\n"})
    assert from_env.auth_token == SECRET
    assert from_env.tokens == TokenSet.single(SECRET)
    assert _config().tokens is None


def test_auth_reads_open_is_read_from_the_command_line(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("writer ns=team-a\n")
    assert _config("--auth-token-file", str(path), "--auth-reads", "open").auth_reads == "open"
    with pytest.raises(ValueError, match="open reads"):
        _config("--auth-reads", "open")


def test_every_kind_of_malformed_file_stops_the_cli_with_exit_2_naming_the_line(tmp_path):
    """One stderr line naming the file and the line number, never the token; exit status 2; nothing served."""
    processes = {}
    for number, (name, (text, line, says)) in enumerate(MALFORMED.items()):
        path = tmp_path / f"tokens-{number}"
        path.write_text(text)
        processes[name] = (
            launch("--port", "0", "--auth-token-file", str(path), env=_environ()),
            path,
            line,
            says,
        )
    for name, (process, path, line, says) in processes.items():
        out, err = process.communicate(timeout=GUARD)
        assert process.returncode == 2, (name, err)
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert f"the auth token file {path}, line {line}: " in err, err
        assert says in err
        assert SECRET[:6] not in err
        assert SECRET[6:] not in err


# -- rotation on SIGHUP -------------------------------------------------------------


async def _stderr_line(process: object, wanted: str) -> str:
    """The next line of the server's stderr that holds ``wanted`` (read in a thread, with the guard)."""

    def read() -> str:
        stream = process.stderr  # type: ignore[attr-defined]
        while line := stream.readline():
            if wanted in line:
                return str(line)
        return ""

    async with asyncio.timeout(GUARD):
        return await asyncio.to_thread(read)


async def test_sighup_rotates_tokens_under_a_parked_long_poll(tmp_path):
    """A leaked token rotated out with kill -HUP: refused at once, the new one works, the parked wait is answered.

    A bad file then keeps the set in force, with one ERROR line.
    """
    path = tmp_path / "tokens"
    path.write_text("leaked-token\nworker-token ns=team-a\n")
    served = serve("--log-level", "info", "--auth-token-file", str(path), env=_environ())
    url = served.url
    try:
        async with aiohttp.ClientSession() as session:

            def auth(token: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {token}"}

            async def status(method: str, path: str, token: str, **kwargs: Any) -> int:
                async with session.request(method, url + path, headers=auth(token), **kwargs) as reply:
                    return reply.status

            async def wait_for_rank() -> tuple[int, dict[str, object]]:
                target = f"{url}/ns/team-a/get_transfer_engine_info?rank=3&wait=60"
                async with session.get(target, headers=auth("leaked-token")) as reply:
                    return reply.status, await reply.json()

            async def parked() -> int:
                async with session.get(f"{url}/ns/team-a/ranks", headers=auth("worker-token")) as reply:
                    return int((await reply.json())["waiters"])

            waiter = asyncio.create_task(wait_for_rank())
            async with asyncio.timeout(GUARD):
                while await parked() < 1:
                    pass
            path.write_text("# rotated: the leaked token is gone\nworker-token ns=team-a\nnew-token\n")
            served.process.send_signal(signal.SIGHUP)
            assert "2 auth tokens in force" in await _stderr_line(served.process, "SIGHUP")
            assert await status("GET", "/ranks", "leaked-token") == 401
            assert await status("GET", "/ranks", "new-token") == 200
            assert not waiter.done(), "the parked wait was let go by the rotation"
            body = {
                "rank": 3,
                "transfer_engine_info": {"session_id": "after-rotation", "weights_info_dict": {}},
            }
            assert (
                await status("PUT", "/ns/team-a/register_transfer_engine_info", "worker-token", json=body)
                == 200
            )
            answered, info = await asyncio.wait_for(waiter, GUARD)
            assert answered == 200
            assert info["remote_instance_transfer_engine_info"] == ["after-rotation", {}]

            path.write_text("new-token ns=Not/A/Name\n")
            served.process.send_signal(signal.SIGHUP)
            error = await _stderr_line(served.process, "SIGHUP")
            assert "ERROR" in error
            assert re.search(r"line 1: .*unchanged", error)
            assert "new-token" not in error
            assert await status("GET", "/ranks", "new-token") == 200
    finally:
        served.process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(served.process.communicate, timeout=GUARD)
    assert served.process.returncode == 0, stderr
    assert "leaked-token" not in stderr
    assert "worker-token" not in stderr
