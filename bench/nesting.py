"""What the body nesting bound costs a realistic registration: parse_body with and without it.

    python -m bench.nesting [--rounds 20]

Parses the registration of 1,000 tensors (~60 KB, ``bench._data``) with
``wire.bodies.parse_body``, in interleaved rounds with the nesting check on and
stubbed out, and prints the CPU time per call (``time.process_time``: other
processes on the machine do not count).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from aiobootstrap.wire import bodies
from aiobootstrap.wire.bodies import parse_body

from ._data import registration, weights


def _per_call(body: bytes, calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        parse_body(body)
    return (time.process_time() - started) / calls


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nesting", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    body = registration(3, weights(1000))
    check = bodies._bytes_nest_within
    timings: dict[str, list[float]] = {"without the check": [], "with the check": []}
    for _ in range(args.rounds):
        bodies._bytes_nest_within = lambda body, limit: True
        timings["without the check"].append(_per_call(body, args.calls))
        bodies._bytes_nest_within = check
        timings["with the check"].append(_per_call(body, args.calls))
    print(f"parse_body of a {len(body):,}-byte registration (1,000 tensors), CPU per call:")
    for name, values in timings.items():
        print(f"  {name}: median {statistics.median(values) * 1e6:.0f} us, min {min(values) * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
