"""Li-Zhou (m-Distinct, internal updates) over a history: m-Distinct (Def. 15) and m-Distinct' (§IV-B).

A record's sensitive value may change between releases, but only inside its candidate update set: CUS(v) of
Def. 12, the spec's ``update_sets`` (value -> values it may become). Def. 15 is incremental (§IV-A): each release
is m-unique, and each record's group is compared with its group in the record's previous release only. The
verifier is therefore folded one release at a time (``single.fold_releases``, ``m_distinct_step``): what it keeps
of releases 1..j is each record's last appearance (release, group, the group's size and its values as uint64
words, ``grouping.pack_bits``). Judging release n through the judge's window (releases n-1 and n and the memo of
n-1) reads release n and that memo only: O(n_n log n_n + individuals seen x words + distinct signature
pairs x V^2), whatever n. Sets of values are bitset rows (``grouping.bitsets``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ...grouping import bitset_image, bitsets, describe, group_or, popcount, unpack_bits
from ..history import History, Report
from ..report import concat_violations, group_violations, verifier_report
from .single import State, fold_releases, m_uniqueness_of
from .xiao_tao import Hosted, publisher_side, stack_appearances

#: The rules of Def. 14 (legal update instance) and of m-Distinct' (§IV-B), as the violations name them.
RULES = (
    "Li-Zhou Def. 14 (1): |C_j| = |USS(t_i)|",
    "Li-Zhou Def. 14 (2): every value of C_j is in some CUS of USS(t_i)",
    "Li-Zhou Def. 14 (3): every CUS of USS(t_i) meets C_j",
)
STRICT_RULE = "Li-Zhou m-Distinct' (§IV-B): the CUSs of a record's first group are disjoint"


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
    release (the latest earlier release that hosted it, also across a gap; compared only when both groups were
    published):

    1. ``|C_j| = |USS|`` (rows of the two groups, counterfeits included);
    2. every value of C_j lies in some CUS of USS;
    3. every CUS of USS contains some value of C_j.

    ``strict`` adds m-Distinct' (§IV-B): the CUSs of the group of a record's first release are pairwise disjoint.
    ``update_sets`` maps a sensitive value to CUS(value) (``update_set_bits``). Needs hosting.
    Returns ``[m_uniqueness, m_distinct]``; violations name the record, the two releases and the condition, in
    release order. Folded one release at a time (``m_distinct_step``): through a window, release n alone.
    """
    m = int(m if m is not None else history.spec.model.params["m"])
    sets = {str(k): [str(v) for v in vs] for k, vs in update_sets.items()}
    return fold_releases(history, "li_zhou.m_distinct", {"m": m, "update_sets": sets, "strict": bool(strict)},
                         lambda part, state: m_distinct_step(part, state, sets, m, bool(strict), publisher=False))


def verify_m_distinct_folded(history: History) -> list[Report]:
    """What model ``m_distinct`` promises (``verifiers.verify_m_distinct``): m-uniqueness, m-Distinct under the
    spec's ``update_sets`` (m-Distinct' with ``strict``), counterfeit accounting and generalisation, folded one
    release at a time under the memo family ``m_distinct``. Release n through a window: O(n_n log n_n + n_n d +
    individuals seen)."""
    params = history.spec.model.params
    m, strict = int(params["m"]), bool(params.get("strict", False))
    sets = {str(k): [str(v) for v in vs] for k, vs in (params.get("update_sets") or {}).items()}
    return fold_releases(history, "m_distinct", {"m": m, "update_sets": sets, "strict": strict},
                         lambda part, state: m_distinct_step(part, state, sets, m, strict))


def m_distinct_reports(
    hosted: Hosted, update_sets: Mapping[str, Iterable[str]], m: int, strict: bool
) -> list[Report]:
    """``[m_uniqueness, m_distinct]`` of a history indexed whole (``Hosted``), from scratch: the fold's steps
    over its releases (``m_distinct``). O(n log n + releases x individuals seen)."""
    return m_distinct(hosted.history, update_sets, m, strict)


def m_distinct_step(
    part: History, state: State, update_sets: Mapping[str, Iterable[str]], m: int, strict: bool,
    publisher: bool = True,
) -> tuple[list[Report], State]:
    """One release of the m-Distinct verifier (``single.Step``): ``[m_uniqueness, m_distinct]`` of the release
    ``part`` alone, then (``publisher``) its counterfeit accounting and generalisation, and the state after it.

    The state: ``individuals``, each record ever hosted with its last appearance (``release_id``, ``group_id``,
    ``published``, ``size``: rows of its group, counterfeits included, and ``w0..``: the group's values, the USS
    of Def. 13 as a set, uint64 words), and ``vocabulary``, the values the bits stand for (the spec's domain, the
    CUS values, then values outside both in order of first publication). Condition 3 only needs the set of the
    previous group's values: the CUS of a row depends on its value alone.
    O(n_j log n_j + individuals seen x words + distinct (previous values, group) pairs x V^2).
    """
    known = state["vocabulary"]["value"].astype(str).tolist() if "vocabulary" in state else None
    indexed = Hosted(part, known)
    cus, vocabulary = update_set_bits(update_sets, indexed.vocabulary)
    width = len(vocabulary)
    count = len(indexed.groups)
    sig = bitsets(indexed.row_group, indexed.codes, count, width)
    report, individuals = _appearances(indexed, state.get("individuals"), sig, cus, vocabulary, m, strict)
    reports = [m_uniqueness_of(indexed.groups, sig, m), report]
    if publisher:
        reports += publisher_side(indexed)
    return reports, {"individuals": individuals, "vocabulary": pd.DataFrame({"value": vocabulary})}


