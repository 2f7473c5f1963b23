"""The intersection and critical absence/addition attacks (taxonomy §IV-B1, Defs. 13 and 17; Xiao-Tao Def. 15,
Lemmas 1-2), and the candidate sensitive sets every attack on values starts from.

The adversary knows each individual's QI values and lifespan (``history.snapshots``, Xiao-Tao Def. 6 B(n)); the
true sensitive values never narrow a candidate set, they only tell whether an inference hit (``contains_true``).
A candidate set is a row of a boolean matrix over ``spec.sensitive_values``.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...encoding import codes_in, encode, sensitive_codes
from ...grouping import pack_bits, popcount, qi_classes, released_attributes, unpack_bits
from ...intervals import contained_union_distinct
from ...partitioned import lookup
from ..history import Bound, History, Report
from ..report import attack_report, candidate_tuples, nobody_attacked, skipped

#: The default bound of an attack run outside a model (``Bound``): only disclosure, a single candidate, counts.
NO_DISCLOSURE = Bound()


def candidate_sets(history: History, release_id: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Xiao-Tao Def. 15 / taxonomy Def. 13 step 1 for one release: each individual of T(j) with its candidate
    sensitive set CSS(j), the union of the sensitive values of every class whose box contains the individual's
    QI values on the attributes the release publishes.

    Returns ``(individuals, css)``: the snapshot rows of T(j) (``id``, sensitive) and a boolean matrix
    (individuals x ``spec.sensitive_values``). A release without the sensitive attribute (V0 of Shmueli-Tassa,
    a projection without it) narrows nothing: every value stays a candidate. Memoised in
    ``history.candidate_sets``; the first time, ``intervals.contained_union_distinct`` over the release's class
    boxes and signatures (uint64 bitsets), once per distinct QI point (tuples that share QI values share a
    candidate set), unpacked per distinct point and expanded to the rows: O(n d + n log n + g d log g) plus a word
    table per block of boxes for the distinct points of its bounding box that still lack one of its values, never
    a (point, box) pair; memory O(n (d + values)) (the ranks, the boolean result), no (n, 64) unpacking.
    """
    spec = history.spec
    snap = history.snapshot(release_id)
    css = history.candidate_sets.get(release_id)
    if css is None or css.shape != (len(snap), len(spec.sensitive_values)):
        css = history.candidate_sets[release_id] = _candidate_matrix(history, release_id, snap)
    return snap[[spec.id, spec.sensitive]], css


def _candidate_matrix(history: History, release_id: int, snap: pd.DataFrame) -> np.ndarray:
    """The candidate sensitive sets of ``candidate_sets``, computed from the release and the snapshot."""
    spec = history.spec
    boxes = _release_boxes(history, release_id)
    if boxes is None:
        return np.ones((len(snap), len(spec.sensitive_values)), dtype=bool)
    names, lo, hi, sets = boxes
    union, inverse = contained_union_distinct(encode(snap, spec, tuple(names)), lo, hi, sets)
    return unpack_bits(union, len(spec.sensitive_values))[inverse]  # unpacked per distinct point, then expanded


class Classes(NamedTuple):
    """Release j's classes as the attacks see them (``release_classes``): ``names`` its published QI attributes;
    ``label``, ``lo``, ``hi`` as ``grouping.class_boxes`` gives them (the class of each published row, the
    boxes); ``group_id`` of each row (float: null in a non-homogeneous release); ``codes`` each row's sensitive
    value code (``encoding.sensitive_codes``, -1 outside the domain); ``homogeneous``: every row has a group;
    ``sensitive``: the release publishes the sensitive attribute. The value counts (``counts``) are not kept:
    classes x values floats (92 MB at 1M rows) would outlive every attack that reads them."""

    names: list[str]
    label: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    group_id: np.ndarray
    codes: np.ndarray
    homogeneous: bool
    sensitive: bool

    def counts(self, values: int) -> np.ndarray:
        """The signature matrix of the classes (classes x ``values``, rows per value, float), what
        ``grouping.class_boxes`` returns: a null value counts nowhere. O(n + classes x values)."""
        known = self.codes >= 0
        cells = np.bincount(self.label[known] * values + self.codes[known], minlength=len(self.lo) * values)
        return cells.astype(np.float64).reshape(len(self.lo), values)


