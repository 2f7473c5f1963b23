"""The steps of a release, reported as they run: staging, the model's phases, the judge's verifiers and attacks,
publication (issue #26: a user of a 10M-row table sees where the minutes go).

Code marks a step with ``with step("split"):``; whoever wants to hear about it wraps the work in
``with reporting(reporter):``. Outside any ``reporting`` block a step costs one context-variable read and reports
nothing (the default is silent). A step inside another is named by both, ``model / split``. The reporters of
nested ``reporting`` blocks all hear the steps (the CLI's display and a Dagster asset's run log at once). Steps are
reported from the thread that runs them; work a step hands to a pool of threads is part of that step.

A step's name says what runs, never which individual, group or value it reads: names are fixed strings of the
code (``staging``, ``attack intersection``), so a report holds nothing of the private side.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["LineReporter", "Reporter", "reporting", "step"]


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
    when the block ends without raising, end with its wall seconds. Silent, and O(1), when nobody listens."""
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
