"""Helpers shared by the benchmarks: timing, the peer tools' own virtual environments, and result tables.

A figure that cannot be measured (no data, no peer) is skipped with a printed reason, never silently. Every table
printed and every skip is also kept in ``RESULTS``, from which ``python -m benchmarks`` writes each benchmark's
section of the docs' Benchmarks page (``page``).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dagster_privrelease.errors import DatasetUnavailable

ROOT = Path(__file__).resolve().parents[1]
console = Console() if sys.stdout.isatty() else Console(width=160)  # a log keeps whole rows


@dataclass
class Results:
    """What one benchmark printed: its tables (title, columns, rows, note) and its skips (what, reason)."""

    tables: list[tuple[str, list[str], list[list[str]], str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


#: The tables and skips printed since the last ``Results()`` reset (``benchmarks.__main__`` resets it per module).
RESULTS = Results()


class PeerUnavailable(RuntimeError):
    """A peer tool could not be installed or run; the message says why."""


def timed(fn: Callable[..., Any], *args, repeat: int = 1, **kwargs) -> tuple[Any, float]:
    """``(result, seconds)``: the best wall-clock time of ``repeat`` calls, and the last call's result."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return result, best


def ratio(numerator: float | None, denominator: float | None) -> str:
    """``numerator / denominator`` as ``"12.3x"``, or ``"-"`` when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return "-"
    return f"{numerator / denominator:.3g}x"


def read_sort_floor(snapshot: pd.DataFrame, order: Sequence[str], folder: Path,
                    repeat: int = 3) -> tuple[float, float]:
    """``(wall, CPU)`` seconds for DuckDB to read ``snapshot`` from Parquet (written to ``folder``) and sort it on
    ``order`` (the QIs and the sensitive column), each the least of ``repeat`` runs: the floor a release is
    compared with (one run on this machine varied from 6.7 s to 9.2 s wall at 10M rows). CPU is
    ``time.process_time``, every DuckDB thread included, so it compares with a release's CPU on a loaded machine.
    Cost: one Parquet write, ``repeat`` sorts."""
    path = folder / "snapshot.parquet"
    snapshot.to_parquet(path)
    return parquet_sort_floor(path, order, repeat)


def parquet_sort_floor(path: Path, order: Sequence[str], repeat: int = 3) -> tuple[float, float]:
    """``read_sort_floor`` of a snapshot already in the Parquet file ``path``: ``(wall, CPU)`` seconds, the least
    of ``repeat`` runs, for DuckDB to read it and sort it on ``order``. Cost: ``repeat`` sorts in DuckDB (its
    memory, no frame in Python)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    columns = ", ".join('"' + c.replace('"', '""') + '"' for c in order)
    wall, cpu = np.inf, np.inf
    for _ in range(repeat):
        start, clock = time.perf_counter(), time.process_time()
        con.execute(f"CREATE OR REPLACE TEMP TABLE sorted AS SELECT * FROM read_parquet('{path}') ORDER BY {columns}")
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - clock)
    con.close()
    return float(wall), float(cpu)


def verdict(value: float | None, target: float | None) -> str:
    """``"met"`` when ``value <= target``, ``"NOT met"`` when above, ``"-"`` when either is missing."""
    if value is None or target is None:
        return "-"
    return "met" if value <= target else "NOT met"


def figure(value: float | None, digits: int = 3) -> str:
    """A measured number for a table cell (``"-"`` when not measured)."""
    return "-" if value is None else f"{value:.{digits}g}"


def skip(what: str, reason: str) -> None:
    """Say that a figure is skipped, and why."""
    console.print(f"[yellow]skipped[/yellow] {what}: {reason}")
    RESULTS.skipped.append((what, reason))


T = TypeVar("T")


def loaded(what: str, load: Callable[[], T]) -> T | None:
    """``load()`` (a real dataset), or None after saying that ``what`` is skipped because the data cannot be had
    (``DatasetUnavailable``, whose message says why)."""
    try:
        return load()
    except DatasetUnavailable as exc:
        skip(what, str(exc))
        return None


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> None:
    """Print a result table (rich), with an optional note under it, and keep it in ``RESULTS`` for the docs page."""
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    console.print(table)
    if note:
        console.print(note)
    RESULTS.tables.append((title, list(columns), [[str(cell) for cell in row] for row in rows], note))


def machine() -> str:
    """One line naming this machine: processor, cores, load average, OS and Python."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "-"
    return (f"{cpu}, {os.cpu_count()} cores, load average {load}; {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def _plain(text: str) -> str:
    """Console markup removed, and a table cell's pipes escaped."""
    return Text.from_markup(text).plain.replace("|", "\\|").replace("\n", " ")


def page(name: str, results: Results, seconds: float, when: datetime.datetime | None = None) -> str:
    """The markdown section of benchmark ``name`` for the docs' Benchmarks page: when and where it ran, how long it
    took, every table it printed and every figure it skipped, with the reason."""
    when = when or datetime.datetime.now(datetime.UTC)
    lines = [f"### `{name}`", "", f"`python -m benchmarks {name.removeprefix('bench_')}`, run "
             f"{when:%Y-%m-%d %H:%M} UTC in {seconds:.0f} s on {machine()}.", ""]
    for title, columns, rows, note in results.tables:
        lines += [f"**{_plain(title)}**", "", "| " + " | ".join(_plain(c) for c in columns) + " |",
                  "|" + "---|" * len(columns), *("| " + " | ".join(_plain(c) for c in row) + " |" for row in rows), ""]
        if note:
            lines += [_plain(note), ""]
    lines += [f"- skipped {_plain(what)}: {_plain(reason)}" for what, reason in results.skipped]
    if not results.tables and not results.skipped:
        lines.append("No table was printed.")
    return "\n".join(lines).rstrip() + "\n"


def peer_python(venv: str, requirement: str) -> Path:
    """The Python of the peer's own virtual environment ``ROOT/venv``, created with ``requirement`` if missing.

    Peers pin old numpy/pandas, so they never share the project's environment. Raises PeerUnavailable with
    pip's last lines when the install fails (e.g. no registry).
    """
    path = ROOT / venv
    python = path / "bin" / "python"
    package = requirement.split("==")[0]
    if python.exists() and _run([str(python), "-c", f"import {package}"]).returncode == 0:
        return python
    console.print(f"creating {path} with {requirement} (once) ...")
    steps = ([sys.executable, "-m", "venv", str(path)], [str(path / "bin" / "pip"), "install", "-q", requirement])
    for step in steps:
        done = _run(step)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            raise PeerUnavailable(f"{' '.join(step)} failed: {tail}")
    return python


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False)
