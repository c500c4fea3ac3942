"""SGLang's targets and the hooks that put aiobootstrap's servers in their place (checked against 0.5.23).

- :data:`ENGINE_INFO`: the engine-info server the engine constructs
  (``EngineInfoBootstrapServer(host=, port=)``). A class ``REPLACE``: SGLang's
  ``HookRegistry`` sets it in its module and in every module already holding
  the name, ``sglang.srt.entrypoints.engine`` (which imports it by name)
  included; one that imports it later finds the replacement in its module.
- :data:`ENCODER`: the encoder bootstrap server the language-only tokenizer
  manager constructs (``EncoderBootstrapServer(host=, port=, urls=)``), a
  class ``REPLACE`` the same way.
- :data:`KV_CLASS`: the prefill bootstrap server. ``start_disagg_service()``
  constructs ``get_kv_class(backend, KVClassType.BOOTSTRAP_SERVER)(host=,
  port=)``; the table holds each backend's subclass of
  ``CommonKVBootstrapServer`` (Mooncake, NIXL, Mori, Ascend), imported from
  the backend's package when asked (Mori's and Ascend's need their hardware's
  libraries to import at all). An ``AFTER`` hook on ``get_kv_class`` answers
  that question with a drop-in subclass of the class SGLang's table gave,
  made once per class: every backend, none imported before SGLang asks. A
  backend whose server is not a ``CommonKVBootstrapServer`` (its own wire) is
  left as it is, with one ``WARNING``. SGLang's ``rust_server_serves_kv_bootstrap``
  asks ``issubclass(cls, CommonKVBootstrapServer)`` of the same answer and
  decides as it would: with ``SGLANG_RUST_SERVER`` its Rust server serves the
  registry on the API port and no prefill bootstrap server is constructed.

With ``AIOBOOTSTRAP_EXTERNAL_PREFILL=1`` the prefill server's replacement binds
nothing (:class:`ServedElsewhere`): an external aiobootstrap listens where the
prefill ranks register (``--listen HOST:PORT=NAMESPACE``), and SGLang's own
server is kept from taking that address.

With ``AIOBOOTSTRAP_NAMESPACE`` the engine-info, encoder and prefill servers
serve that namespace where SGLang has them listen (the encoder server keeps
that namespace's list in place, the list SGLang's receiver reads).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..server.config import ServerConfig
from ..server.faces.encoders.inprocess import EncoderBootstrapServer
from ..server.faces.prefill.inprocess import PrefillBootstrapServer
from ..server.threaded import ThreadedBootstrapServer
from .dropins import drop_in, is_drop_in, missing, resolve
from .settings import engine_config, engine_namespace, external_prefill

__all__ = ["COMMON_SERVER", "ENCODER", "ENGINE_INFO", "KV_CLASS", "ServedElsewhere", "install"]

log = logging.getLogger("aiobootstrap")

ENGINE = "sglang"
HOOKS = "sglang.srt.plugins.hook_registry"
ENGINE_INFO = "sglang.srt.entrypoints.engine_info_bootstrap_server.EngineInfoBootstrapServer"
ENCODER = "sglang.srt.disaggregation.encoder.receiver.EncoderBootstrapServer"
KV_CLASS = "sglang.srt.disaggregation.utils.get_kv_class"
KV_CLASS_TYPE = "sglang.srt.disaggregation.utils.KVClassType"
COMMON_SERVER = "sglang.srt.disaggregation.common.conn.CommonKVBootstrapServer"

_installed = False


class ServedElsewhere:
    """The prefill bootstrap server of an instance whose address an external aiobootstrap serves: it binds
    nothing, says so once, and closes as the engine's does."""

    def __init__(self, host: str, port: int, **_options: Any) -> None:
        self.host, self.port = host, port
        log.info(
            "aiobootstrap plugin: the prefill bootstrap server at %s:%s is an external aiobootstrap's",
            host,
            port,
        )

    def close(self) -> None:
        """Nothing to stop."""


def install(environ: Mapping[str, str]) -> None:
    """Register a hook for each target the running SGLang has, on the config ``environ`` gives; once a
    process."""
    global _installed
    if _installed:
        return
    try:
        config, namespace = engine_config(environ), engine_namespace(environ)
        elsewhere = external_prefill(environ)
    except ValueError as exc:
        log.error("aiobootstrap plugin: %s; SGLang's own servers keep running", exc)
        return
    registry, hook_type = resolve(f"{HOOKS}.HookRegistry", ENGINE), resolve(f"{HOOKS}.HookType", ENGINE)
    if registry is None or hook_type is None:
        return
    _installed = True
    replaced = {ENGINE_INFO: ThreadedBootstrapServer, ENCODER: EncoderBootstrapServer}
    for target, server in replaced.items():
        original = resolve(target, ENGINE)
        if isinstance(original, type) and not is_drop_in(original):
            made = drop_in(original, server, config, namespace=namespace)
            registry.register(target, made, hook_type.REPLACE)
    if elsewhere:  # the external server's listener is the namespace's: this one binds nothing
        prefill = _prefill_hook(config, None, ServedElsewhere)
    else:
        prefill = _prefill_hook(config, namespace, PrefillBootstrapServer)
    if prefill is not None:
        registry.register(KV_CLASS, prefill, hook_type.AFTER)


def _prefill_hook(
    config: ServerConfig, namespace: str | None, server: type
) -> Callable[..., type | None] | None:
    """The ``AFTER`` hook of ``get_kv_class``, or ``None`` (after a ``WARNING``) when a target is missing."""
    common, kinds = resolve(COMMON_SERVER, ENGINE), resolve(KV_CLASS_TYPE, ENGINE)
    if common is None or kinds is None or resolve(KV_CLASS, ENGINE) is None:
        return None
    wanted = getattr(kinds, "BOOTSTRAP_SERVER", None)
    if wanted is None:
        missing(f"{KV_CLASS_TYPE}.BOOTSTRAP_SERVER", ENGINE, "no such member")
        return None
    made: dict[type, type] = {}
    told: set[type] = set()

    def bootstrap_server(result: Any, *args: Any, **kwargs: Any) -> type | None:
        """The drop-in for the bootstrap server class ``get_kv_class`` returned; ``None`` keeps its answer."""
        asked = args[1] if len(args) > 1 else kwargs.get("class_type")
        if asked != wanted or not isinstance(result, type) or is_drop_in(result):
            return None
        if not issubclass(result, common):
            if result not in told:
                told.add(result)
                missing(
                    f"{result.__module__}.{result.__qualname__}",
                    ENGINE,
                    "a bootstrap server that is not a CommonKVBootstrapServer: aiobootstrap does not serve its wire",
                )
            return None
        if result not in made:
            made[result] = drop_in(result, server, config, namespace=namespace)
        return made[result]

    return bootstrap_server
