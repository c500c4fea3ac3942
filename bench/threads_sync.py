"""What the thread-hosted pieces cost: `python bench/threads_sync.py`.

Medians over a few hundred rounds, loopback only; quote ratios, not absolutes,
on a shared machine.
"""

from __future__ import annotations

import http.client
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from aiobootstrap import SyncBootstrapClient, ThreadedBootstrapServer


def median_us(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def wake_ms(server: ThreadedBootstrapServer, client: SyncBootstrapClient, waiters: int, rank: int) -> float:
    """From a registration to the last of ``waiters`` blocked threads returning."""
    done: list[float] = []
    lock = threading.Lock()

    def wait() -> None:
        client.get(rank, timeout=30)
        with lock:
            done.append(time.perf_counter())

    threads = [threading.Thread(target=wait) for _ in range(waiters)]
    for thread in threads:
        thread.start()
    while server.parked < waiters:
        time.sleep(0.001)
    start = time.perf_counter()
    client.register(rank, session_id="s", weights_info_dict={})
    for thread in threads:
        thread.join()
    return (max(done) - start) * 1e3


def main() -> None:
    weights = {f"layer.{i}.weight": [140_000_000 + i * 4096, 4096, 2] for i in range(500)}
    with ThreadedBootstrapServer(port=0) as server, SyncBootstrapClient(server.url) as client:
        client.register(0, session_id="10.0.0.7:18000", weights_info_dict=weights)
        raw = http.client.HTTPConnection(server.host, server.port)

        def raw_get() -> None:
            raw.request("GET", "/get_transfer_engine_info?rank=0")
            raw.getresponse().read()

        print("get, registered rank, 500-weight dict (median of 500):")
        sync_get = median_us(lambda: client.get(0, timeout=5), 500)
        print(f"  SyncBootstrapClient.get          {sync_get:8.0f} us")
        print(f"  http.client GET, keep-alive       {median_us(raw_get, 500):8.0f} us")
        in_process = median_us(lambda: server.get_transfer_engine_info(0), 500)
        print(f"  server.get_transfer_engine_info  {in_process:8.0f} us (in-process)")
        for waiters in (1, 64):
            wakes = [wake_ms(server, client, waiters, waiters * 100 + rank) for rank in range(20)]
            wake = statistics.median(wakes)
            print(f"wake {waiters:3d} blocked threads on registration (median of 20): {wake:6.2f} ms")
    starts = median_us(lambda: ThreadedBootstrapServer(port=0).close(), 50)
    print(f"ThreadedBootstrapServer start + close (median of 50): {starts / 1e3:.1f} ms")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        command = [sys.executable, "-m", "aiobootstrap", "--port", port]
        clash = median_us(lambda: subprocess.run(command, capture_output=True, check=False), 5)
    print(f"CLI on a taken port, start to exit 2 (median of 5): {clash / 1e3:.0f} ms")


if __name__ == "__main__":
    main()
