"""The correspondence attacks on incremental data: forward, cross and backward (taxonomy Defs. 14-16, 24-31,
Theorems 2, 3, 5; BCF-anonymity, Def. 31).

The adversary knows the class a user's tuple is in (the hosting groups) and compares the classes of two
consecutive releases; the number of tuples that may still be the user's is judged against ``bound.tuples``.
They assume inserts only (Defs. 24-31): a history where somebody left is skipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pandas as pd
from scipy import sparse

from ...grouping import class_boxes, released_attributes
from ...intervals import overlapping_pairs
from ..history import Bound, History, Report
from ..report import attack_report, nobody_attacked, skipped
from .intersection import NO_DISCLOSURE

Classes = tuple[np.ndarray, np.ndarray, np.ndarray]


def _hosting_classes(history: History, release_id: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Hosting class of each individual of release j, and the class boxes and value counts (``class_boxes``)."""
    spec = history.spec
    assert history.hosting is not None
    table = history.release(release_id)
    names = released_attributes(table, spec)
    label, lo, hi, counts = class_boxes(table, spec, names)
    index = pd.Series(label, index=table["group_id"].to_numpy()).groupby(level=0).first()
    host = history.hosting[history.hosting["release_id"] == release_id]
    frame = pd.DataFrame({spec.id: host[spec.id].to_numpy(), "cls": index.reindex(host["group_id"]).to_numpy()})
    return frame, lo, hi, counts


def _correspondence_pairs(
    history: History,
) -> Iterator[tuple[int, int, pd.DataFrame, tuple[pd.DataFrame, pd.DataFrame], Classes, Classes]]:
    """Consecutive pairs of releases with the hosting classes of each individual in both (forward, cross) or
    only in the later one (backward)."""
    spec = history.spec
    ids = history.release_ids
    for before, after in itertools.pairwise(ids):
        h1, lo1, hi1, c1 = _hosting_classes(history, before)
        h2, lo2, hi2, c2 = _hosting_classes(history, after)
        both = h1.merge(h2, on=spec.id, suffixes=("1", "2"))
        yield before, after, both, (h2, h1), (lo1, hi1, c1), (lo2, hi2, c2)


def _precondition(history: History, name: str) -> Report | None:
    """The skipped report when the history lacks what Defs. 24-31 assume, else None."""
    if history.hosting is None or history.snapshots is None:
        return skipped(name, "no hosting groups or snapshots: the classes of each user are unknown")
    if history.releases["group_id"].isna().any():
        return skipped(name, "non-homogeneous release: there are no classes to correspond")
    if len(history.release_ids) < 2:
        return skipped(name, "a single release has no correspondence")
    present = history.snapshots.groupby(history.spec.id)["release_id"].agg(["min", "max", "count"])
    last = max(history.release_ids)
    deleted = present["max"] < last
    gaps = present["count"] < present["max"] - present["min"] + 1
    if (deleted | gaps).any():
        return skipped(name, "not an incremental history (some individual left): Defs. 24-31 assume inserts only")
    return None


def _crack(both: pd.DataFrame, c1: np.ndarray, c2: np.ndarray, side: int) -> np.ndarray:
    """Theorems 2 and 3: per (Q1, Q2) the sum over the repetition subsets with the same sensitive value of
    ``|g| - min(|g|, |g'|)``, ``g`` the subset of the class on ``side`` (1: forward, 2: cross)."""
    a, b = c1[both["cls1"].to_numpy()], c2[both["cls2"].to_numpy()]
    mine = a if side == 1 else b
    common = (a > 0) & (b > 0)
    return np.where(common, mine - np.minimum(a, b), 0).sum(axis=1).astype(np.int64)


def _bcf_report(name: str, history: History, side: int, bound: Bound) -> Report:
    spec = history.spec
    skip = _precondition(history, name)
    if skip is not None:
        return skip
    frames = []
    for before, after, both, _, (_, _, c1), (_, _, c2) in _correspondence_pairs(history):
        crack = _crack(both, c1, c2, side)
        size = (c1 if side == 1 else c2).sum(axis=1).astype(np.int64)[both[f"cls{side}"].to_numpy()]
        frames.append(pd.DataFrame({spec.id: both[spec.id], "before": before, "after": after,
                                    "class_size": size, "crack": crack, "size": size - crack}))
    frame = pd.concat(frames, ignore_index=True)
    frame["risk"] = 1.0 / np.maximum(frame["size"], 1)
    return attack_report(name, frame, frame["size"].to_numpy(), bound.tuples, spec.sensitive_values, None)


def forward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Forward attack (taxonomy Def. 14; F-anonymity, Defs. 24-25, Theorem 2, Example 10) on incremental data.

    For a user in both T*_i (class Q1) and T*_{i+1} (class Q2), each repetition subset ``g`` of Q1 (its tuples
    with one sensitive value) has crack size ``|g| - min(|g|, |g'|)`` against the subset ``g'`` of Q2 with the
    same value; ``|Q1| - F(Q1, Q2)`` candidates remain for the user in T*_i. Violations: ``id, before, after,
    class_size, crack, size, risk`` with ``size`` below the bound (BCF-anonymity, Def. 31).
    O(releases x (n log n + users x values)).
    """
    return _bcf_report("forward", history, 1, bound)


def cross_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Cross attack (taxonomy Def. 15; C-anonymity, Defs. 27-28, Theorem 3): as ``forward_attack`` from the
    side of Q2, crack sizes ``|g'| - min(|g|, |g'|)`` and ``|Q2| - C(Q1, Q2)`` candidates in T*_{i+1}. Same
    cost."""
    return _bcf_report("cross", history, 2, bound)


def backward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Backward attack (taxonomy Def. 16; B-anonymity, Defs. 29-30, Theorem 5, Example 5) on incremental data.

    For a user new in T*_{i+1} (class Q2) and each repetition subset ``g2`` of Q2 with value s: G1 = the
    tuples of T*_i with value s whose class box intersects Q2's (they could be records of g2), G2 = the tuples
    of T*_{i+1} with value s whose class box intersects one of those classes. The crack size is 0 when
    ``|G2| < |g2|``, else ``max(0, |G1| - (|G2| - |g2|))`` (capped at ``|g2|``); ``|Q2| - B(Q2)`` candidates
    remain. Class-box overlaps use ``intervals.overlapping_pairs``; the two hops are sparse products.
    O(releases x (overlaps + values x overlaps^2 / classes)) at worst.
    """
    spec = history.spec
    skip = _precondition(history, "backward")
    if skip is not None:
        return skip
    frames = []
    for before, after, _, (h2, h1), (lo1, hi1, c1), (lo2, hi2, c2) in _correspondence_pairs(history):
        new = h2[~h2[spec.id].isin(h1[spec.id])]
        if not len(new):
            continue
        i, j = overlapping_pairs(lo1, hi1, lo2, hi2)
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
        frames.append(pd.DataFrame({spec.id: new[spec.id].to_numpy(), "before": before, "after": after,
                                    "class_size": size[cls], "crack": crack[cls], "size": size[cls] - crack[cls]}))
    if not frames:
        return nobody_attacked("backward", bound.tuples)
    frame = pd.concat(frames, ignore_index=True)
    frame["risk"] = 1.0 / np.maximum(frame["size"], 1)
    return attack_report("backward", frame, frame["size"].to_numpy(), bound.tuples, spec.sensitive_values, None)
