"""Li-Zhou (m-Distinct, internal updates) over a history: m-Distinct (Def. 15) and m-Distinct' (§IV-B).

A record's sensitive value may change between releases, but only inside its candidate update set: CUS(v) of
Def. 12, the spec's ``update_sets`` (value -> values it may become). The verifier reads the hosting groups
(publisher side) through the same index as m-invariance (``xiao_tao.Hosted``); sets of values are bitset rows
(``grouping.bitsets``). O(n log n + appearances x words).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ...encoding import unique_keys
from ...grouping import bitsets, describe, group_or, popcount
from ...intervals import expand_runs
from ..history import History, Report
from ..report import concat_violations, group_violations, verifier_report
from .single import m_uniqueness_of
from .xiao_tao import Hosted, appearance_violations, consecutive_appearances, previous_appearance


def update_set_bits(update_sets: Mapping[str, Iterable[str]], vocabulary: list[str]) -> tuple[np.ndarray, list[str]]:
    """CUS(v) of every value as bitset rows (Li-Zhou Def. 12), and the vocabulary grown by the sets' values.

    A value without an entry can only stay itself: CUS(v) = {v} (no internal update; m-Distinct then reduces to
    m-invariance). O(sum of the sets' sizes).
    """
    vocabulary = list(vocabulary)
    for key, values in update_sets.items():
        for v in [key, *values]:
            if str(v) not in vocabulary:
                vocabulary.append(str(v))
    position = {v: i for i, v in enumerate(vocabulary)}
    rows, codes = [], []
    for i, v in enumerate(vocabulary):
        members = {position[str(u)] for u in update_sets.get(v, (v,))}
        rows += [i] * len(members)
        codes += sorted(members)
    return bitsets(np.array(rows, dtype=np.int64), np.array(codes, dtype=np.int64), len(vocabulary),
                   len(vocabulary)), vocabulary


def m_distinct(
    history: History,
    update_sets: Mapping[str, Iterable[str]],
    m: int | None = None,
    strict: bool = False,
) -> list[Report]:
    """Li-Zhou Def. 15 (m-Distinct) over the history, in its incremental form (§IV-A).

    Every release is m-unique, and for every record, the candidate sensitive set C_j of its group in a release is
    a legal update instance (Def. 14) of the update set signature USS (Def. 13) of its group in its previous
    release:

    1. ``|C_j| = |USS|`` (rows of the two groups, counterfeits included);
    2. every value of C_j lies in some CUS of USS;
    3. every CUS of USS contains some value of C_j.

    ``strict`` adds m-Distinct' (§IV-B): the CUSs of the group of a record's first release are pairwise disjoint.
    ``update_sets`` maps a sensitive value to CUS(value) (``update_set_bits``). Needs hosting.
    Returns ``[m_uniqueness, m_distinct]``; violations name the record, the two releases and the condition.
    O(n log n + appearances x words).
    """
    return m_distinct_reports(Hosted(history), update_sets, m if m is not None else history.spec.model.params["m"],
                              strict)


def m_distinct_reports(
    hosted: Hosted, update_sets: Mapping[str, Iterable[str]], m: int, strict: bool
) -> list[Report]:
    """``m_distinct`` on an indexed history (same cost)."""
    cus, vocabulary = update_set_bits(update_sets, hosted.vocabulary)
    codes, count = hosted.codes, len(hosted.groups)
    sig = bitsets(hosted.row_group, codes, count, len(vocabulary))
    union = group_or(hosted.row_group, cus[codes], count)
    size = hosted.groups["size"].to_numpy()
    rows, now, before = consecutive_appearances(hosted)
    failed = {
        "Li-Zhou Def. 14 (1): |C_j| = |USS(t_i)|": size[now] != size[before],
        "Li-Zhou Def. 14 (2): every value of C_j is in some CUS of USS(t_i)": (sig[now] & ~union[before]).any(axis=1),
        "Li-Zhou Def. 14 (3): every CUS of USS(t_i) meets C_j": _uncovered_update_sets(
            hosted.row_group, codes, cus, sig, before, now),
    }
    parts = []
    for rule, bad in failed.items():
        parts.append(appearance_violations(
            hosted, rows[bad], now[bad], before[bad], rule, candidate_sensitive_set=describe(sig[now[bad]], vocabulary),
            previous_values=describe(sig[before[bad]], vocabulary)))
    if strict:
        order, prev = previous_appearance(hosted.hosting, hosted.spec.id)
        group = hosted.host_group[order]
        firsts = np.unique(group[(prev < 0) & (group >= 0)])
        sizes = np.bincount(hosted.row_group, weights=popcount(cus[codes]), minlength=count).astype(np.int64)
        overlap = np.zeros(count, dtype=bool)
        overlap[firsts] = sizes[firsts] != popcount(union[firsts])
        parts.append(group_violations(
            hosted.groups, overlap, "Li-Zhou m-Distinct' (§IV-B): the CUSs of a record's first group are disjoint",
            (f"values {d}" for d in describe(sig[overlap], vocabulary))))
    parts.append(hosted.unpublished())
    report = verifier_report("m_distinct", concat_violations(parts), m=m, strict=strict, republished=len(rows))
    return [m_uniqueness_of(hosted.groups, sig, m), report]


def _uncovered_update_sets(
    row_group: np.ndarray, codes: np.ndarray, cus: np.ndarray, sig: np.ndarray, before: np.ndarray, now: np.ndarray
) -> np.ndarray:
    """For each pair (before[i], now[i]): does some row of group ``before`` have a CUS disjoint from ``now``'s
    values? Distinct pairs only, each expanded to the rows of its ``before`` group."""
    width = np.int64(len(sig))
    keys, _, inverse, _ = unique_keys(before * width + now)
    pairs = np.stack([keys // width, keys % width], axis=1)
    order = np.argsort(row_group, kind="stable")
    start = np.searchsorted(row_group[order], pairs[:, 0], side="left")
    stop = np.searchsorted(row_group[order], pairs[:, 0], side="right")
    pair_of_row, at = expand_runs(start, stop - start)
    rows = order[at]
    empty = ~(cus[codes[rows]] & sig[pairs[pair_of_row, 1]]).any(axis=1)
    bad_pair = np.bincount(pair_of_row, weights=empty, minlength=len(pairs)) > 0
    return bad_pair[inverse]
