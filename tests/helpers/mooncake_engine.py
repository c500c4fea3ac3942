"""One Mooncake transfer engine (TCP transport) in a process of its own, driven by lines on stdin, for the
real-engine tests: ``python -m tests.helpers.mooncake_engine METADATA_URL SIZE [NAME]``.

It initializes against ``METADATA_URL`` and allocates a buffer of ``SIZE`` bytes, then prints one JSON
line ``{"name": ..., "buffer": ADDRESS}`` (or ``{"error": ...}`` and exits 1). Then, per line read:
``write PEER PEER_BUFFER HEX`` writes those bytes into the peer's buffer (prints ``{"result": N}``, 0 on
success); ``read N`` prints ``{"hex": ...}``, the first N bytes of its own buffer; EOF ends it (the engine
is destroyed, as at a normal exit: it deletes its metadata).
"""

from __future__ import annotations

import json
import socket
import sys


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    from mooncake.engine import TransferEngine

    metadata, size = sys.argv[1], int(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) > 3 else f"127.0.0.1:{_free_port()}"
    engine = TransferEngine()
    # The name is the engine's segment and its RPC address: host and port, as SGLang names its engines.
    if engine.initialize(name, metadata, "tcp", "") != 0:
        print(json.dumps({"error": "initialize failed"}), flush=True)
        return 1
    buffer = engine.allocate_managed_buffer(size)
    print(json.dumps({"name": name, "buffer": buffer}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "write":
            data = bytes.fromhex(words[3])
            engine.write_bytes_to_buffer(buffer, data, len(data))
            result = engine.transfer_sync_write(words[1], buffer, int(words[2]), len(data))
            print(json.dumps({"result": result}), flush=True)
        elif words[0] == "read":
            data = engine.read_bytes_from_buffer(buffer, int(words[1]))
            print(json.dumps({"hex": bytes(data).hex()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
