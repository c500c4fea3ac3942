"""The docs' runnable blocks, run as written against a real server (issue 19's doc-test).

A fenced block right after a ``<!-- runnable -->`` line, in README.md or
docs/*.md, is run: a ``console`` block as one bash script of its ``$ ``
commands (continued by a trailing ``\\``), the other lines being the output
it must print; a ``python`` block as a script, its output the ``text`` block
after a later ``<!-- output -->`` line, if there is one. Each must exit 0.

Each document's blocks run in order, in one scratch directory, against one
server of their own (``python -m aiobootstrap --port 0``, which does not
probe encoder URLs: the docs' encoders do not exist, and evicting one would
change the versions shown), as a reader runs them in one terminal: a shell
variable a console block sets is set in the later blocks, and a background
job (a second server, a Redis) runs until the document's last block has
run. The docs' ports (6789, and 6380, 6790, 6791) become free ones, and a
tool given no ``--url`` gets the server's. The lines ``aiobootstrap
listening on ...`` that servers started in a block print are not output
the block shows.

Shown output is matched line by line, with two wildcards for what cannot
repeat from run to run: ``…`` in a line stands for any text, or none (a
lease id, an age, a boot id, a date, a pid found best effort), and a line
that is only ``...`` for any number of lines (headers a ``curl -i`` example
leaves out).

Every console, shell or python block of README.md and docs/*.md (and every
block of no language that opens with a ``$ `` prompt) is either runnable or
listed in ``NOT_RUN`` with the reason it cannot run here, so a new example
left unmarked by accident fails ``test_every_example_is_run_or_excused``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.ports import quiet_port

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = "<!-- runnable -->"
OUTPUT = "<!-- output -->"
PORTS = (
    "6789", "6380", "6790", "6791", "7400", "7401", "27400", "27401", "27402", "7790", "7791", "12379", "12380"
)  # fmt: skip
"""The ports the docs name: 6789 becomes the test's server, the others free ports."""
_PORT = re.compile(r"(?<!\d)(" + "|".join(PORTS) + r")(?!\d)")
_TOOL = re.compile(r"(-m aiobootstrap (?:get|register|status|wait|watch))(?![\w-])")
LISTENING = "aiobootstrap listening on "
GUARD = 120.0
"""Seconds a block may take: the Sentinel quick start's failover takes 15 s alone, more on a loaded machine."""


@dataclasses.dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    output: str | None = None  # a python block's, from its <!-- output --> block

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _fenced(lines: list[str], at: int, path: Path) -> tuple[str, str, int]:
    """The language, text and end of the fenced block opening at or after ``lines[at]``."""
    while not lines[at].strip():
        at += 1
    fence = lines[at]
    assert fence.startswith("```"), f"{path}:{at + 1}: a marker must be followed by a fenced block"
    end = lines.index("```", at + 1)
    return fence[3:].strip(), "\n".join(lines[at + 1 : end]) + "\n", end


def blocks(path: Path) -> list[Block]:
    """The runnable blocks of ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    at = 0
    while at < len(lines):
        marker = lines[at].strip()
        if marker == RUNNABLE:
            language, text, end = _fenced(lines, at + 1, path)
            found.append(Block(path, at + 2, language, text))
            at = end
        elif marker == OUTPUT:
            assert found, f"{path}:{at + 1}: an output block with no runnable block before it"
            _, found[-1].output, at = _fenced(lines, at + 1, path)
        at += 1
    return found


COMMANDS = {"console", "sh", "shell", "bash", "python"}
"""The languages of blocks that hold commands a reader runs."""


def unmarked(path: Path) -> list[tuple[str, str]]:
    """The command blocks of ``path`` not marked runnable: its name and each one's first line.

    A command block is one of ``COMMANDS``, or one of no language whose first line is a ``$ `` prompt.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[tuple[str, str]] = []
    before = ""  # the last non-blank line before a fence
    at = 0
    while at < len(lines):
        line = lines[at]
        if line.startswith("```"):
            end = lines.index("```", at + 1)
            language = line[3:].strip()
            prompt = not language and lines[at + 1].startswith("$ ")
            if (language in COMMANDS or prompt) and before not in (RUNNABLE, OUTPUT):
                found.append((str(path.relative_to(ROOT)), lines[at + 1].strip()))
            before, at = "```", end + 1
            continue
        if line.strip():
            before = line.strip()
        at += 1
    return found


