"""The correspondence attacks on incremental data: forward, cross and backward (taxonomy Defs. 14-16, 24-31,
Theorems 2, 3, 5; BCF-anonymity, Def. 31).

The adversary knows the class a user's tuple is in (the hosting groups) and compares the classes of two
consecutive releases; the number of tuples that may still be the user's is judged against ``bound.tuples``.
They assume inserts only (Defs. 24-31): a history where somebody left is skipped.

Each attack reads two consecutive releases at a time, so it is judged release by release: what it
keeps of releases 1..j is its memo of release j (``History.memo``; ``_Tally``): the rows of every pair up to j
with fewer candidates than the bound, how many rows there are of each size, and whether the history is still
homogeneous and incremental. Judging release n folds the pair (n-1, n) into the memo of n-1: the window of
``pipeline.judge`` (releases n-1 and n) suffices.

The joins by individual run on the table's backend (``partitioned.lookup``), once per pair and judging pass for
the three attacks: each user hosted in T*_i found among the users hosted in T*_{i+1} (``_corresponding``: the
users in both, whose classes Q1 and Q2 the forward and cross attacks pair, Defs. 24-28; the users of T*_{i+1}
found in no row, the backward attack's new users, Defs. 29-30) and each individual of T(i) among those of
T(i+1) (``_incremental``: the inserts-only assumption of Defs. 24-31).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from ...intervals import overlapping_pairs
from ...partitioned import lookup
from ..history import Bound, History, IncompleteHistory, Report
from ..report import nobody_attacked, skipped
from .intersection import NO_DISCLOSURE, release_classes, snapshot_ids

#: What Defs. 24-31 assume of releases 1..j, as the memo keeps it (``_Tally.status``): every release homogeneous
#: and every individual still present (inserts only); else the first broken assumption, in the order the
#: attacks report them (a non-homogeneous release wins over a departure).
OK, NON_HOMOGENEOUS, NOT_INCREMENTAL = 0, 1, 2

_REASONS = {
    NON_HOMOGENEOUS: "non-homogeneous release: there are no classes to correspond",
    NOT_INCREMENTAL: "not an incremental history (some individual left): Defs. 24-31 assume inserts only",
}

#: The per-pair rows of an attack: ``id, before, after, class_size, crack, size`` for the users it attacks in
#: the pair of consecutive releases (before, after).
PairRows = Callable[[History, int, int], pd.DataFrame]


@dataclass
class _Tally:
    """What a correspondence attack keeps of releases 1..j (its memo of release j).

    rows:   the rows (``id, before, after, class_size, crack, size``) of every pair of consecutive releases up to
            j whose ``size`` (candidate tuples left) is below ``cap``, in pair order.
    sizes:  ``sizes[s]``: how many rows of those pairs (all of them, not only those below ``cap``) leave ``s``
            candidates; at least one entry.
    cap:    the bound the rows were kept for: the memo serves any bound up to ``cap``.
    status: ``OK``, ``NON_HOMOGENEOUS`` or ``NOT_INCREMENTAL`` (then ``rows`` and ``sizes`` are empty: the attack
            is skipped for every later release too).
    """

    rows: pd.DataFrame
    sizes: np.ndarray
    cap: int
    status: int


def _hosting_classes(history: History, release_id: int, values: bool = True
                     ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Hosting class of each individual of release j, and the class boxes and value counts (``class_boxes``).
    ``values`` False (a pair of releases of which one leaves the sensitive attribute out): one count per class,
    its rows, as if every row had the same value: the adversary cannot tell the records of a class apart by
    value, and the cracks come from the classes' sizes alone. O(rows of release j, log)."""
    spec = history.spec
    assert history.hosting is not None
    classes = release_classes(history, release_id)
    index = pd.Series(classes.label, index=classes.group_id).groupby(level=0).first()
    host = history.hosting[history.hosting["release_id"] == release_id]
    frame = pd.DataFrame({spec.id: host[spec.id].to_numpy(),
                          "cls": index.reindex(host["group_id"].to_numpy(np.float64)).to_numpy()})
    counts = (classes.counts(len(spec.sensitive_values)) if values
              else np.bincount(classes.label, minlength=len(classes.lo)).astype(np.float64)[:, None])
    return frame, classes.lo, classes.hi, counts


