"""The engine plugins' settings (SPEC section 16), with no engine installed: installed is not enabled.

What is enabled and by what, the ``AIOBOOTSTRAP_*`` variables read as ``serve``'s options (one parser: the
command line's), a bad setting as one line naming it, the entry points declared, and a plugin that finds
no engine (every target missing) as one ``WARNING`` per target and no exception. The plugins inside the
engines' released code are the compat suite's (``compat/tests/test_sglang_plugin.py``,
``compat/tests/test_vllm_plugin.py``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import requests

from aiobootstrap import EncoderBootstrapServer, PrefillBootstrapServer, ThreadedBootstrapServer
from aiobootstrap.cli.parser import STORE_ENV, server_config, server_parser
from aiobootstrap.plugins import settings, sglang, switch, vllm
from aiobootstrap.plugins.dropins import drop_in, is_drop_in
from aiobootstrap.plugins.sglang_targets import ServedElsewhere
from aiobootstrap.server.config import ServerConfig
from aiobootstrap.server.faces.prefill.settings import PrefillSettings
from testbed.ports import quiet_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from an environment without any aiobootstrap setting."""
    for name in list(os.environ):
        if name.startswith(settings.PREFIX):
            monkeypatch.delenv(name)


# ---- installed is not enabled ----


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"AIOBOOTSTRAP_ENGINE": "1"}, True),
        ({"AIOBOOTSTRAP_ENGINE": "true"}, True),
        ({"AIOBOOTSTRAP_STORE": "redis://10.0.0.1:7000/0"}, True),
        ({"AIOBOOTSTRAP_STORE": "redis://10.0.0.1:7000/0", "AIOBOOTSTRAP_ENGINE": "0"}, False),
        ({"AIOBOOTSTRAP_STORE": "redis://10.0.0.1:7000/0", "AIOBOOTSTRAP_ENGINE": ""}, True),
        ({"AIOBOOTSTRAP_STORE": " "}, False),
        ({"AIOBOOTSTRAP_AUTH_TOKEN": "s3cret"}, False),
        ({"AIOBOOTSTRAP_MAX_WAIT": "30", "AIOBOOTSTRAP_NAMESPACE": "pd-0"}, False),
        ({"AIOBOOTSTRAP_ENGINE": "0"}, False),
    ],
)
def test_only_the_switch_or_a_store_enables_the_plugins(environ: dict[str, str], expected: bool) -> None:
    assert switch.enabled(environ) is expected


def test_a_switch_neither_on_nor_off_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^AIOBOOTSTRAP_ENGINE must be 1 \(on\) or 0 \(off\), not 'maybe'$"):
        switch.enabled({"AIOBOOTSTRAP_ENGINE": "maybe"})


def test_the_switch_names_the_command_lines_store_variable() -> None:
    """switch.py names the variable itself (it imports nothing of the package): the CLI's own."""
    assert switch.STORE_ENV == STORE_ENV


def test_a_plugin_without_a_setting_imports_nothing_of_the_server() -> None:
    """What the engines run in every process, with no setting: each callable returns, having imported only
    itself and the switch (beyond the package root's own): no server, no command line, no aiohttp."""
    code = (
        "import json, sys\n"
        "import aiobootstrap\n"
        "before = set(sys.modules)\n"
        "from aiobootstrap.plugins import sglang, vllm\n"
        "sglang.register(); vllm.register()\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    environ = {name: value for name, value in os.environ.items() if not name.startswith(settings.PREFIX)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60, check=True
    )
    imported = [name for name in json.loads(done.stdout) if name.startswith(("aiobootstrap", "aiohttp"))]
    assert imported == [
        "aiobootstrap.plugins",
        "aiobootstrap.plugins.sglang",
        "aiobootstrap.plugins.switch",
        "aiobootstrap.plugins.vllm",
    ]
    assert done.stderr == ""


# ---- the variables, read as serve's options ----


def test_no_setting_is_the_config_serve_runs_with_no_option() -> None:
    assert settings.engine_config({}) == server_config(server_parser().parse_args([]), {})