def release_classes(history: History, release_id: int) -> Classes:
    """Release j's ``Classes``, computed once per judging pass (``History.shared``: the intersection, critical
    and the three correspondence attacks read the same release). The release's rows (``History.release``, a
    copy: the largest frame an attack reads) are dropped on return. O(n log n + classes); memory kept: four
    arrays of n numbers and the boxes."""

    def build() -> Classes:
        spec = history.spec
        table = history.release(release_id)
        names = released_attributes(table, spec)
        label, first, _ = qi_classes(table, names, by_release=False)
        lo, hi = (np.column_stack([table[f"{a}__{side}"].to_numpy(np.float64)[first] for a in names]) if names
                  else np.zeros((len(first), 0)) for side in ("lo", "hi"))
        group_id = table["group_id"].to_numpy(np.float64)
        return Classes(names, label, lo, hi, group_id, sensitive_codes(table, spec),
                       not bool(np.isnan(group_id).any()), bool(table[spec.sensitive].notna().any()))

    return history.shared(("classes", release_id), build)


def snapshot_ids(history: History, release_id: int) -> pd.Index:
    """The individuals of T(j) (``History.snapshot``'s ids, in order), computed once per judging pass
    (``History.shared``). O(n_j)."""
    return history.shared(("ids", release_id), lambda: pd.Index(history.snapshot(release_id, [history.spec.id])[history.spec.id]))