def _corresponding(history: History, before: int, after: int) -> np.ndarray:
    """For each user hosted in T*_before (hosting order), her row among the users hosted in T*_after, -1 when she
    is not there: the join by id of the taxonomy's forward, cross and backward attacks (Defs. 14-16, crack sizes
    Defs. 24-30: a user's class Q1 in T*_i and her class Q2 in T*_{i+1}; the users of T*_{i+1} no row points to
    are the backward attack's new ones). One ``partitioned.lookup`` on the table's backend per pair and judging pass (``History.shared``).
    O(n_before + n_after)."""
    assert history.hosting is not None
    hosting, ident = history.hosting, history.spec.id

    def build() -> np.ndarray:
        ids = {j: hosting.loc[hosting["release_id"].to_numpy() == j, ident] for j in (before, after)}
        return lookup(ids[before], ids[after], "corresponding classes by individual")

    return history.shared(("corresponding", before, after), build)


def _both_publish_values(history: History, before: int, after: int) -> bool:
    """Both releases publish the sensitive attribute (``Classes.sensitive``). O(1) after ``release_classes``."""
    return release_classes(history, before).sensitive and release_classes(history, after).sensitive


def _crack(both: pd.DataFrame, c1: np.ndarray, c2: np.ndarray, side: int) -> np.ndarray:
    """Theorems 2 and 3: per (Q1, Q2) the sum over the repetition subsets with the same sensitive value of
    ``|g| - min(|g|, |g'|)``, ``g`` the subset of the class on ``side`` (1: forward, 2: cross). O(users x
    values)."""
    a, b = c1[both["cls1"].to_numpy()], c2[both["cls2"].to_numpy()]
    mine = a if side == 1 else b
    common = (a > 0) & (b > 0)
    return np.where(common, mine - np.minimum(a, b), 0).sum(axis=1).astype(np.int64)


def _bcf_rows(side: int) -> PairRows:
    """The pair rows of the forward (``side`` 1) or cross (``side`` 2) attack: every user in both releases."""

    def rows(history: History, before: int, after: int) -> pd.DataFrame:
        """Forward / cross rows of one pair of consecutive releases. O(n_before + n_after, log; users x
        values)."""
        spec = history.spec
        values = _both_publish_values(history, before, after)
        h1, _, _, c1 = _hosting_classes(history, before, values)
        h2, _, _, c2 = _hosting_classes(history, after, values)
        at = _corresponding(history, before, after)
        kept = np.flatnonzero(at >= 0)  # the users in both releases, in T*_i's hosting order (an inner merge's)
        both = pd.DataFrame({spec.id: h1[spec.id].to_numpy()[kept], "cls1": h1["cls"].to_numpy()[kept],
                             "cls2": h2["cls"].to_numpy()[at[kept]]})
        crack = _crack(both, c1, c2, side)
        size = (c1 if side == 1 else c2).sum(axis=1).astype(np.int64)[both[f"cls{side}"].to_numpy()]
        return pd.DataFrame({spec.id: both[spec.id], "before": np.int64(before), "after": np.int64(after),
                             "class_size": size, "crack": crack, "size": size - crack})

    return rows


