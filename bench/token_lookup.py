"""Token lookup: a hit and a miss among 10,000 tokens cost the same, within noise.

    python -m bench.token_lookup [--tokens 10000] [--rounds 301] [--calls 2048] [--requests 50]

``TokenSet.lookup`` (``aiobootstrap/server/tokens.py``) hashes the presented
token, finds the digest in a dict and makes one ``hmac.compare_digest``.

Through the app (the gate): a server with 10,000 tokens scoped to
``team-a``; ``GET /ns/team-b/ranks`` sent with one of them (a hit: ``403``)
and with unknown tokens (misses: ``401``), both refused by the guard before
any handler, each on its own keep-alive connection, ``--requests`` per round
in interleaved rounds. The figure is each case's median µs per request; the
noise the hit's interquartile range. Exits 1 if a miss's median is further
from the hit's than ``max(3 x noise, 5 %)``.

The lookup alone, to show where the nanoseconds go: ``--calls`` lookups per
case per round, cycling through 64 presented tokens of the case (so that one
digest's place in the dict does not stand for all): real tokens (hits),
tokens that differ from a real one in their last byte or their first byte,
random tokens (a byte-by-byte comparison would make the first of these the
slowest), and a set of one token. The figure is each case's best round (the
least disturbed by the rest of the machine). For scale, one pass of
``compare_digest`` over every token in turn, the comparison a lookup by
digest replaces. Takes ~15 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hmac
import itertools
import random
import secrets
import statistics
import sys
import time

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.tokens import Scope, TokenSet

from ._servers import serve_in_process

_PRESENTED = 64
"""Distinct tokens each lookup case cycles through."""


def _flip(token: str, index: int) -> str:
    """``token`` with the character at ``index`` changed (still a valid token)."""
    chars = list(token)
    chars[index] = "A" if chars[index] != "A" else "B"
    return "".join(chars)


def run(count: int, rounds: int, calls: int, requests: int) -> int:
    tokens = [secrets.token_urlsafe(32) for _ in range(count)]
    failures = asyncio.run(_requests(tokens, rounds // 4 or 1, requests))
    print()
    _lookups(tokens, rounds, calls)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


async def _requests(tokens: list[str], rounds: int, requests: int) -> list[str]:
    """A hit (403) and misses (401) through the app, refused before any handler: the gate."""
    app = create_app(ServerConfig(auth_tokens=TokenSet(dict.fromkeys(tokens, Scope(frozenset({"team-a"}))))))
    runner, port = await serve_in_process(app)
    real = tokens[len(tokens) // 2]
    cases = {
        "hit (403)": real,
        "miss, last byte (401)": _flip(real, -1),
        "miss, random (401)": secrets.token_urlsafe(32),
    }
    connections = {name: await asyncio.open_connection("127.0.0.1", port) for name in cases}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    try:
        for _ in range(rounds):
            random.shuffle(order)
            for name in order:
                request = (
                    f"GET /ns/team-b/ranks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {cases[name]}\r\n\r\n"
                )
                reader, writer = connections[name]
                started = time.perf_counter_ns()
                for _ in range(requests):
                    writer.write(request.encode())
                    head = await reader.readuntil(b"\r\n\r\n")
                    await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]))
                samples[name].append((time.perf_counter_ns() - started) / requests / 1000)
    finally:
        for _, writer in connections.values():
            writer.close()
        await runner.cleanup()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    hit = medians["hit (403)"]
    quartiles = statistics.quantiles(samples["hit (403)"], n=4)
    noise = quartiles[2] - quartiles[0]
    allowed = max(3 * noise, 0.05 * hit)
    print(
        f"Through the app: {len(tokens):,} tokens, GET /ns/team-b/ranks with a team-a token and with unknown "
        f"ones; median of {rounds} rounds of {requests} requests (µs per request)"
    )
    for name, median in medians.items():
        print(f"  {name:<26} {median:7.1f} {median - hit:+7.1f}")
    worst = max(abs(median - hit) for median in medians.values())
    print(f"  noise (the hit's interquartile range) {noise:.1f} µs; largest difference {worst:.1f} µs")
    return [] if worst <= allowed else ["a hit and a miss through the app differ by more than the noise"]


def _lookups(tokens: list[str], rounds: int, calls: int) -> None:
    """``TokenSet.lookup`` alone: each case's best round, in ns per lookup."""
    many = TokenSet(dict.fromkeys(tokens, Scope()))
    real = tokens[:_PRESENTED]
    cases: dict[str, tuple[TokenSet, list[str]]] = {
        "hit": (many, real),
        "miss: last byte differs": (many, [_flip(token, -1) for token in real]),
        "miss: first byte differs": (many, [_flip(token, 0) for token in real]),
        "miss: random token": (many, [secrets.token_urlsafe(32) for _ in real]),
        "hit, set of one": (TokenSet({real[0]: Scope()}), real[:1]),
        "miss, set of one": (TokenSet({real[0]: Scope()}), [_flip(real[0], -1)]),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            random.shuffle(order)
            for name in order:
                tokens_set, presented = cases[name]
                lookup = tokens_set.lookup
                inputs = list(itertools.islice(itertools.cycle(token.encode() for token in presented), calls))
                started = time.perf_counter_ns()
                for each in inputs:
                    lookup(each)
                samples[name].append((time.perf_counter_ns() - started) / calls)
        scan = _scan_ns(tokens, real[0].encode())
    finally:
        gc.enable()
    best = {name: min(values) for name, values in samples.items()}
    hit = best["hit"]
    print(f"TokenSet.lookup alone: best of {rounds} rounds of {calls:,} lookups (ns per lookup)")
    for name in cases:
        print(f"  {name:<26} {best[name]:7.0f} {best[name] - hit:+7.0f}")
    print(
        f"  for scale: compare_digest against each of the {len(tokens):,} tokens in turn: {scan / 1000:,.0f} µs"
    )


def _scan_ns(tokens: list[str], presented: bytes) -> float:
    """One pass of compare_digest over every token: what a lookup by digest replaces."""
    encoded = [token.encode() for token in tokens]
    runs = []
    for _ in range(5):
        started = time.perf_counter_ns()
        for token in encoded:
            hmac.compare_digest(presented, token)
        runs.append(time.perf_counter_ns() - started)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.token_lookup", description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=301)
    parser.add_argument("--calls", type=int, default=2048)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    return run(args.tokens, args.rounds, args.calls, args.requests)


if __name__ == "__main__":
    sys.exit(main())
