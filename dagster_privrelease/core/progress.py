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
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["LineReporter", "Reporter", "give_back", "reporting", "step"]


def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc's) among the process's own symbols, or None for a C library without
    it (musl, macOS). No ``ctypes.util.find_library``: it runs ``ldconfig`` in a subprocess."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


_TRIM = _malloc_trim()


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