def _backward_rows(history: History, before: int, after: int) -> pd.DataFrame:
    """Backward rows (Theorem 5) of one pair of consecutive releases: every user new in ``after``. Class-box
    overlaps use ``intervals.overlapping_pairs``, on the attributes both releases publish; the two hops are sparse products. O(overlaps + values x
    overlaps^2 / classes) at worst."""
    spec = history.spec
    values = _both_publish_values(history, before, after)
    h1, lo1, hi1, c1 = _hosting_classes(history, before, values)
    h2, lo2, hi2, c2 = _hosting_classes(history, after, values)
    at = _corresponding(history, before, after)
    fresh = np.ones(len(h2), dtype=bool)
    fresh[at[at >= 0]] = False  # a user's id is hosted once per release
    new = h2[fresh]
    if not len(new):
        return _empty_rows(history)
    # a vertical history publishes other attributes in each release: an attribute one of them leaves out
    # constrains nothing, so class boxes are compared on the attributes both publish
    names1, names2 = release_classes(history, before).names, release_classes(history, after).names
    k1 = [names1.index(a) for a in names1 if a in names2]
    k2 = [names2.index(a) for a in names1 if a in names2]
    i, j = overlapping_pairs(lo1[:, k1], hi1[:, k1], lo2[:, k2], hi2[:, k2])
    overlap = sparse.csr_matrix((np.ones(len(i)), (i, j)), shape=(len(lo1), len(lo2)))
    g1 = np.asarray((overlap.T @ sparse.csr_matrix(c1)).todense())  # (Q2, s): |G1|
    g2 = np.zeros_like(g1)
    for s in np.flatnonzero(c2.sum(axis=0)):
        reach = overlap.T @ sparse.diags((c1[:, s] > 0).astype(np.float64)) @ overlap  # Q2 x Q2 via G1
        g2[:, s] = (reach > 0).astype(np.float64) @ c2[:, s]
    crack = np.where(g2 < c2, 0, np.clip(g1 - (g2 - c2), 0, None))
    crack = np.minimum(np.where(c2 > 0, crack, 0), c2).sum(axis=1).astype(np.int64)
    cls = new["cls"].to_numpy()
    size = c2.sum(axis=1).astype(np.int64)
    return pd.DataFrame({spec.id: new[spec.id].to_numpy(), "before": np.int64(before), "after": np.int64(after),
                         "class_size": size[cls], "crack": crack[cls], "size": size[cls] - crack[cls]})


# ------------------------------------------------------------------------------------------------------ the memo


def _empty_rows(history: History) -> pd.DataFrame:
    """The pair rows' frame with no row (the id column typed as the hosting groups' ids). O(1)."""
    ident = history.spec.id
    kind = history.hosting[ident].dtype if history.hosting is not None else np.dtype(object)
    return pd.DataFrame({ident: pd.Series([], dtype=kind),
                         **{c: pd.Series([], dtype=np.int64) for c in ("before", "after", "class_size", "crack",
                                                                         "size")}})


def _skipped_tally(history: History, cap: int, status: int) -> _Tally:
    """The memo of a history the attack is skipped on from now on (``status``). O(1)."""
    return _Tally(_empty_rows(history), np.zeros(1, dtype=np.int64), cap, status)


def _homogeneous(history: History, release_id: int) -> bool:
    """Every published row of the release has a group (its classes are known). O(rows held), once per judging
    pass (``release_classes``)."""
    return release_classes(history, release_id).homogeneous


def _incremental(history: History, before: int, after: int) -> bool:
    """Everybody of T(before) is in T(after), and no release lies between them (else whoever was in T(before)
    skipped one): the inserts-only assumption of Defs. 24-31 over one pair, each individual of T(before) looked up
    among T(after)'s on the table's backend (``partitioned.lookup``). O(n_before + n_after), once per judging
    pass for the three attacks (``History.shared``)."""

    def build() -> bool:
        gone = lookup(snapshot_ids(history, before), snapshot_ids(history, after), "departures by individual") < 0
        return not gone.any() and (after - before == 1 or not len(gone))

    return history.shared(("incremental", before, after), build)


