"""``python -m benchmarks``: run every ``benchmarks/bench_*.py`` module's ``main()`` in name order, or only the
ones named on the command line (``python -m benchmarks mondrian`` or ``bench_mondrian``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def discover() -> list[str]:
    """The benchmark module names (``bench_*``), sorted."""
    return sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    known = discover()
    wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in argv] or known
    unknown = [w for w in wanted if w not in known]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; the benchmarks are {known}", file=sys.stderr)
        return 2
    for name in wanted:
        importlib.import_module(f"benchmarks.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