_ENGINE = (
    "an excerpt of an engine's code, before or after the switch: url, rank, host and port are the engine's"
)
_FRAGMENT = "a fragment of a worker: rank, weights, use() and serve_forever() are the reader's"
_BENCH = "a benchmark: minutes of load on a quiet machine, the figures docs/benchmarks.md holds"
NOT_RUN: dict[str, list[tuple[str, str]]] = {
    "README.md": [
        ("$ make run ", "the two make targets: creating .venv, the whole suite (the doc-test runs inside it)")
    ],
    "docs/benchmarks.md": [
        ("make test ", _BENCH),
        ("mkdir -p /tmp/wake-before ", "a benchmark against a <commit> of the reader's choice"),
        ("make soak ", _BENCH),
        ("git archive f964acf ", _BENCH),
        (".venv/bin/python -m bench.server_faults ", _BENCH),
        (".venv/bin/python -m bench.soak ", _BENCH),
    ],
    "docs/cli.md": [("$ python -m aiobootstrap [serve] [options]", "the synopsis, not a command")],
    "docs/client.md": [
        ("await client.register(", _FRAGMENT),
        ("report = await client.encoder_url_health()", _FRAGMENT),
        ("urls = await client.wait_encoder_urls(", _FRAGMENT),
        ("async for change in client.watch():", _FRAGMENT),
        ("async with BootstrapClient(url) as client:", _FRAGMENT),
        ("with SyncBootstrapClient(url) as client, client.lease(", _FRAGMENT),
    ],
    "docs/durability.md": [
        ("$ python -m aiobootstrap --state-file /var/lib/", "serves until stopped, from a system directory"),
        ("$ .venv/bin/python -m bench.durability", _BENCH),
    ],
    "docs/migrating.md": [
        ("from myengine.bootstrap import", _ENGINE),
        ("from aiobootstrap import ThreadedBootstrapServer", _ENGINE),
        *[("while True:", _ENGINE)] * 4,
        ("from aiobootstrap import RankNotRegistered, SyncBootstrapClient", _ENGINE),
        ("server = EngineInfoBootstrapServer(", _ENGINE),
        ("server = ThreadedBootstrapServer(", _ENGINE),
        ("from sglang.srt.disaggregation.encode_receiver import", _ENGINE),
        ("from aiobootstrap import EncoderBootstrapServer", _ENGINE),
        ("# encoder", _ENGINE),
        ("version = 0", _ENGINE),
        *[("from aiobootstrap import SyncBootstrapClient", _ENGINE)] * 2,
        ("with SyncBootstrapClient(url) as client:", _ENGINE),
        ("from aiobootstrap import PrefillBootstrapServer", _ENGINE),
        ("$ export MC_METADATA_SERVER=", _ENGINE),
    ],
    "docs/operations.md": [('async with BootstrapClient("http://10.0.0.1:6789", namespace=', _FRAGMENT)],
    "docs/scale-out.md": [("$ .venv/bin/python -m bench.store_redis", _BENCH)],
}
"""The command blocks left unmarked on purpose, by document: how each begins, and why it cannot run here."""


def console(text: str, variables: Path) -> tuple[str, str]:
    """A console block's commands, as a script keeping its variables in ``variables``, and the output it shows."""
    commands: list[str] = []
    shown: list[str] = []
    continued = False
    for line in text.splitlines():
        if continued:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            shown.append(line)
            continue
        continued = line.endswith("\\")
    # set -a exports what the block assigns, so export -p hands it to the next block.
    before = f"set -eo pipefail -a\n[ ! -f {variables} ] || . {variables}\n"
    # Not the shell's own: a block that cd'd would hand on a PWD that is not the next one's.
    after = f"\nexport -n PWD OLDPWD SHLVL\nexport -p > {variables}\n"
    return before + "\n".join(commands) + after, "".join(f"{line}\n" for line in shown)


_WAIT = re.compile(r"(?:^\$ |[;&|] *)wait\b", re.MULTILINE)
"""A ``wait`` command in a console block (``$ wait; cat ...``), not the word in a URL (``&wait=60``)."""

STOPPING = 10.0
"""Seconds a stopped background job may take to end (a watch unwinds a parked long-poll for up to one)."""

ANY_TEXT = "…"
ANY_LINES = "..."


