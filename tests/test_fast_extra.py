"""The `fast` extra is optional: without orjson and uvloop the server runs the same protocol."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

from aiobootstrap.cli.main import loop_factory

_WITHOUT_EXTRAS = (
    "import sys\n"
    "sys.modules['orjson'] = None\n"
    "sys.modules['uvloop'] = None\n"
    "from aiobootstrap import _json\n"
    "from aiobootstrap.cli.main import main\n"
    "assert _json.orjson is None\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def test_loop_factory_is_none_without_uvloop(monkeypatch):
    """Without uvloop importable, the CLI runs on asyncio's own loop."""
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert loop_factory() is None


def test_server_without_orjson_and_uvloop_registers_and_answers():
    """A server whose optional speed-ups cannot be imported still registers, answers and stops cleanly."""
    with subprocess.Popen(
        [sys.executable, "-c", _WITHOUT_EXTRAS, "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("aiobootstrap listening on http://"), line
            url = line.split()[-1]
            body = json.dumps(
                {"rank": 2, "transfer_engine_info": {"session_id": "é:1", "weights_info_dict": {"w": [1, 2]}}}
            ).encode()
            request = urllib.request.Request(f"{url}/register_transfer_engine_info", data=body, method="PUT")
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.read() == b"OK"
            with urllib.request.urlopen(f"{url}/get_transfer_engine_info?rank=2", timeout=10) as response:
                reply = json.loads(response.read())
            assert reply["remote_instance_transfer_engine_info"] == ["é:1", {"w": [1, 2]}]
        finally:
            process.send_signal(signal.SIGTERM)
            _, errors = process.communicate(timeout=10)
        assert process.returncode == 0, errors