def _fold(history: History, tally: _Tally, before: int, after: int, pair_rows: PairRows) -> _Tally:
    """``tally`` (releases 1..``before``) with the pair (before, after) folded in: the memo of ``after``.
    O(n_before + n_after) plus ``pair_rows`` and the rows kept."""
    if tally.status == NON_HOMOGENEOUS:
        return tally
    if not _homogeneous(history, after):
        return _skipped_tally(history, tally.cap, NON_HOMOGENEOUS)
    if tally.status == NOT_INCREMENTAL:
        return tally
    if not _incremental(history, before, after):
        return _skipped_tally(history, tally.cap, NOT_INCREMENTAL)
    frame = pair_rows(history, before, after)
    size = frame["size"].to_numpy(np.int64)
    counts = np.bincount(size, minlength=len(tally.sizes)) if len(size) else np.zeros(1, dtype=np.int64)
    sizes = np.zeros(max(len(counts), len(tally.sizes)), dtype=np.int64)
    sizes[: len(counts)] += counts
    sizes[: len(tally.sizes)] += tally.sizes
    kept = frame[size < tally.cap]
    rows = pd.concat([tally.rows, kept], ignore_index=True) if len(kept) else tally.rows
    return _Tally(rows, sizes, tally.cap, OK)


def _sizes_name(name: str) -> str:
    """The memo name of an attack's size counts and status (its rows are under ``name``)."""
    return f"{name}.sizes"


def _encode(history: History, name: str, release_id: int, tally: _Tally) -> None:
    """Record ``tally`` as the memo of ``release_id``: ``(name, j)`` the rows, ``(name.sizes, j)`` one row per
    size (``size, rows``) with ``cap`` and ``status`` on every row (plain int columns, as the store's memo blobs
    keep them). O(rows kept + sizes)."""
    history.memo[(name, release_id)] = tally.rows
    history.memo[(_sizes_name(name), release_id)] = pd.DataFrame({
        "size": np.arange(len(tally.sizes), dtype=np.int64), "rows": tally.sizes,
        "cap": np.int64(tally.cap), "status": np.int64(tally.status)})


def _decode(history: History, rows: pd.DataFrame | None, sizes: pd.DataFrame | None) -> _Tally | None:
    """The ``_Tally`` of a memo entry (``_encode``), None when either frame is missing. O(rows kept + sizes)."""
    if rows is None or sizes is None or not len(sizes):
        return None
    counts = np.zeros(int(sizes["size"].max()) + 1, dtype=np.int64)
    counts[sizes["size"].to_numpy(np.int64)] = sizes["rows"].to_numpy(np.int64)
    rows = rows if len(rows) else _empty_rows(history)
    return _Tally(rows, counts, int(sizes["cap"].iloc[0]), int(sizes["status"].iloc[0]))


def _tally(history: History, name: str, cap: int, pair_rows: PairRows) -> _Tally:
    """The attack's memo of the last release n (``_Tally``), recorded in ``history.memo``: read back when this
    history was attacked already, else the memo of release n-1 (``History.previous_memo``) with the pair
    (n-1, n) folded in, else (a complete history without it) every pair folded from release 1. A memo kept for a
    bound below ``cap`` serves a complete history no more than a missing one; through a window it raises
    ``IncompleteHistory``. O(n_{n-1} + n_n + rows kept) with the memo, O(history) without."""
    ids = history.release_ids
    last = ids[-1]
    done = _decode(history, history.memo.get((name, last)), history.memo.get((_sizes_name(name), last)))
    if done is not None and done.cap >= cap:
        return done
    tally = _decode(history, history.previous_memo(name), history.previous_memo(_sizes_name(name)))
    if tally is not None and tally.cap < cap:
        if not history.complete:
            raise IncompleteHistory(f"{name}: the memo of release {last - 1} keeps the users below {tally.cap} "
                                    f"candidates, not below {cap}")
        tally = None
    if tally is None:
        status = OK if _homogeneous(history, ids[0]) else NON_HOMOGENEOUS
        tally, pairs = _skipped_tally(history, cap, status), list(itertools.pairwise(ids))
    else:
        pairs = [(ids[-2], ids[-1])]
    for before, after in pairs:
        tally = _fold(history, tally, before, after, pair_rows)
    _encode(history, name, last, tally)
    return tally


