"""Run aiobootstrap's CLI as if orjson and/or uvloop were not installed.

``python -m bench.plain --without orjson,uvloop -- --port 0`` blocks those
imports (a ``None`` in ``sys.modules`` makes ``import`` raise ``ImportError``),
so one environment can measure what each optional speed-up buys.
"""

from __future__ import annotations

import sys


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--without"]:
        for name in argv[1].split(","):
            if name:
                sys.modules[name] = None  # type: ignore[assignment]
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from aiobootstrap.cli.main import main as aiobootstrap_main

    return aiobootstrap_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