def matches(printed: str, shown: str) -> bool:
    """Whether ``printed`` is the ``shown`` output, its wildcards matching anything."""
    pattern = "".join(
        r"(?:.*\n)*?"
        if line.strip() == ANY_LINES
        else ".*?".join(re.escape(part) for part in line.split(ANY_TEXT)) + r"\n"
        for line in shown.splitlines()
    )
    return re.fullmatch(pattern, printed) is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Reader:
    """One document's run: its server, its ports, its scratch directory."""

    def __init__(self, server_port: str, directory: Path) -> None:
        taken: set[int] = set()
        self.ports = {port: str(quiet_port(taken)) for port in PORTS}
        self.ports["6789"] = server_port
        self.url = f"http://127.0.0.1:{server_port}"
        self.directory = directory
        self.sessions: list[int] = []  # each block's, holding its background jobs

    def still_running(self) -> list[str]:
        """The processes the blocks started that still run (a server, a Redis, a curl left waiting).

        In one terminal, they are that shell's jobs: a later ``wait`` would wait
        for them for ever, and a later server on their port would find it taken.
        A job just stopped (``kill $!``) is given a few seconds to end, as the
        terminal's ``wait`` would give it.
        """
        deadline = time.monotonic() + STOPPING
        while (left := self._running()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return left

    def _running(self) -> list[str]:
        if not self.sessions:
            return []
        listed = subprocess.run(
            ["ps", "-ww", "-o", "stat=,args=", "--sid", ",".join(map(str, self.sessions))],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        # A zombie is done: only its parent, already gone, had to reap it.
        return [line.split(None, 1)[-1] for line in listed.splitlines() if not line.lstrip().startswith("Z")]

    def close(self) -> None:
        """Stops the background jobs (servers, a Redis) the blocks started, as the reader's terminal would."""
        for session in self.sessions:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(session, signal.SIGTERM)

    def substitute(self, text: str) -> str:
        text = _PORT.sub(lambda match: self.ports[match.group(1)], text)
        text = text.replace(".venv/bin/python", sys.executable)
        text = text.replace("/tmp/aiobootstrap-redis", str(self.directory / "redis"))
        text = text.replace("/tmp/aiobootstrap-sentinel", str(self.directory / "sentinel"))
        text = text.replace("/tmp/aiobootstrap-etcd", str(self.directory / "etcd"))
        return "\n".join(
            _TOOL.sub(rf"\1 --url {self.url}", line) if "--url" not in line else line
            for line in text.split("\n")
        )

    def run(self, block: Block) -> None:
        shown: str | None
        if block.language == "console":
            script, shown = console(self.substitute(block.text), self.directory / ".variables")
            command = ["bash", "-c", script]
        elif block.language == "python":
            script, shown = self.substitute(block.text), block.output
            command = [sys.executable, "-c", script]
        else:
            pytest.fail(f"{block}: a runnable block is console or python, not {block.language!r}")
        if _WAIT.search(block.text):
            left = self.still_running()
            assert not left, f"{block} waits for every job of the terminal, and these still run: {left}"
        # A file per block: a background job of an earlier block still holds its own.
        printed = self.directory / f".printed-{block.line}"
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        with printed.open("w") as out:
            process = subprocess.Popen(
                command,
                cwd=self.directory,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            self.sessions.append(process.pid)
            try:
                status = process.wait(GUARD)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{block} still ran after {GUARD} s:\n{printed.read_text()}")
        output = printed.read_text()
        assert status == 0, f"{block} exited {status}:\n{output}"
        if shown is not None and (block.language == "python" or shown):
            # curl -i prints the headers' CRLF; the doc shows lines.
            seen = "".join(
                f"{line.rstrip(chr(13))}\n" for line in output.splitlines() if not line.startswith(LISTENING)
            )
            assert matches(seen, shown), f"{block} printed:\n{output}\nnot what the doc shows:\n{shown}"


@pytest.fixture
def server() -> Iterator[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aiobootstrap",
            "--port",
            "0",
            "--log-level",
            "warning",
            "--encoder-health-interval",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(LISTENING), line
    yield line.rsplit(":", 1)[1].strip()
    process.terminate()
    process.wait(GUARD)
    process.stdout.close()


RUN = [path for path in DOCUMENTS if blocks(path)]


@pytest.mark.parametrize("path", RUN, ids=[str(path.relative_to(ROOT)) for path in RUN])
def test_the_runnable_blocks_run_as_written(path: Path, server: str, tmp_path: Path) -> None:
    """Each runnable block of the document exits 0 and prints the output the document shows."""
    if "redis-server" in path.read_text() and shutil.which("redis-server") is None:
        pytest.skip("the document starts a redis-server, and none is installed")
    if "$ etcd " in path.read_text() and shutil.which("etcd") is None:
        pytest.skip("etcd is not installed, and the document starts one (Debian: etcd-server)")
    reader = Reader(server, tmp_path)
    try:
        for block in blocks(path):
            reader.run(block)
        # Read in one terminal, a document stops what it started: a later document's --port or wait meets it.
        assert not reader.still_running(), f"{path.name} leaves these running: {reader.still_running()}"
    finally:
        reader.close()


def test_the_readme_and_the_docs_have_runnable_blocks() -> None:
    """The README's, the API reference's, the tools', the client's, the embedder's, the logs' and the Redis quick start's run."""
    names = {path.name: len(blocks(path)) for path in RUN}
    assert names.get("README.md", 0) >= 4, names
    assert names.get("api.md", 0) >= 30, names
    assert names.get("cli.md", 0) >= 10, names
    assert {"client.md", "embedding.md", "logging.md", "scale-out.md"} <= names.keys(), names


_UNBOUNDED_WAIT = re.compile(
    r"^\$ until .*(listening|/ready|/health|\bping\b|endpoint health|master_link_status|held)"
)


def test_a_wait_for_a_server_to_start_is_bounded() -> None:
    """A loop that waits for a server the block started ends when the server failed to start (``timeout 30 bash
    -c 'until ...'``), where a bare ``until`` loop spins for ever in a reader's terminal."""
    unbounded = [
        f"{block}: {line}"
        for path in RUN
        for block in blocks(path)
        for line in block.text.splitlines()
        if _UNBOUNDED_WAIT.search(line)
    ]
    assert not unbounded, unbounded


def test_every_example_is_run_or_excused() -> None:
    """A console, shell or python block is marked runnable, or NOT_RUN names it with its reason; no excuse outlives its block."""
    found = {str(path.relative_to(ROOT)): [first for _, first in unmarked(path)] for path in DOCUMENTS}
    for document in sorted(found.keys() | NOT_RUN.keys()):
        excused = [start for start, _ in NOT_RUN.get(document, [])]
        left = list(found.get(document, []))
        stale = []
        for start in excused:
            match = next((first for first in left if first.startswith(start)), None)
            if match is None:
                stale.append(start)
            else:
                left.remove(match)
        assert not left, (
            f"{document}: mark these blocks runnable, or say in NOT_RUN why they cannot run: {left}"
        )
        assert not stale, f"{document}: NOT_RUN excuses blocks that are gone or now run: {stale}"


def test_the_docs_cite_no_spec() -> None:
    """The docs stand on their own: none cites the SPEC, a document that is not in the repository (issue 19, item 6)."""
    citing = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in DOCUMENTS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bSPEC\b", line)
    ]
    assert not citing, citing


def test_every_server_config_field_is_in_embedding_md() -> None:
    """docs/embedding.md's table of ServerConfig names every field."""
    from aiobootstrap import ServerConfig

    text = (ROOT / "docs" / "embedding.md").read_text()
    missing = [f.name for f in dataclasses.fields(ServerConfig) if f"| `{f.name}` |" not in text]
    assert not missing, missing


def test_every_public_error_is_in_client_md_s_tree() -> None:
    """docs/client.md's error tree names every error aiobootstrap exports."""
    import aiobootstrap.exceptions

    text = (ROOT / "docs" / "client.md").read_text()
    tree = text[text.index("## Errors") :]
    errors = [
        name
        for name in aiobootstrap.exceptions.__all__
        if isinstance(getattr(aiobootstrap.exceptions, name), type)
    ]
    missing = [name for name in errors if name not in tree]
    assert not missing, missing


def test_the_readme_client_example_without_a_server_ends_with_its_one_error() -> None:
    """Run with no server up (timeouts cut to 0.5 s), the example ends in ServerUnavailable, no task left behind."""
    (example,) = [block for block in blocks(ROOT / "README.md") if block.language == "python"]
    script = example.text.replace("6789", str(free_port())).replace("timeout=60.0", "timeout=0.5")
    assert "timeout=0.5" in script
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=GUARD)
    assert result.returncode == 1
    assert "ServerUnavailable" in result.stderr
    assert "never retrieved" not in result.stderr