def _release_boxes(history: History, release_id: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None:
    """Release j's published QI attributes, its class boxes ``lo, hi`` and their signatures as uint64 bitsets
    (``release_classes``, ``pack_bits``); None when the release leaves the sensitive attribute out.
    O(n log n + classes x values), once per judging pass."""
    classes = release_classes(history, release_id)
    if not classes.sensitive:
        return None
    return classes.names, classes.lo, classes.hi, pack_bits(classes.counts(len(history.spec.sensitive_values)) > 0)


#: The name of the intersection attack's entry in the judge's memo (``History.memo``).
RUNS = "intersection"


def intersection_runs(history: History) -> pd.DataFrame:
    """The intersection attack's state after the last release: one row per (individual, maximal run of
    appearances with one sensitive value; an absence does not end a run), in order of the individual's first
    appearance then of the run's: ``person`` (that order), ``id``, ``first``, ``last``, ``value`` (code of the
    run's sensitive value in ``spec.sensitive_values``, -1 outside it), ``latest`` (the individual's latest run),
    ``w0..`` (the intersection of the run's candidate sets as uint64 words, ``grouping.pack_bits``).

    Incremental: the memo of release n-1 (``History.memo[(RUNS, n-1)]``, a function of releases 1..n-1 alone)
    with release n folded in, else every release folded from an empty state; either way the result is recorded
    as ``History.memo[(RUNS, n)]`` (and read from there when asked again). One fold reads release j's candidate sets (``candidate_sets``) and its
    snapshot's ids and values only: O(n_j + individuals seen) (a hash look-up of release j's ids among the
    latest runs, a word-wise AND, each column written once: ``_fold``), so judging release n costs
    O(n_n + individuals seen), not O(history). The look-up of release j's individuals among the latest runs (a join by id) runs on the current
    backend (``partitioned.lookup``).
    """
    ids = history.release_ids
    if not ids:
        return _fold(history, None, [])
    if (RUNS, ids[-1]) in history.memo:  # folded already for this history (another attack asked first)
        return history.memo[(RUNS, ids[-1])]
    memo = history.previous_memo(RUNS)
    state = _fold(history, memo, ids if memo is None else ids[-1:])
    history.memo[(RUNS, ids[-1])] = state
    return state


def _fold(history: History, state: pd.DataFrame | None, releases: list[int]) -> pd.DataFrame:
    """``state`` (None: empty) with ``releases`` folded in, in order (``intersection_runs``); ``state`` is not
    changed. Each release writes every column once, into a new array in the order of (person, first): the runs
    of earlier releases, each individual's new run right after its latest one, then the new individuals'.
    Memory: the old and the new state, no copy beyond (no concatenation, no sort)."""
    spec = history.spec
    words = [f"w{w}" for w in range(max(1, -(-len(spec.sensitive_values) // 64)))]
    empty = {"person": np.int64, spec.id: object, "first": np.int64, "last": np.int64, "value": np.int64,
             "latest": bool, **dict.fromkeys(words, np.uint64)}
    runs = ({c: np.zeros(0, t) for c, t in empty.items()} if state is None
            else {c: state[c].to_numpy() for c in state.columns})
    for j in releases:
        runs = _fold_release(history, runs, words, j)
    return pd.DataFrame(runs, copy=False)  # a block per column: the state is not stacked into a copy


def _fold_release(history: History, runs: dict[str, np.ndarray], words: list[str], j: int) -> dict[str, np.ndarray]:
    """``runs`` (columns of ``intersection_runs``' state) with release ``j`` folded in, as new columns. O(n_j +
    runs): a look-up of release j's ids among the latest runs, then each column written once."""
    spec = history.spec
    who, css = candidate_sets(history, j)
    bits = pack_bits(css)
    value = codes_in(who[spec.sensitive], spec.sensitive_values)
    ids = who[spec.id].to_numpy()
    n = len(runs["person"])
    latest = np.flatnonzero(runs["latest"])
    at = lookup(ids, runs[spec.id][latest], "intersection runs by individual")
    row = np.r_[latest, -1][at]  # the individual's latest run, -1 for a first appearance
    same = (row >= 0) & (np.r_[runs["value"].astype(np.int64, copy=False), 0][row] == value)
    fresh = np.flatnonzero(~same)
    person = np.r_[runs["person"].astype(np.int64, copy=False), -1][row[fresh]]
    unseen = person < 0
    person[unseen] = (int(runs["person"].max()) + 1 if n else 0) + np.arange(int(unseen.sum()))
    # the new state's rows: the old runs, each known individual's new run inserted after its latest run, then
    # the new individuals' runs (in order of person, as numbered above)
    known = np.flatnonzero(~unseen)
    order = np.r_[np.insert(np.arange(n), row[fresh[known]] + 1, n + known), n + np.flatnonzero(unseen)]
    place = np.empty_like(order)
    place[order] = np.arange(len(order))
    old, new = place[:n], place[n:]
    added = {"person": person, spec.id: ids[fresh], "first": j, "last": j,
             "value": value[fresh], "latest": True, **{c: bits[fresh, w] for w, c in enumerate(words)}}
    out = {}
    for c, column in runs.items():  # the first release sets the types (the id's: the snapshot's, not object)
        merged = np.empty(len(order), dtype=column.dtype if n else np.asarray(added[c]).dtype)
        merged[old] = column
        merged[new] = added[c]
        out[c] = merged
    kept = old[row[same]]
    out["last"][kept] = j
    for w, c in enumerate(words):
        out[c][kept] &= bits[same, w]
    out["latest"][old[row[fresh[known]]]] = False  # a known individual's run that ended
    return out


def intersection_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Intersection attack (taxonomy §IV-B1, Def. 13; Xiao-Tao Def. 15, Lemmas 1 and 2).

    The adversary knows each individual's QI values and lifespan. For each release j it computes the
    candidate sensitive set CSS(j) (``candidate_sets``); over each maximal run of releases in which the
    individual keeps its sensitive value it intersects them. By Lemma 2 the true value is in the
    intersection; by Lemma 1 an intersection of size 1 discloses it (risk 1). Violations: one row per (id,
    run) whose intersection is smaller than the model's bound: ``id, first, last, size, risk`` (risk
    ``1/size``, the random-world estimate, Def. 3), ``contains_true``, ``candidates``.

    The runs are kept release by release (``intersection_runs``: the memo of release n-1 and release n's
    candidate sets), so the cost is O(n_n + individuals seen) plus release n's candidate sets, whatever the
    number of releases; every figure is still computed exactly over every run of the history.
    """
    spec = history.spec
    if history.snapshots is None:
        return skipped("intersection", "no snapshots: the adversary's QI values and lifespans are unknown")
    runs = intersection_runs(history)
    words = runs[[c for c in runs.columns if c.startswith("w") and c[1:].isdigit()]].to_numpy(np.uint64)
    size = popcount(words)
    frame = pd.DataFrame({
        spec.id: runs[spec.id].to_numpy(),
        "first": runs["first"].to_numpy(np.int64),
        "last": runs["last"].to_numpy(np.int64),
        "size": size,
        "risk": 1.0 / np.maximum(size, 1),
        "contains_true": has_value(words, runs["value"].to_numpy(np.int64)),
    })
    extra = {"true_value_missed": int((~frame["contains_true"]).sum())}
    report = attack_report("intersection", frame, size, bound.values, spec.sensitive_values, None, extra)
    below = size < bound.values  # only the violations' candidate sets are unpacked (55 MB at 1M rows otherwise)
    report.violations["candidates"] = candidate_tuples(unpack_bits(words[below], len(spec.sensitive_values)),
                                                       spec.sensitive_values)
    return report


def has_value(words: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Whether bitset row i of ``words`` holds value ``value[i]`` (False for -1, a value outside the domain): one
    word and one shift per row, nothing unpacked. O(rows)."""
    known = value >= 0
    at = np.where(known, value, 0)
    word = np.take_along_axis(words, (at >> 6)[:, None], axis=1)[:, 0] if len(words) else np.zeros(0, np.uint64)
    return known & ((word >> (at & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)


#: The name of the critical attack's entry in the judge's memo (``History.memo``).
CRITICAL = "critical"


def critical_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Critical absence and critical addition (taxonomy Def. 17, Example 6; Xiao-Tao §1.1).

    For each pair of consecutive releases the adversary compares the published count ``c(s)`` of each sensitive
    value (counterfeits included: they are indistinguishable). Individuals that left (D) and arrived (A) are
    known from their lifespans; counterfeits of release j, single-timestamp tuples (Xiao-Tao Table 4), count as
    departures of j and arrivals of their own release (R(j) gives their number). With no sensitive updates,
    ``c_{i+1}(s) - c_i(s)`` = arrivals with s - departures with s; when the decreases add up to |D|, the
    departures' values are exactly the decreases (critical absence), and when the increases add up to |A|, the
    arrivals' values are exactly the increases (critical addition). A departed (arrived) individual's candidate
    set is then its CSS in the release it was last (first) seen in, intersected with the decreased (increased)
    values. Violations: ``id, release_id, kind, size, risk, contains_true, candidates`` below the bound.

    Incremental: the individuals attacked over the pairs up to release n-1 are the memo of release n-1
    (``History.memo[(CRITICAL, n-1)]``), so judging release n compares the pair (n-1, n) only: O(n_{n-1} + n_n
    + values) plus the candidate sets of those two releases when the pair has a critical change; without the memo
    every pair is compared (O(releases x (n + values))). The result is recorded as the memo of release n.
    """
    spec = history.spec
    if history.snapshots is None:
        return skipped("critical", "no snapshots: lifespans are unknown")
    ids = history.release_ids
    if len(ids) < 2:
        return skipped("critical", "a single release has no absence or addition")
    state = history.previous_memo(CRITICAL)
    pairs = list(itertools.pairwise(ids)) if state is None else [(ids[-2], ids[-1])]
    frames = [] if state is None else [state]
    for before, after in pairs:
        frames += _critical_pair(history, before, after)
    words = max(1, -(-len(spec.sensitive_values) // 64))
    columns = [f"w{w}" for w in range(words)]
    state = (pd.concat(frames, ignore_index=True) if frames else
             pd.DataFrame({spec.id: pd.Series([], dtype=object), "release_id": pd.Series([], dtype=np.int64),
                           "kind": pd.Series([], dtype=object), "value": pd.Series([], dtype=np.int64),
                           **{c: pd.Series([], dtype=np.uint64) for c in columns}}))
    history.memo[(CRITICAL, ids[-1])] = state
    if not len(state):
        return nobody_attacked("critical", bound.values)
    bits = state[columns].to_numpy(np.uint64)
    cand = unpack_bits(bits, len(spec.sensitive_values))
    size = popcount(bits)
    truth = state["value"].to_numpy(np.int64)
    out = pd.DataFrame({spec.id: state[spec.id].to_numpy(), "release_id": state["release_id"].to_numpy(np.int64),
                        "kind": state["kind"].to_numpy(), "size": size, "risk": 1.0 / np.maximum(size, 1),
                        "contains_true": (truth >= 0) & cand[np.arange(len(state)), np.maximum(truth, 0)]})
    return attack_report("critical", out, size, bound.values, spec.sensitive_values, cand)


def _critical_pair(history: History, before: int, after: int) -> list[pd.DataFrame]:
    """The individuals critical absence (release ``before``) and critical addition (release ``after``) attack
    between two consecutive releases (``critical_attack``): ``id, release_id, kind, value`` (code of the true
    value) and their candidate sets as words ``w0..``. O(n_before + n_after + values), plus the two releases'
    candidate sets when a change is critical."""
    spec = history.spec
    fakes = history.counterfeits
    fakes = fakes[fakes["release_id"].isin([before, after])].groupby("release_id")["count"].sum() if len(fakes) else {}
    S = len(spec.sensitive_values)
    codes = {j: release_classes(history, j).codes for j in (before, after)}
    change = np.bincount(codes[after][codes[after] >= 0], minlength=S) - np.bincount(
        codes[before][codes[before] >= 0], minlength=S)
    members = {j: snapshot_ids(history, j) for j in (before, after)}
    out = []
    for kind, release, other, sign in (("absence", before, after, -1), ("addition", after, before, 1)):
        moved = ~members[release].isin(members[other])
        movers = int(moved.sum()) + int(fakes.get(release, 0))
        delta = np.clip(sign * change, 0, None)
        if movers == 0 or delta.sum() != movers:
            continue
        who, css = candidate_sets(history, release)
        bits = pack_bits(css[moved] & (delta > 0))
        out.append(pd.DataFrame({spec.id: who[spec.id].to_numpy()[moved], "release_id": release, "kind": kind,
                                 "value": codes_in(who[spec.sensitive][moved], spec.sensitive_values),
                                 **{f"w{w}": bits[:, w] for w in range(bits.shape[1])}}))
    return out