def _correspondence_report(name: str, history: History, bound: Bound, pair_rows: PairRows) -> Report:
    """The report of one correspondence attack over every pair of consecutive releases: rows below
    ``bound.tuples`` (with ``risk`` = 1 / size), the summary counted from the memo's sizes. O(memo) beyond
    ``_tally``."""
    if history.hosting is None or history.snapshots is None:
        return skipped(name, "no hosting groups or snapshots: the classes of each user are unknown")
    single = skipped(name, "a single release has no correspondence")
    if not history.release_ids:
        return single
    tally = _tally(history, name, bound.tuples, pair_rows)
    if tally.status == NON_HOMOGENEOUS:
        return skipped(name, _REASONS[NON_HOMOGENEOUS])
    if len(history.release_ids) < 2:
        return single
    if tally.status == NOT_INCREMENTAL:
        return skipped(name, _REASONS[NOT_INCREMENTAL])
    sizes, limit = tally.sizes, int(bound.tuples)
    if name == "backward" and not sizes.sum():
        return nobody_attacked(name, limit)
    below = tally.rows["size"].to_numpy(np.int64) < limit
    violations = tally.rows[below].reset_index(drop=True)
    violations["risk"] = 1.0 / np.maximum(violations["size"].to_numpy(np.float64), 1)
    present = np.flatnonzero(sizes)
    summary = {"attacked": int(sizes.sum()), "disclosed": int(sizes[1]) if len(sizes) > 1 else 0,
               "below_bound": int(sizes[: max(limit, 0)].sum()), "bound": limit,
               "min_candidates": int(present[0]) if len(present) else 0}
    return Report(name, not below.any(), violations, summary)


# ---------------------------------------------------------------------------------------------------- the attacks


def forward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Forward attack (taxonomy Def. 14; F-anonymity, Defs. 24-25, Theorem 2, Example 10) on incremental data.

    For a user in both T*_i (class Q1) and T*_{i+1} (class Q2), each repetition subset ``g`` of Q1 (its tuples
    with one sensitive value) has crack size ``|g| - min(|g|, |g'|)`` against the subset ``g'`` of Q2 with the
    same value; ``|Q1| - F(Q1, Q2)`` candidates remain for the user in T*_i. Violations: ``id, before, after,
    class_size, crack, size, risk`` with ``size`` below the bound (BCF-anonymity, Def. 31), over every pair of
    consecutive releases; the summary counts every user of every pair.

    Incremental (``_tally``): judging release n folds the pair (n-1, n) into the memo of release n-1, so it
    costs O(n_{n-1} log + n_n log + users x values + rows kept below the bound), whatever n; without the memo
    (a complete history judged from scratch) every pair, O(releases x (n log n + users x values)).
    """
    return _correspondence_report("forward", history, bound, _bcf_rows(1))


def cross_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Cross attack (taxonomy Def. 15; C-anonymity, Defs. 27-28, Theorem 3): as ``forward_attack`` from the
    side of Q2, crack sizes ``|g'| - min(|g|, |g'|)`` and ``|Q2| - C(Q1, Q2)`` candidates in T*_{i+1}. Same
    cost, incremental the same way."""
    return _correspondence_report("cross", history, bound, _bcf_rows(2))


def backward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Backward attack (taxonomy Def. 16; B-anonymity, Defs. 29-30, Theorem 5, Example 5) on incremental data.

    For a user new in T*_{i+1} (class Q2) and each repetition subset ``g2`` of Q2 with value s: G1 = the
    tuples of T*_i with value s whose class box intersects Q2's (they could be records of g2), G2 = the tuples
    of T*_{i+1} with value s whose class box intersects one of those classes. The crack size is 0 when
    ``|G2| < |g2|``, else ``max(0, |G1| - (|G2| - |g2|))`` (capped at ``|g2|``); ``|Q2| - B(Q2)`` candidates
    remain. Class-box overlaps use ``intervals.overlapping_pairs``; the two hops are sparse products.

    Incremental as ``forward_attack``: judging release n costs the pair (n-1, n), O(overlaps + values x
    overlaps^2 / classes) at worst, plus the rows kept below the bound; from scratch, that for every pair.
    """
    return _correspondence_report("backward", history, bound, _backward_rows)
