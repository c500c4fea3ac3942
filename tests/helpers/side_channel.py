"""A vLLM worker's side channel as vLLM binds it: a real ZMQ ROUTER socket (pyzmq, the test extra's), which
drops a bare TCP connection without a message for the worker's loop to read."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import zmq

__all__ = ["router"]


@contextlib.contextmanager
def router() -> Iterator[tuple[str, Callable[[], bool]]]:
    """A live side channel: its addr (``tcp://127.0.0.1:PORT``), and a check that nothing was sent to it."""
    context = zmq.Context()
    sock = context.socket(zmq.ROUTER)
    try:
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        yield f"tcp://127.0.0.1:{port}", lambda: sock.poll(0) == 0  # no message for vLLM's loop to read
    finally:
        sock.close(linger=0)
        context.term()