def _appearances(
    hosted: Hosted, last_seen: pd.DataFrame | None, sig: np.ndarray, cus: np.ndarray, vocabulary: list[str],
    m: int, strict: bool,
) -> tuple[Report, pd.DataFrame]:
    """The m-Distinct report of one release (``hosted``: that release alone; ``sig``: its groups' values as
    bits) against each record's last appearance in the earlier releases (``last_seen``), and the last
    appearances after it (``m_distinct_step``). A hosting row is compared with the record's previous hosting row
    when both groups are published. O(n_j log n_j + individuals seen x words + pairs of signatures)."""
    host, ident = hosted.hosting, hosted.spec.id
    seen = stack_appearances(hosted, last_seen, sig, {"size": hosted.groups["size"].to_numpy(np.int64)})
    bits, size, P, release, group_id = seen.bits, seen.extra["size"], seen.P, seen.release, seen.group_id
    rows, prev = seen.rows, seen.prev
    failed = legal_update_failures(bits[prev], size[prev], bits[rows], size[rows], cus, width=len(vocabulary))
    parts = []
    for rule, bad in zip(RULES, failed, strict=True):
        r, p = rows[bad], prev[bad]
        parts.append(pd.DataFrame({
            "release_id": host["release_id"].to_numpy()[r - P], ident: host[ident].to_numpy()[r - P],
            "group_id": host["group_id"].to_numpy()[r - P], "previous_release_id": release[p],
            "previous_group_id": group_id[p], "candidate_sensitive_set": describe(bits[r], vocabulary),
            "previous_values": describe(bits[p], vocabulary), "rule": rule,
        }))
    if strict:
        first = np.unique(hosted.host_group[seen.first])
        rows_cus = cus[hosted.codes]
        total = np.bincount(hosted.row_group, weights=popcount(rows_cus), minlength=len(sig)).astype(np.int64)
        union = group_or(hosted.row_group, rows_cus, len(sig))
        overlap = np.zeros(len(sig), dtype=bool)
        overlap[first] = total[first] != popcount(union[first])
        parts.append(group_violations(hosted.groups, overlap, STRICT_RULE,
                                      (f"values {d}" for d in describe(sig[overlap], vocabulary))))
    parts.append(hosted.unpublished())
    report = verifier_report("m_distinct", concat_violations(parts), m=m, strict=strict, republished=len(rows))
    return report, seen.state(ident)


def legal_update_failures(
    before: np.ndarray, before_size: np.ndarray, now: np.ndarray, now_size: np.ndarray, cus: np.ndarray,
    width: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each pair (USS of the previous group, C_j of the group now), which condition of Def. 14 fails:
    ``(sizes differ, some value of C_j outside every CUS of USS, some CUS of USS missing C_j)``.

    ``before``/``now``: the two groups' values as bitset rows; ``cus``: CUS(v) of every value as bitset rows
    (``update_set_bits``). Each distinct (USS, C_j) pair is decided once: the union of the CUS of USS's values
    and, per value of USS, whether its CUS meets C_j, as boolean products over the V values.

    Condition 2 reads USS alone for the union (``grouping.bitset_image`` of USS under CUS) and condition 3 C_j
    alone for the values whose CUS meets it (``grouping.bitset_image`` of C_j under CUS^T), so each is computed
    once per distinct USS or C_j and each pair costs a word-wise AND: O(pairs x words + distinct sets x V^2).
    """
    sizes = np.asarray(before_size != now_size, dtype=bool)
    if len(before) == 0:
        empty = np.zeros(0, dtype=bool)
        return sizes, empty, empty
    C = unpack_bits(cus, width)  # C[v, u]: u in CUS(v)
    reach = bitset_image(before, C, width)  # values some CUS of USS holds
    meets = bitset_image(now, C.T, width)  # values v whose CUS(v) holds a value of C_j
    outside = np.asarray((now & ~reach).any(axis=1), dtype=bool)
    uncovered = np.asarray((before & ~meets).any(axis=1), dtype=bool)
    return sizes, outside, uncovered


__all__ = [
    "RULES", "STRICT_RULE", "legal_update_failures", "m_distinct", "m_distinct_reports", "m_distinct_step",
    "update_set_bits", "verify_m_distinct_folded",
]
