"""The scaling curve of a release's memory and CPU: 1M, 3M, 10M and 30M rows through ``privrelease release``.

Data: the Census-KDD workers (``datasets.load_census_kdd(workers_only=True)``) **resampled with replacement**
(``resampled``) to ``n + r`` rows, r = n / 10, with text ids (``p000000123``): T(1) is the first ``n`` rows,
T(2) is T(1) without ``r`` rows drawn at random, with the other ``r`` rows appended (Xiao-Tao §5's protocol,
``core.stream``, built with Arrow so that a 30M-row stream costs this process little). Both snapshots are Parquet
files; the spec is ``resources/census_kdd.yaml`` (m-invariance, m = 4).

Each release runs in a fresh process (``privrelease release --snapshot``), so its peak resident memory is the
process's own (``ru_maxrss`` of the child, ``os.wait4``); its CPU seconds are the child's user + system time
(every thread, DuckDB's too), beside the wall. The floor is DuckDB reading T(2) from Parquet and sorting it on the
quasi-identifiers and the sensitive column (``parquet_sort_floor``), measured in the same run. A child whose
resident memory passes ``PRIVRELEASE_BENCH_MAX_GB`` (default 12: the machine is shared) is stopped and the row
says so.

Sizes: ``PRIVRELEASE_BENCH_SCALE_ROWS`` (comma-separated row counts), else 1M and 3M, and all four with
``PRIVRELEASE_BENCH_LONG=1``. Targets (issue #26): release 2 of 10M rows at most 6 GB; of 30M rows at most 8 GB;
a release's CPU at most 15x the floor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dagster_privrelease import datasets
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import DatasetUnavailable

from .common import ROOT, console, figure, parquet_sort_floor, print_table, ratio, skip, verdict

CENSUS = ROOT / "resources" / "census_kdd.yaml"
PRIVRELEASE = Path(sys.executable).parent / "privrelease"
LONG = os.environ.get("PRIVRELEASE_BENCH_LONG") == "1"
MAX_GB = float(os.environ.get("PRIVRELEASE_BENCH_MAX_GB", "12"))
#: Peak resident memory targets of release 2 by size (issue #26).
TARGET_GB = {10_000_000: 6.0, 30_000_000: 8.0}
CPU_TARGET = 15.0


def sizes() -> list[int]:
    """The row counts to run: ``PRIVRELEASE_BENCH_SCALE_ROWS``, else 1M and 3M (and 10M, 30M when long)."""
    given = os.environ.get("PRIVRELEASE_BENCH_SCALE_ROWS", "").strip()
    if given:
        return [int(float(s)) for s in given.split(",") if s.strip()]
    return [1_000_000, 3_000_000, 10_000_000, 30_000_000] if LONG else [1_000_000, 3_000_000]


def resampled(n: int, folder: Path, seed: int = 3) -> tuple[Path, Path]:
    """Write T(1) (``n`` rows) and T(2) (r = n / 10 deleted, r inserted) of the Census-KDD workers resampled with
    replacement, text ids, as ``folder/t1.parquet`` and ``t2.parquet``; return their paths. Arrow ``take``s of
    the 144,930 source rows (text columns dictionary-encoded), so the cost is the files, not frames of objects."""
    spec = load_spec(CENSUS)
    source = pa.Table.from_pandas(datasets.load_census_kdd(workers_only=True)[spec.columns], preserve_index=False)
    source = pa.table({name: pc.dictionary_encode(column) if pa.types.is_string(column.type) else column
                       for name, column in zip(source.column_names, source.columns, strict=True)})
    rng = np.random.default_rng(seed)
    r = n // 10
    rows = source.take(pa.array(rng.integers(0, source.num_rows, size=n + r)))
    ids = pc.binary_join_element_wise("p", pc.utf8_lpad(pc.cast(pa.array(np.arange(n + r)), pa.string()), 9, "0"), "")
    rows = rows.set_column(rows.schema.get_field_index(spec.id), spec.id, ids)
    first = rows.slice(0, n)
    kept = np.ones(n, dtype=bool)
    kept[rng.choice(n, size=r, replace=False)] = False
    second = pa.concat_tables([first.filter(pa.array(kept)), rows.slice(n, r)])
    paths = folder / "t1.parquet", folder / "t2.parquet"
    plain = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                       for f in first.schema])
    pq.write_table(first.cast(plain), paths[0])
    pq.write_table(second.cast(plain), paths[1])
    del source, rows, ids, first, second
    pa.default_memory_pool().release_unused()  # for the releases: at 10M this process held 3 GB through them
    return paths


@dataclass
class Run:
    """One child process: wall and CPU seconds, peak resident memory (GB), and why it stopped (None: it ended)."""

    wall: float
    cpu: float
    peak_gb: float
    stopped: str | None = None
    failed: str | None = None


def released(db: Path, snapshot: Path) -> Run:
    """``privrelease release`` of ``snapshot`` into ``db`` in a fresh process; stopped (SIGKILL) when its resident
    memory passes ``MAX_GB`` (sampled every 50 ms from ``/proc``). Its error output goes to ``<db>.stderr``."""
    log = db.with_suffix(".stderr")
    start = time.perf_counter()
    with log.open("wb") as errors:
        process = subprocess.Popen([str(PRIVRELEASE), "release", "--spec", str(CENSUS), "--db", str(db),
                                    "--snapshot", str(snapshot)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors)
    stopped: list[str] = []
    done = threading.Event()

    def watch() -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not done.wait(0.05):
            try:
                with open(f"/proc/{process.pid}/statm") as fh:
                    now = int(fh.read().split()[1]) * page / 2**30
            except (OSError, IndexError):
                return
            if now > MAX_GB:
                stopped.append(f"resident memory {now:.1f} GB > {MAX_GB:g} GB")
                os.kill(process.pid, signal.SIGKILL)
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(process.pid, 0)
    done.set()
    watcher.join()
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    process.returncode = code  # reaped by os.wait4
    last = log.read_text(errors="replace").strip().splitlines()[-1:]
    failed = None if code == 0 or stopped else f"exit {code}: {' '.join(last)}"
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20, stopped[0] if stopped else None,
               failed)


def curve(n: int, rows: list) -> bool:
    """Releases 1 and 2 of ``n`` rows and the floor; append their rows; False when a release was stopped."""
    spec = load_spec(CENSUS)
    with tempfile.TemporaryDirectory(prefix="privrelease-scale-") as tmp:
        folder = Path(tmp)
        one, two = resampled(n, folder)
        floor_wall, floor_cpu = parquet_sort_floor(two, [*spec.quasi_identifiers, spec.sensitive])
        for release, snapshot in ((1, one), (2, two)):
            run = released(folder / "releases.duckdb", snapshot)
            target = TARGET_GB.get(n) if release == 2 else None
            if run.stopped or run.failed:
                rows.append((f"{n / 1e6:g}M", release, figure(run.wall), figure(run.cpu), f"> {run.peak_gb:.2f}",
                             f"stopped: {run.stopped}" if run.stopped else run.failed, "-",
                             f"<= {target:g} GB" if target else "-", "NOT met" if target else "-"))
                console.print(" | ".join(map(str, rows[-1])), highlight=False)
                return False
            rows.append((f"{n / 1e6:g}M", release, figure(run.wall), figure(run.cpu), f"{run.peak_gb:.2f}",
                         f"{figure(floor_cpu)} CPU, {figure(floor_wall)} wall", ratio(run.cpu, floor_cpu),
                         f"<= {target:g} GB" if target else "-", verdict(run.peak_gb, target)))
            console.print(" | ".join(map(str, rows[-1])), highlight=False)
    return True


def main() -> None:
    if not PRIVRELEASE.exists():
        skip("scaling curve", f"no {PRIVRELEASE.name} beside {sys.executable} (install the package)")
        return
    try:
        datasets.load_census_kdd(workers_only=True)
    except DatasetUnavailable as exc:
        skip("scaling curve", str(exc))
        return
    rows: list = []
    for n in sizes():
        if not curve(n, rows):
            skip(f"sizes above {n / 1e6:g}M", "the release at this size was stopped or failed")
            break
    if not LONG and not os.environ.get("PRIVRELEASE_BENCH_SCALE_ROWS"):
        skip("10M and 30M rows", "set PRIVRELEASE_BENCH_LONG=1 (each release a fresh process of several GB and "
             "tens of minutes)")
    print_table(
        "Scaling: m-invariance (m = 4), Census-KDD workers resampled, text ids, r = n/10, `privrelease release`",
        ["rows", "release", "wall s", "CPU s", "peak RSS GB", "floor (DuckDB read+sort of T(2))", "CPU / floor",
         "memory target", "met?"], rows,
        f"each release a fresh process; CPU = user + system of the child (every thread); peak RSS = ru_maxrss. "
        f"Floor target: CPU <= {CPU_TARGET:g}x. Stopped above {MAX_GB:g} GB.")


if __name__ == "__main__":
    main()
