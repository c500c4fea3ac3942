"""vLLM's target and its replacement (checked against 0.33.0).

:data:`MOONCAKE_SERVER`: ``MooncakeBootstrapServer(host, port)``, then
``start()`` and ``shutdown()``, which the Mooncake connector's prefill side
constructs on global rank 0 unless ``kv_connector_extra_config`` names a
``bootstrap_server_address``. vLLM has no hook registry: the class is replaced
in ``mooncake_utils`` and, when ``mooncake_connector`` has already imported the
name, there too (imported later, it finds the replacement). The replacement is
aiobootstrap's ``VllmBootstrapServer`` on the plugins' config, named as vLLM's
class and not a subclass of it: vLLM's ``__del__`` would run on it, and nothing
in vLLM asks its class. With ``AIOBOOTSTRAP_NAMESPACE`` it serves that namespace
where vLLM has it listen.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

from ..server.faces.vllm.inprocess import VllmBootstrapServer
from .dropins import drop_in, is_drop_in, resolve
from .settings import engine_config, engine_namespace

__all__ = ["CONNECTOR", "MOONCAKE_SERVER", "install"]

log = logging.getLogger("aiobootstrap")

ENGINE = "vllm"
MOONCAKE_SERVER = (
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils.MooncakeBootstrapServer"
)
CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
"""The module that imports the class by name and constructs it."""


def install(environ: Mapping[str, str]) -> None:
    """Replace vLLM's Mooncake bootstrap server, when the running vLLM has it, on the config ``environ``
    gives; a second call changes nothing."""
    try:
        config, namespace = engine_config(environ), engine_namespace(environ)
    except ValueError as exc:
        log.error("aiobootstrap plugin: %s; vLLM's own server keeps running", exc)
        return
    original = resolve(MOONCAKE_SERVER, ENGINE)
    if not isinstance(original, type) or is_drop_in(original):
        return
    replacement = drop_in(original, VllmBootstrapServer, config, namespace=namespace, inherit=False)
    module_name, _, name = MOONCAKE_SERVER.rpartition(".")
    setattr(sys.modules[module_name], name, replacement)
    connector = sys.modules.get(CONNECTOR)
    if connector is not None and getattr(connector, name, None) is original:
        setattr(connector, name, replacement)
    log.info("aiobootstrap plugin: %s is aiobootstrap's VllmBootstrapServer", MOONCAKE_SERVER)