def test_each_variable_is_its_serve_option() -> None:
    config = settings.engine_config(
        {
            "AIOBOOTSTRAP_STORE": "redis://10.0.0.1:7000/0",
            "AIOBOOTSTRAP_MAX_WAIT": "30",
            "AIOBOOTSTRAP_WORLD_SIZE": "8",
            "AIOBOOTSTRAP_ACCESS_LOG": "1",
            "AIOBOOTSTRAP_STORE_PREFIX": "fleet",
            "AIOBOOTSTRAP_FACES": "prefill,native",
            "AIOBOOTSTRAP_DP_ROOM_TTL": "5",  # a face's option, by the same pattern
        }
    )
    assert (config.store, config.max_wait, config.world_size, config.access_log) == (
        "redis://10.0.0.1:7000/0",
        30.0,
        8,
        True,
    )
    assert (config.store_prefix, config.faces) == ("fleet", ("prefill", "native"))
    assert config.settings_of(PrefillSettings).dp_room_ttl == 5.0


def test_a_flag_off_leaves_it_unset() -> None:
    assert settings.engine_config({"AIOBOOTSTRAP_ACCESS_LOG": "0"}).access_log is False


def test_the_token_file_and_the_command_lines_token(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("*  ns=default\nQm5rT8wXy2LpN4vB7cK1dF6gH9jZ3sAe\n")
    config = settings.engine_config(
        {"AIOBOOTSTRAP_TOKEN_FILE": str(tokens), "AIOBOOTSTRAP_AUTH_READS": "open"}
    )
    assert config.auth_tokens is not None
    assert config.auth_reads == "open"
    assert settings.engine_config({"AIOBOOTSTRAP_AUTH_TOKEN": "s3cret"}).auth_token == "s3cret"


def test_what_the_engine_decides_is_not_read() -> None:
    """Where each server listens is the engine's: the variables of host and port say nothing."""
    config = settings.engine_config({"AIOBOOTSTRAP_HOST": "10.9.9.9", "AIOBOOTSTRAP_PORT": "1"})
    assert (config.host, config.port) == (ServerConfig().host, ServerConfig().port)
    assert {"host", "port", "tls_cert", "listen", "log_level"} <= settings.NOT_READ.keys()


@pytest.mark.parametrize(
    ("environ", "detail"),
    [
        ({"AIOBOOTSTRAP_MAX_WAIT": "soon"}, "AIOBOOTSTRAP_MAX_WAIT: invalid float value: 'soon'"),
        (
            {"AIOBOOTSTRAP_AUTH_READS": "all"},
            "AIOBOOTSTRAP_AUTH_READS: invalid choice: 'all' (choose from 'token', 'open')",
        ),
        (
            {"AIOBOOTSTRAP_ACCESS_LOG": "maybe"},
            "AIOBOOTSTRAP_ACCESS_LOG must be 1 (on) or 0 (off), not 'maybe'",
        ),
        (
            {"AIOBOOTSTRAP_MAX_WAIT": "-1"},
            "the AIOBOOTSTRAP_* settings: max wait must be a non-negative number of seconds, not -1.0",
        ),
        (
            {"AIOBOOTSTRAP_STORE": "bogus:"},
            "the AIOBOOTSTRAP_* settings: The store URL bogus: has an unknown scheme",
        ),
        ({"AIOBOOTSTRAP_FACES": "nope"}, "AIOBOOTSTRAP_FACES: no face is named 'nope'"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(environ: dict[str, str], detail: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(detail)) as refused:
        settings.engine_config(environ)
    assert "\n" not in str(refused.value)


def test_the_namespace_is_the_plugins_own_setting() -> None:
    assert settings.engine_namespace({}) is None
    assert settings.engine_namespace({"AIOBOOTSTRAP_NAMESPACE": "default"}) is None
    assert settings.engine_namespace({"AIOBOOTSTRAP_NAMESPACE": " pd-7 "}) == "pd-7"
    with pytest.raises(ValueError, match=r"^AIOBOOTSTRAP_NAMESPACE: Invalid namespace 'pd 7'"):
        settings.engine_namespace({"AIOBOOTSTRAP_NAMESPACE": "pd 7"})


def test_the_external_prefill_switch() -> None:
    assert settings.external_prefill({}) is False
    assert settings.external_prefill({"AIOBOOTSTRAP_EXTERNAL_PREFILL": "1"}) is True
    assert settings.external_prefill({"AIOBOOTSTRAP_EXTERNAL_PREFILL": "0"}) is False
    with pytest.raises(ValueError, match=r"^AIOBOOTSTRAP_EXTERNAL_PREFILL must be 1 \(on\) or 0 \(off\)"):
        settings.external_prefill({"AIOBOOTSTRAP_EXTERNAL_PREFILL": "elsewhere"})


def test_every_variable_is_in_the_docs_table() -> None:
    """docs/migrating.md's one table lists every variable the plugins read, and each option not read."""
    text = (ROOT / "docs" / "migrating.md").read_text()
    names = [variable.name for variable in settings.variables()]
    assert len(names) == len(set(names))
    assert not [name for name in names if f"`{name}`" not in text]
    flags = ["--" + dest.replace("_", "-") for dest in settings.NOT_READ if dest not in ("help", "version")]
    assert not [flag for flag in flags if f"`{flag}`" not in text and dest_present(flag)]


def dest_present(flag: str) -> bool:
    """Whether ``serve`` has the option ``flag`` (an option another session adds may not be there yet)."""
    return any(flag in action.option_strings for action in server_parser()._actions)


# ---- the entry points and the callables ----


def test_the_entry_points_name_the_plugins_callables() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["sglang.srt.plugins"] == {
        "aiobootstrap": "aiobootstrap.plugins.sglang:register"
    }
    assert project["entry-points"]["vllm.general_plugins"] == {
        "aiobootstrap": "aiobootstrap.plugins.vllm:register"
    }
    assert callable(sglang.register)
    assert callable(vllm.register)
    assert not [dep for dep in project["dependencies"] if dep.startswith(("sglang", "vllm"))]


@pytest.mark.skipif(
    importlib.util.find_spec("sglang") is not None or importlib.util.find_spec("vllm") is not None,
    reason="an engine is installed here: the compat suite tests the plugins in it",
)
@pytest.mark.parametrize(
    ("plugin", "targets"),
    [
        (
            sglang,
            ["sglang.srt.plugins.hook_registry.HookRegistry", "sglang.srt.plugins.hook_registry.HookType"],
        ),
        (
            vllm,
            ["vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils.MooncakeBootstrapServer"],
        ),
    ],
)
def test_enabled_without_the_engine_each_target_is_one_warning(
    plugin, targets: list[str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A target the running engine lacks (here the whole engine) is one WARNING naming it; nothing raises."""
    monkeypatch.setenv("AIOBOOTSTRAP_ENGINE", "1")
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        plugin.register()
    assert [record.levelname for record in caplog.records] == ["WARNING"] * len(targets)
    for record, target in zip(caplog.records, targets, strict=True):
        assert record.getMessage().startswith(f"aiobootstrap plugin: {target} is not replaced (")
        assert record.getMessage().endswith("the engine's own server keeps running there")


@pytest.mark.parametrize("plugin", [sglang, vllm])
@pytest.mark.parametrize(
    ("environ", "detail"),
    [
        ({"AIOBOOTSTRAP_ENGINE": "maybe"}, "AIOBOOTSTRAP_ENGINE must be 1 (on) or 0 (off), not 'maybe'"),
        (
            {"AIOBOOTSTRAP_ENGINE": "1", "AIOBOOTSTRAP_MAX_WAIT": "soon"},
            "AIOBOOTSTRAP_MAX_WAIT: invalid float",
        ),
    ],
)
def test_a_bad_setting_is_one_error_and_nothing_is_replaced(
    plugin,
    environ: dict[str, str],
    detail: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        plugin.register()
    assert [record.levelname for record in caplog.records] == ["ERROR"]
    assert caplog.records[0].getMessage().startswith(f"aiobootstrap plugin: {detail}")


# ---- the drop-in classes ----


class EnginesServer:
    """A class of the shape the engines' are (``(host, port)``): what ``drop_in`` is given at hook time."""

    def __init__(self, host: str, port: int) -> None:
        raise AssertionError("a drop-in never runs the engine's constructor")


def test_a_drop_in_is_the_engines_class_and_aiobootstraps_server() -> None:
    config = settings.engine_config({"AIOBOOTSTRAP_MAX_WAIT": "7"})
    made = drop_in(EnginesServer, PrefillBootstrapServer, config)
    assert made.__name__ == "EnginesServer"
    assert issubclass(made, EnginesServer)
    assert issubclass(made, PrefillBootstrapServer)
    assert is_drop_in(made)
    assert not is_drop_in(EnginesServer)
    server = made("127.0.0.1", 0)
    try:
        assert isinstance(server, EnginesServer)
        assert server._server.config.max_wait == 7.0
        assert repr(server).startswith("<EnginesServer http://127.0.0.1:")
    finally:
        server.close()
    assert not issubclass(
        drop_in(EnginesServer, PrefillBootstrapServer, config, inherit=False), EnginesServer
    )


def test_a_drop_in_serves_the_namespace_on_the_engines_address() -> None:
    """With AIOBOOTSTRAP_NAMESPACE the engine's (host, port) is that namespace's listener: a rank registering
    there, unprefixed as the engines do, is the namespace's; the server's own listener is on the loopback."""
    config = settings.engine_config({})
    made = drop_in(EnginesServer, ThreadedBootstrapServer, config, namespace="pd-7")
    port = quiet_port()
    server = made(host="127.0.0.1", port=port)
    try:
        engines = f"http://127.0.0.1:{port}"
        info: dict[str, Any] = {
            "tp_rank": 0,
            "transfer_engine_info": {"session_id": "s-0", "weights_info_dict": {}},
        }
        assert requests.put(f"{engines}/register_transfer_engine_info", json=info, timeout=30).text == "OK"
        assert requests.get(f"{engines}/get_transfer_engine_info?rank=0", timeout=30).status_code == 200
        assert (
            requests.get(f"{server.url}/ns/pd-7/get_transfer_engine_info?rank=0", timeout=30).status_code
            == 200
        )
        assert requests.get(f"{server.url}/get_transfer_engine_info?rank=0", timeout=30).status_code == 404
        assert server.url.startswith("http://127.0.0.1:")
        assert server.port != port
    finally:
        server.close()


def test_an_encoder_drop_in_keeps_the_namespaces_list_in_place() -> None:
    """Under AIOBOOTSTRAP_NAMESPACE the encoder server's list (the one SGLang's receiver reads, given as urls=)
    is the namespace's: an encoder registering at the engine's address, unprefixed, is in it."""
    made = drop_in(EnginesServer, EncoderBootstrapServer, settings.engine_config({}), namespace="pd-7")
    port, urls = quiet_port(), list[str]()
    server = made("127.0.0.1", port, urls, health_check_interval=0)
    try:
        engines = f"http://127.0.0.1:{port}"
        url = {"url": "http://10.0.0.9:8000"}
        assert requests.post(f"{engines}/register_encoder_url", json=url, timeout=30).text == "OK"
        assert server.list_urls() == urls == ["http://10.0.0.9:8000"]
        listed = requests.get(f"{server.url}/ns/pd-7/list_encoder_urls", timeout=30).json()
        assert listed["encoder_urls"] == urls
    finally:
        server.close()


def test_a_prefill_server_served_elsewhere_binds_nothing() -> None:
    """AIOBOOTSTRAP_EXTERNAL_PREFILL's class: constructed with the engine's address, it leaves the address free
    (an external aiobootstrap listens there) and closes."""
    port = quiet_port()
    made = drop_in(EnginesServer, ServedElsewhere, settings.engine_config({}))
    server = made(host="127.0.0.1", port=port)
    assert isinstance(server, EnginesServer)
    assert isinstance(server, ServedElsewhere)
    assert (server.host, server.port) == ("127.0.0.1", port)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # nothing took it
    server.close()
