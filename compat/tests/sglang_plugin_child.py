"""One SGLang process, as the compat suite's plugin tests start it: SGLang's own ``load_plugins()``, then what
SGLang constructs.

Run as ``python sglang_plugin_child.py SPEC`` (a JSON object) with the environment the test chose. It imports
SGLang's engine module before ``load_plugins()`` when ``SPEC["engine_first"]`` (the engine imports
``EngineInfoBootstrapServer`` by name, so both orders matter), runs ``load_plugins()`` as the engine and the
scheduler do, and reports the classes SGLang then holds. With ``SPEC["serve"]`` it constructs each server
where SGLang does: ``start_disagg_service()`` for the Mooncake and the NIXL backends, after publishing a
prefill instance's ``ServerArgs`` (a tiny model's config on disk; the CPU as its device), the engine
module's ``EngineInfoBootstrapServer(host=, port=)``, and ``EncoderBootstrapServer(host=, port=, urls=)`` of
``sglang.srt.disaggregation.encoder.receiver``, read from the module when called, as the tokenizer manager
imports it (unless ``SPEC["encoder"]`` is false). It prints one line ``REPORT {json}``, then answers ``urls`` (the list the encoder server keeps in
place, which SGLang's receiver reads) and stops at ``stop`` or at the end of its input.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
TINY_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "torch_dtype": "float32",
}
"""A model's config.json, all SGLang's ServerArgs resolution reads of a model (nothing is loaded)."""


def name_of(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def mro_of(cls: Any) -> list[str]:
    return [name_of(base) for base in cls.__mro__]


def prefill_server(backend: str, port: int, model: Path) -> Any:
    """What ``start_disagg_service()`` constructs for ``backend``, on a published prefill ``ServerArgs``."""
    from sglang.srt.managers.disagg_service import start_disagg_service
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(
        model_path=str(model),
        host=HOST,
        device="cpu",
        disaggregation_mode="prefill",
        disaggregation_transfer_backend=backend,
        disaggregation_bootstrap_port=port,
    )
    publish(args, role="tokenizer")
    return start_disagg_service()


def main() -> None:
    spec = json.loads(sys.argv[1])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if spec.get("engine_first"):
        importlib.import_module("sglang.srt.entrypoints.engine")
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    load_plugins()
    from sglang.srt.disaggregation.common.conn import CommonKVBootstrapServer
    from sglang.srt.disaggregation.encoder import receiver
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend
    from sglang.srt.entrypoints import engine
    from sglang.srt.managers import disagg_service

    kv_classes = {
        backend: disagg_service.get_kv_class(TransferBackend(backend), KVClassType.BOOTSTRAP_SERVER)
        for backend in ("mooncake", "nixl")
    }
    report: dict[str, Any] = {
        "engine_info": mro_of(engine.EngineInfoBootstrapServer),
        "encoder": mro_of(receiver.EncoderBootstrapServer),
        "kv": {backend: mro_of(cls) for backend, cls in kv_classes.items()},
        "kv_is_common": {
            backend: issubclass(cls, CommonKVBootstrapServer) for backend, cls in kv_classes.items()
        },
        "rust_server_serves": {
            backend: disagg_service.rust_server_serves_kv_bootstrap(backend) for backend in kv_classes
        },
        "hooks": sorted(
            target
            for target, hooks in HookRegistry._hooks.items()
            for _, _, source in hooks
            if source is not None and source.plugin_name == "aiobootstrap"
        ),
        "aiobootstrap_server_imported": "aiobootstrap.server" in sys.modules,
    }
    servers: dict[str, Any] = {}
    urls: list[str] = []
    if spec.get("serve"):
        with tempfile.TemporaryDirectory() as folder:
            model = Path(folder)
            (model / "config.json").write_text(json.dumps(TINY_MODEL))
            for backend, port in spec["prefill_ports"].items():
                servers[f"prefill_{backend}"] = prefill_server(backend, port, model)
        servers["engine_info"] = engine.EngineInfoBootstrapServer(
            host=HOST, port=spec.get("engine_info_port", 0)
        )
        if spec.get("encoder", True):
            servers["encoder"] = receiver.EncoderBootstrapServer(host=HOST, port=0, urls=urls)
        report["servers"] = {
            name: {"mro": mro_of(type(server)), "port": server.port, "url": getattr(server, "url", None)}
            for name, server in servers.items()
        }
    print("REPORT " + json.dumps(report), flush=True)
    for line in sys.stdin:
        if line.strip() == "urls":
            print("URLS " + json.dumps(urls), flush=True)
        elif line.strip() == "stop":
            break
    for server in servers.values():
        server.close()


if __name__ == "__main__":
    main()
