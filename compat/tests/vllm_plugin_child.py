"""One vLLM process, as the compat suite's plugin test starts it: vLLM's own ``load_general_plugins()``, then
what vLLM's Mooncake connector constructs.

Run as ``python vllm_plugin_child.py SPEC`` (a JSON object) with the environment the test chose. It imports
vLLM's ``mooncake_connector`` (which imports ``MooncakeBootstrapServer`` by name from ``mooncake_utils``)
before ``load_general_plugins()`` when ``SPEC["connector_first"]``, runs the loader as each vLLM process
does, and reports the class each module holds. With ``SPEC["serve"]`` it constructs and starts the server as
the connector's prefill side does (``MooncakeBootstrapServer(host, port)``, ``start()``, read from the
connector's module). It prints one line ``REPORT {json}`` and stops (``shutdown()``) at ``stop`` or at the
end of its input.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from typing import Any

HOST = "127.0.0.1"
MOONCAKE = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake"


def mro_of(cls: Any) -> list[str]:
    return [f"{base.__module__}.{base.__qualname__}" for base in cls.__mro__]


def main() -> None:
    spec = json.loads(sys.argv[1])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if spec.get("connector_first"):
        importlib.import_module(f"{MOONCAKE}.mooncake_connector")
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    utils = importlib.import_module(f"{MOONCAKE}.mooncake_utils")
    connector = importlib.import_module(f"{MOONCAKE}.mooncake_connector")
    report: dict[str, Any] = {
        "utils": mro_of(utils.MooncakeBootstrapServer),
        "connector_holds_the_same": connector.MooncakeBootstrapServer is utils.MooncakeBootstrapServer,
        "aiobootstrap_server_imported": "aiobootstrap.server" in sys.modules,
    }
    server = None
    if spec.get("serve"):
        server = connector.MooncakeBootstrapServer(HOST, spec.get("port", 0))
        server.start()
        report["server"] = {
            "mro": mro_of(type(server)),
            "port": server.port,
            "url": getattr(server, "url", None),
        }
    print("REPORT " + json.dumps(report), flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    if server is not None:
        server.shutdown()


if __name__ == "__main__":
    main()
