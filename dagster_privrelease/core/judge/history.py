"""A release history as the judge reads it, and the judge's report.

The judge (``judge.verifiers``, ``judge.attacks``, ``judge.utility``) reads only this: the published tables of the
DuckDB contract and, for publisher-side verification and for the adversary's background knowledge, the
private snapshots and hosting groups. It never reads a model's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ..spec import BoundSpec


@dataclass
class History:
    """Releases 1..n of one protected table.

    spec:         the bound spec (taxonomies and sensitive domain filled in).
    releases:     every ``published.release`` row: ``release_id, group_id, A, A__lo, A__hi, ..., <sensitive>``.
    counterfeits: ``published.counterfeit``: ``release_id, group_id, count`` (R(j) of Xiao-Tao Def. 3).
    snapshots:    ``private.snapshot``: ``release_id, <id>, <attributes>`` (T(j)); the publisher's truth and the
                  adversary's background knowledge B(n) (QI values and lifespans, Xiao-Tao Def. 6).
    hosting:      ``private.hosting``: ``release_id, <id>, group_id`` (each genuine tuple's hosting group).
                  The store gives these four frames with their text columns as pandas categoricals whose
                  categories are sorted (``StoreReader.history``): a verifier or attack reads them as it reads
                  text (equality, order, grouping with ``observed=True``), never by a category's position.
    candidate_sets: the judge's own memo, release id -> the candidate sensitive sets of that release's
                  individuals (``judge.attacks.candidate_sets``: a boolean matrix, rows in snapshot order). Derived
                  from the fields above only; the store keeps it for published releases so that judging
                  release n computes one release's sets, not n.
    memo:         the judge's memo of the releases before the last, (name, release id) -> frame: what an attack
                  or verifier keeps of releases 1..j so that judging release j+1 reads release j+1 only (e.g.
                  ``attacks.intersection``'s running intersections). Each entry is a function of releases 1..j
                  alone; the one who reads it folds the newer releases in and adds its own entry for the last
                  release, which the store keeps (``save_judge_memo``). Empty: every release is folded from scratch.
                  An entry named in ``ARCHIVED`` may hold fewer rows (see there).
    states:       the models' private state (``Release.state``) of releases 1..n by name, each frame with a
                  ``release_id`` column. Only a model's ``judged`` view reads it (e.g. m-invariance's held-back
                  tuples); verifiers and attacks never do.
    first:        the lowest release id whose rows the fields above hold. 1: the complete history. A window
                  (``first == n - 1``, what ``pipeline.judge`` reads before publication) holds releases n-1 and n
                  only; releases before were published and judged, and what the judge needs of them is the memo
                  of release n-1 (``previous_memo``). Judging through a window gives the same reports as judging
                  the complete history; whatever cannot calls ``require_complete``, and the caller reads the
                  complete history instead (``IncompleteHistory``).
    """

    spec: BoundSpec
    releases: pd.DataFrame
    counterfeits: pd.DataFrame
    snapshots: pd.DataFrame | None = None
    hosting: pd.DataFrame | None = None
    candidate_sets: dict[int, np.ndarray] = field(default_factory=dict)
    memo: dict[tuple[str, int], pd.DataFrame] = field(default_factory=dict)
    states: dict[str, pd.DataFrame] = field(default_factory=dict)
    first: int = 1
    _shared: dict[tuple, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def release_ids(self) -> list[int]:
        """The ids of the releases held (``first``..n), ascending. O(rows)."""
        return sorted(int(r) for r in self.releases["release_id"].unique())

    @property
    def complete(self) -> bool:
        """True when the history holds every release from release 1 (not a window)."""
        return self.first <= 1

    def require_complete(self, name: str) -> None:
        """Raise ``IncompleteHistory`` naming ``name`` (the verifier or attack) when this history is a window:
        what calls it reads every release. O(1)."""
        if not self.complete:
            raise IncompleteHistory(f"{name} reads every release; this history holds releases {self.first}.. only")

    def previous_memo(self, name: str) -> pd.DataFrame | None:
        """The memo entry ``(name, n - 1)`` of the last release n (a function of releases 1..n-1), to fold release
        n into. None when there is none and the history is complete (fold every release from scratch);
        ``IncompleteHistory`` when there is none and the history is a window. O(1)."""
        ids = self.release_ids
        last = ids[-1] if ids else 0
        entry = self.memo.get((name, last - 1))
        if entry is None and not self.complete:
            raise IncompleteHistory(f"{name}: no memo of release {last - 1} to judge release {last} through a window")
        return entry

    @contextmanager
    def sharing(self) -> Iterator[History]:
        """Within the block, what several verifiers or attacks derive from the same releases of this history
        (e.g. a release's QI classes, its sensitive codes, a snapshot's ids) is computed once (``shared``) and
        dropped on leaving the outermost block. Outside a block nothing is kept: the frames may change between
        two calls (the caller owns them), never inside one judging pass. O(1)."""
        outer = self._shared is not None
        if not outer:
            self._shared = {}
        try:
            yield self
        finally:
            if not outer:
                self._shared = None

    def shared(self, key: tuple, build: Callable[[], T]) -> T:
        """``build()``, computed once per ``key`` inside a ``sharing`` block (every caller gets the same object:
        read it, never change it), each time outside one. O(1) beyond ``build``."""
        if self._shared is None:
            return build()
        if key not in self._shared:
            self._shared[key] = build()
        return self._shared[key]

    def release(self, release_id: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The published rows of one release (index 0..n-1), a copy; only ``columns`` (in that order) when given.
        O(rows); the memory of one copy of the columns taken (``rows_of``): a reader of a few columns asks for
        them (a Census-KDD release has 25, 16 of them 8-byte numbers)."""
        return rows_of(self.releases, release_id, columns)

    def snapshot(self, release_id: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The snapshot T(j) of one release (index 0..n-1), a copy, only ``columns`` when given; needs the private
        snapshots. O(rows); the memory of one copy of the columns taken (``rows_of``)."""
        if self.snapshots is None:
            raise ValueError("history: no snapshots (the private side) to read T(j) from")
        return rows_of(self.snapshots, release_id, columns)


def rows_of(frame: pd.DataFrame, release_id: int, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of ``frame`` whose ``release_id`` is ``release_id``, in order, as a new frame indexed 0..n-1: the
    frame ``frame[frame["release_id"] == release_id].reset_index(drop=True)`` gives (its ``columns`` only, when
    given), with one copy of the rows instead of two (the mask's take, then ``reset_index``'s copy, both held at
    once at 10M rows). O(rows of ``frame``) time, O(rows of the release x columns taken) memory."""
    return taken(frame, np.flatnonzero(frame["release_id"].to_numpy() == release_id), columns)


def taken(frame: pd.DataFrame, positions: np.ndarray, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``frame.iloc[positions].reset_index(drop=True)`` (of ``columns`` only, when given) with one copy of the
    rows taken instead of two, and none of the columns left out. O(positions x columns taken)."""
    if columns is None:
        out = frame.take(positions)
    else:
        out = frame.iloc[positions, frame.columns.get_indexer(list(columns))]
    out.index = pd.RangeIndex(len(out))
    return out


T = TypeVar("T")

#: The judge's memo entries kept by append (judging release n does not read what the history holds of people
#: who left): memo name -> the columns naming a *unit*, rows kept and read back together (the equivalence
#: attack's retired classes: a class's member rows, by ``release_id, group_id``; the SUG attack's forward weights
#: of the people who left, a row each). A unit's rows are facts of the
#: releases that made it, never changed afterwards. The store keeps each unit once, in an append-only table
#: (``StoreWriter.save_judge_memo``), and gives back as the entry ``(name, n - 1)`` only the units with a person
#: of release n (its hosting) who is not in release n-1 (``StoreReader.history``): so what one who reads such an
#: entry may rely on is that it holds those units, whole, and no unit it did not record; it may hold units that
#: came back since, which the reader drops itself. A history built in memory passes the whole entry, which
#: satisfies that. The entry a fold records may therefore be partial too: the store appends its units not kept yet.
#: A column that an entry gains later (a value new to the sensitive domain) reads as null in the units kept before.
#: ``ID`` among a unit's columns stands for the spec's id column (``unit_columns``): the m-invariance verifiers'
#: individuals who left (``verifiers.xiao_tao.DEPARTED``), a unit each last appearance (person, release).
ID = "<id>"
ARCHIVED: dict[str, tuple[str, ...]] = {"equivalence.retired": ("release_id", "group_id"),
                                        "sug.forward.retired": ("row",),
                                        "verifier.m_invariance.state.departed": (ID, "release_id"),
                                        "verifier.xiao_tao.m_invariance.state.departed": (ID, "release_id")}


def unit_columns(name: str, ident: str) -> tuple[str, ...]:
    """The columns naming a unit of the archived memo entry ``name`` (``ARCHIVED``), ``ID`` as ``ident``. O(1)."""
    return tuple(ident if c == ID else c for c in ARCHIVED[name])


class IncompleteHistory(Exception):
    """A verifier or attack needs more of the past than a window holds (``History.require_complete``,
    ``History.previous_memo``): read the complete history and judge again."""


@dataclass(frozen=True)
class Bound:
    """What a model promises against the attacks (``ModelDescriptor.bound``).

    values: the fewest sensitive values an individual stays linked to (m of m-invariance and m-Distinct, l of
            the l-diversity models; 2, i.e. no disclosure, for a model that promises none, k-anonymity).
    tuples: the fewest tuples that may be an individual's (the correspondence attacks, BCF-anonymity Def. 31 of
            the taxonomy): k, or else m or l.
    """

    values: int = 2
    tuples: int = 2


@dataclass
class Report:
    """The outcome of one verifier or attack.

    name:       e.g. ``"m_invariance"`` or ``"intersection"``.
    ok:         True when the guarantee holds / the attack disclosed nobody beyond the model's bound.
    violations: one row per thing that broke, with the release, group or individual where it broke.
    summary:    small numeric facts for the UI and the CLI (counts, minima, risks).
    """

    name: str
    ok: bool
    violations: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary: dict[str, Any] = field(default_factory=dict)
