"""``python -m benchmarks``: run every ``benchmarks/bench_*.py`` module's ``main()`` in name order, or only the
ones named on the command line (``python -m benchmarks mondrian`` or ``bench_mondrian``).

Each module run rewrites its section of the docs' Benchmarks page, ``docs/benchmarks/<module>.md`` (the tables it
printed, the figures it skipped, the date and the machine); the sections of the modules not run stay as they were.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from . import common

PAGES = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


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
        common.RESULTS = common.Results()
        start = time.perf_counter()
        importlib.import_module(f"benchmarks.{name}").main()
        written = write_page(name, common.RESULTS, time.perf_counter() - start)
        common.console.print(f"wrote {written}")
    return 0


def write_page(name: str, results: common.Results, seconds: float, folder: Path = PAGES) -> Path:
    """Write benchmark ``name``'s section of the Benchmarks page into ``folder``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(common.page(name, results, seconds))
    return path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
