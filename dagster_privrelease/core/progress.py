"""The steps of a release, reported as they run: staging, the model's phases, the judge's verifiers and attacks,
publication (issue #26: a user of a 10M-row table sees where the minutes go).

Code marks a step with ``with step("split"):``; whoever wants to hear about it wraps the work in
``with reporting(reporter):``. Outside any ``reporting`` block a step costs one context-variable read and reports
nothing (the default is silent). A step inside another is named by both, ``model / split``. The reporters of
nested ``reporting`` blocks all hear the steps (the CLI's display and a Dagster asset's run log at once). Steps are
reported from the thread that runs them; work a step hands to a pool of threads is part of that step.

A step's name says what runs, never which individual, group or value it reads: names are fixed strings of the
code (``staging``, ``attack intersection``), so a report holds nothing of the private side.

Every step starts by giving the memory the steps before it freed back to the system (``give_back``), listened to
or not: glibc's malloc keeps freed pages in the arena of the thread that freed them (DuckDB's and numba's worker
threads each have one), where the next step, run on another thread, cannot reuse them, so without it each step
would start from the high-water mark of the ones before (release 2 of 1M Census-KDD rows through the CLI: up to
0.3 GB less between steps, though the peak inside a step moves little, 2.16 -> 2.14 GB; 1.32 -> 1.17 GB at 300k).
``bound_allocators`` (called when ``pipeline`` is imported) keeps the worker threads to one shared arena and Arrow's
buffers on glibc's malloc, so that what is freed is where ``give_back`` reaches it.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["LineReporter", "Reporter", "bound_allocators", "give_back", "reporting", "step"]


def _glibc(name: str) -> Callable[..., int] | None:
    """The C library's function ``name`` among the process's own symbols (``malloc_trim``, ``mallopt``: glibc's),
    or None for a C library without it (musl, macOS). No ``ctypes.util.find_library``: it runs ``ldconfig`` in a
    subprocess."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):
        return None


_TRIM = _glibc("malloc_trim")

#: glibc's ``mallopt`` parameter for the most arenas malloc may make (``M_ARENA_MAX`` of ``<malloc.h>``).
_M_ARENA_MAX = -8
#: The arenas a release process keeps: one for the main thread, one shared by every worker thread.
ARENAS = 2


def bound_allocators() -> None:
    """Keep what the steps free where ``give_back`` returns it, for the whole process.

    Call it before any worker thread starts (``pipeline`` does, when imported). Two allocators otherwise hold
    what the steps freed:

    - glibc's malloc gives each thread that allocates an arena of its own (up to 8 per core): what the worker
      threads of numba, DuckDB's Python side and the local backend free stays spread over their arenas' heaps,
      in pages that still hold a live block, which ``malloc_trim`` cannot return. ``mallopt(M_ARENA_MAX, ...)``
      keeps ``ARENAS``: one for the main thread and one the workers share;
    - Arrow's default pool (mimalloc) keeps its freed pages for later Arrow buffers, which numpy cannot reuse;
      on Arrow's system pool its buffers are glibc's, given back with the rest.

    An operator's ``MALLOC_ARENA_MAX`` or ``ARROW_DEFAULT_MEMORY_POOL`` is left to rule; without glibc the
    arenas are left alone. What it saves is measured in docs/benchmarks.md ("Memory at scale"). O(1).
    """
    mallopt = _glibc("mallopt")
    if _TRIM is not None and mallopt is not None and "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(_M_ARENA_MAX, ARENAS)
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def give_back() -> None:
    """Return to the system the pages glibc's malloc holds free in every arena (``malloc_trim(0)``), so that the
    process's resident memory is what is live. A no-op without glibc. Cost: a walk of the arenas' free lists
    (milliseconds for a heap of GBs)."""
    if _TRIM is not None:
        _TRIM(0)


class Reporter(Protocol):
    """What hears a release's steps."""

    def started(self, name: str) -> None:
        """Step ``name`` (``outer / inner`` for a nested step) has started."""

    def finished(self, name: str, seconds: float) -> None:
        """Step ``name`` has ended after ``seconds`` of wall time (a step that raised is not reported)."""


class LineReporter:
    """One line per finished step, ``<name>: <seconds> s``, handed to ``write`` (a logger's ``info``, a print)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self.write = write

    def started(self, name: str) -> None:
        """Nothing: a line is written when the step ends, with its time."""

    def finished(self, name: str, seconds: float) -> None:
        """Write ``<name>: <seconds> s``."""
        self.write(line(name, seconds))


def line(name: str, seconds: float) -> str:
    """How a finished step reads: ``model / split: 1.23 s``."""
    return f"{name}: {seconds:.2f} s"


#: The reporters listening in this context, and the name of the step that is running ("" outside any).
_ACTIVE: ContextVar[tuple[tuple[Reporter, ...], str]] = ContextVar("privrelease_progress", default=((), ""))


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Inside the block, report every step to ``reporter`` as well as to the reporters already listening (None:
    nothing changes). O(1)."""
    if reporter is None:
        yield
        return
    reporters, running = _ACTIVE.get()
    token = _ACTIVE.set(((*reporters, reporter), running))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextmanager
def step(name: str) -> Iterator[None]:
    """Mark the block as step ``name`` (a fixed string: what runs): every listening reporter hears it start and,
    when the block ends without raising, end with its wall seconds. Silent when nobody listens. The step starts
    with ``give_back``; otherwise O(1)."""
    give_back()
    reporters, running = _ACTIVE.get()
    if not reporters:
        yield
        return
    full = f"{running} / {name}" if running else name
    token = _ACTIVE.set((reporters, full))
    for reporter in reporters:
        reporter.started(full)
    start = time.perf_counter()
    try:
        yield
    finally:
        _ACTIVE.reset(token)
    seconds = time.perf_counter() - start
    for reporter in reporters:
        reporter.finished(full, seconds)
