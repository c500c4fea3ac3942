"""A namespace in the tools' --url (``http://host:port/ns/NAME``, as the page's address bar shows it) is the
namespace the tools say they read, not "default"."""

from __future__ import annotations

import json
import urllib.request

from .helpers.tools import assert_one_line_error, tool
from .helpers.tools import namespace as namespace  # the module's fixtures, shared
from .helpers.tools import url as url


def _register(url: str, namespace: str, rank: int) -> None:
    body = {"rank": rank, "transfer_engine_info": {"session_id": f"10.0.0.{rank}:1", "weights_info_dict": {}}}
    request = urllib.request.Request(
        f"{url}/ns/{namespace}/register_transfer_engine_info", json.dumps(body).encode(), method="PUT"
    )
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200


def test_status_names_the_namespace_its_url_holds(url: str, namespace: str) -> None:
    """status --url .../ns/NAME shows NAME's ranks under NAME's header (it said "namespace default")."""
    _register(url, namespace, 3)
    for given in (f"{url}/ns/{namespace}", f"{url}/ns/{namespace}/"):
        result = tool("status", "--url", given, "--kind", "transfer_engine_info")
        assert result.stdout.splitlines()[0].startswith(f"namespace {namespace}, version 1,"), result.stdout
        assert "transfer_engine_info, role target: 1 registered" in result.stdout
    got = tool("get", "--url", f"{url}/ns/{namespace}", "--rank", "3")
    assert "10.0.0.3:1" in got.stdout, got.stderr


def test_two_different_namespaces_are_one_clear_error(url: str, namespace: str) -> None:
    """--url naming one namespace and --namespace another: status 2 and one line, before anything is sent."""
    result = tool("status", "--url", f"{url}/ns/{namespace}", "--namespace", "other")
    assert_one_line_error(result, 2, f"--url names namespace {namespace} and --namespace other: give it once")
