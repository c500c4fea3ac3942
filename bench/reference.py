"""The reference server: what engines run today, for the benchmarks' baseline.

A FastAPI app served by uvicorn in a daemon thread, a dict under a
``threading.Lock``, plain ``def`` handlers (so FastAPI runs them in its thread
pool), ``404`` until a rank has registered; the routes and replies of SPEC.md
section 1. uvicorn runs with its defaults, which pick uvloop and httptools when
installed (the ``bench`` extra installs both): the strongest baseline users have.

``python -m bench.reference --port 0`` prints
``reference listening on http://HOST:PORT`` and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import socket
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.responses import PlainTextResponse


def create_reference_app() -> FastAPI:
    app = FastAPI()
    infos: dict[int, tuple[str, dict[str, Any]]] = {}
    lock = threading.Lock()

    @app.get("/health")
    def health() -> PlainTextResponse:
        return PlainTextResponse("OK")

    @app.put("/register_transfer_engine_info")
    def register(data: dict):
        try:
            rank = data["rank"] if "rank" in data else data["tp_rank"]
            info = data["transfer_engine_info"]
            entry = (info["session_id"], info["weights_info_dict"])
        except Exception as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        with lock:
            infos[rank] = entry
        return PlainTextResponse("OK")

    # No return annotation, as in the engines: FastAPI then encodes the dict
    # with jsonable_encoder, which is what their users pay for today.
    @app.get("/get_transfer_engine_info")
    def get_info(rank: int):
        if rank < 0:
            raise HTTPException(status_code=400, detail="Invalid rank parameter")
        with lock:
            info = infos.get(rank)
        if info is None:
            raise HTTPException(status_code=404, detail=f"No transfer engine info for rank {rank}")
        return {"rank": rank, "remote_instance_transfer_engine_info": list(info)}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reference")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    sock = socket.create_server((args.host, args.port), backlog=4096)
    server = uvicorn.Server(uvicorn.Config(create_reference_app(), log_level="warning"))
    # As engines run it: a daemon thread beside the process's real work.
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not server.started and thread.is_alive():
        stop.wait(0.01)
    host, port = sock.getsockname()[:2]
    print(f"reference listening on http://{host}:{port}", flush=True)
    stop.wait()
    server.should_exit = True
    thread.join(timeout=5)


if __name__ == "__main__":
    main()
