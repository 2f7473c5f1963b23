"""The attack suite: adversaries simulated over a release history (Tobar Nicolau et al., taxonomy §IV-B).

Each attack is ``f(history, ...) -> Report``. It reads only the published releases and R(j), plus the background
knowledge its adversary is assumed to hold, taken from the private side of the ``History``: each individual's QI
values and lifespan (``history.snapshots``, Xiao-Tao Def. 6 B(n)), and, where a definition reasons about the
class a user's tuple is in (the correspondence attacks, taxonomy Defs. 24-31), the hosting groups. The true
sensitive values in the snapshots are never used to narrow a candidate set; they only tell which candidate set
is the individual's own, and whether an inference hit (``contains_true``).

``Report.violations`` has one row per individual (or class, or pair of classes) the attack pushed below the
model's bound (``history.Bound``, from the model's descriptor: m, l or k); ``Report.summary`` counts the individuals attacked, disclosed (a
single candidate left) and below the bound. ``Report.ok`` is True when nobody fell below the bound.

Attacks: ``intersection_attack`` (§IV-B1, Def. 13; Xiao-Tao Def. 15, Lemmas 1-2), ``critical_attack``
(critical absence/addition, Def. 17), ``forward_attack``, ``cross_attack``, ``backward_attack`` (Defs. 24-31,
Theorems 2, 3, 5), ``equivalence_attack`` (Defs. 18-20, for the pairwise instances ``W = e_a - e_b``),
``join_attack`` (Wang-Fung Example 1: the lossy join of vertical releases), ``possible_world_attack``
(Shmueli-Tassa Def. 3.1 with the background release V0, Examples 1.1 and 3.2), ``sug_attack`` (Li-Zhou §III:
the feasible sub-SUG, eqs. 1-2, Lemma 2). ``attack_history`` runs the applicable ones.

Every candidate set is a row of a boolean matrix over ``spec.sensitive_values``; point-in-box and box-overlap
joins are the vectorised interval join ``overlapping_pairs``, never a Python loop over individuals x groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse import csgraph

from .history import Bound, History, Report
from .release import encode
from .spec import Spec
from .utility import equivalence_classes, released_attributes

#: The default bound of an attack run outside a model (``Bound``): only disclosure, a single candidate, counts.
NO_DISCLOSURE = Bound()

#: Pairs of an interval join materialised at once (memory bound of ``overlapping_pairs``).
_PAIRS_PER_BLOCK = 4_000_000


# --------------------------------------------------------------------------------------------------- interval join


def _width_classes(width: np.ndarray) -> np.ndarray:
    """Class per interval: 0 for points, else 1 + floor(log2(width / smallest positive width)), so that inside a
    class the widest interval is at most twice the narrowest."""
    positive = width > 0
    out = np.zeros(len(width), dtype=np.int64)
    if positive.any():
        out[positive] = 1 + np.floor(np.log2(width[positive] / width[positive].min())).astype(np.int64)
    return out


def _below(x: np.ndarray, w: float) -> np.ndarray:
    """``x - w`` rounded down by one ulp, so that no bound exactly ``w`` below ``x`` is lost to rounding."""
    return np.nextafter(x - w, -np.inf)


def _stab_ranges(alo, ahi, blo_sorted, bwidth_max) -> tuple[np.ndarray, np.ndarray]:
    """For each a-interval, the index range ``[start, stop)`` of sorted b-intervals whose lower bound lies in
    ``[alo - bwidth_max, ahi]``: a superset of the b-intervals overlapping it."""
    return np.searchsorted(blo_sorted, _below(alo, bwidth_max), "left"), np.searchsorted(blo_sorted, ahi, "right")


def _stab_plan(alo, ahi, blo, bhi, k) -> tuple[int, list]:
    """The 1-D plan on column k: per width class ``(members sorted by lower bound, start, stop)``, and the
    number of candidate pairs it yields."""
    width = bhi[:, k] - blo[:, k]
    classes = _width_classes(width)
    plan, total = [], 0
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        members = members[np.argsort(blo[members, k], kind="stable")]
        start, stop = _stab_ranges(alo[:, k], ahi[:, k], blo[members, k], width[members].max())
        plan.append((members, start, stop))
        total += int((stop - start).sum())
    return total, plan


def _expand(runs: list, alo, ahi, blo, bhi, columns: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Candidate runs ``(members, start, stop)`` (a-box i may meet ``members[start[i]:stop[i]]``) expanded with
    ``np.repeat`` in blocks of at most ``_PAIRS_PER_BLOCK`` pairs, and filtered exactly, column by column."""
    n = len(alo)
    a_lo, a_hi = np.ascontiguousarray(alo.T), np.ascontiguousarray(ahi.T)
    b_lo, b_hi = np.ascontiguousarray(blo.T), np.ascontiguousarray(bhi.T)
    out_i, out_j = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for members, start, stop in runs:
        counts = stop - start
        ends = np.cumsum(counts)
        cuts = np.searchsorted(ends, np.arange(_PAIRS_PER_BLOCK, ends[-1] + _PAIRS_PER_BLOCK, _PAIRS_PER_BLOCK))
        lo_row = 0
        for hi_row in np.unique(np.append(cuts + 1, n).clip(max=n)):
            rows = np.arange(lo_row, hi_row)
            cnt = counts[lo_row:hi_row]
            lo_row = hi_row
            if cnt.sum() == 0:
                continue
            i = np.repeat(rows, cnt)
            offset = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            j = members[np.repeat(start[rows], cnt) + offset]
            for c in columns:  # one contiguous column at a time, shrinking the pairs as it goes
                keep = (a_lo[c][i] <= b_hi[c][j]) & (b_lo[c][j] <= a_hi[c][i])
                i, j = i[keep], j[keep]
            out_i.append(i)
            out_j.append(j)
    return np.concatenate(out_i), np.concatenate(out_j)


def overlapping_pairs(
    alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(i, j)`` of boxes that intersect on every column: ``alo[i] <= bhi[j]`` and ``blo[j] <= ahi[i]``.

    ``alo, ahi``: (n, d); ``blo, bhi``: (g, d), inclusive bounds. A point is a box with ``lo == hi``.

    Method: an interval join on one column, then an exact filter on all. The b-boxes are split into width
    classes (within a class widths differ at most twice); per class they are sorted by lower bound and each
    a-box takes the sorted run whose lower bound is within the class's widest interval of it (two
    ``searchsorted``), expanded with ``np.repeat``. The join column is the one with the fewest candidate pairs.
    Cost O(d (n + g) log g + candidates * d), in blocks of at most ``_PAIRS_PER_BLOCK`` candidate pairs.
    """
    if len(alo) == 0 or len(blo) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    plans = [_stab_plan(alo, ahi, blo, bhi, k) for k in range(alo.shape[1])]
    order = sorted(range(len(plans)), key=lambda k: plans[k][0])
    return _expand(plans[order[0]][1], alo, ahi, blo, bhi, order)


def contained_pairs(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(i, g)`` with ``lo[g] <= points[i] <= hi[g]`` on every column (Xiao-Tao Def. 15's "contains").

    A grid join on the two most selective columns k, k2 (narrowest boxes relative to the points' spread): the
    boxes of each pair of width classes (widest ``W``, ``W2``) are keyed by ``(cell of lo_k, rank of lo_k2)``,
    the cell being ``floor(lo_k / W)`` (``lo_k`` itself when ``W = 0``); a box holding point x has its cell in
    ``floor((x_k - W) / W) .. floor(x_k / W)`` (two cells) and ``lo_k2`` in ``[x_k2 - W2, x_k2]``, one sorted
    run per cell. Runs are then expanded and filtered as in ``overlapping_pairs``. One column falls back to it.
    """
    n, d = points.shape
    if d < 2 or n == 0 or len(lo) == 0:
        return overlapping_pairs(points, points, lo, hi)
    width = hi - lo
    spread = points.max(axis=0) - points.min(axis=0)
    # narrowest boxes relative to the points' spread: most selective; where every point is equal, the least
    relative = np.divide(width.mean(axis=0), spread, out=np.full(d, np.inf), where=spread > 0)
    order = list(np.argsort(relative, kind="stable"))
    k, k2 = order[:2]
    perm = np.lexsort((points[:, k2], points[:, k]))  # sorted queries make every searchsorted cache-friendly
    points = points[perm]
    ck, ck2 = _width_classes(width[:, k]), _width_classes(width[:, k2])
    u2 = np.unique(lo[:, k2])
    r2 = np.searchsorted(u2, lo[:, k2])
    x, x2 = points[:, k], points[:, k2]
    runs = []
    for a, b in np.unique(np.column_stack([ck, ck2]), axis=0):
        members = np.flatnonzero((ck == a) & (ck2 == b))
        w, w2 = width[members, k].max(), width[members, k2].max()
        cell = lo[members, k] if w == 0 else np.floor(lo[members, k] / w)
        cells, cell_rank = np.unique(cell, return_inverse=True)
        key = cell_rank.astype(np.int64) * (len(u2) + 1) + r2[members]
        sort = np.argsort(key, kind="stable")
        members, key = members[sort], key[sort]
        q_lo = np.searchsorted(u2, _below(x2, w2), "left")
        q_hi = np.searchsorted(u2, x2, "right")
        first = x if w == 0 else np.floor(_below(x, w) / w)
        last = x if w == 0 else np.floor(x / w)
        for step in range(int((last - first).max()) + 1):
            query = first + step
            pos = np.searchsorted(cells, query).clip(max=len(cells) - 1)
            found = (cells[pos] == query) & (query <= last)
            base = pos.astype(np.int64) * (len(u2) + 1)
            start = np.searchsorted(key, base + q_lo, "left")
            stop = np.where(found, np.searchsorted(key, base + q_hi, "left"), start)
            runs.append((members, start, stop))
    i, g = _expand(runs, points, points, lo, hi, order)
    return perm[i], g


# ----------------------------------------------------------------------------------------------- shared pieces


def _codes(values: pd.Series, spec: Spec) -> np.ndarray:
    return pd.Index(spec.sensitive_values).get_indexer(values.astype(str))


def _release(history: History, release_id: int) -> pd.DataFrame:
    rel = history.releases
    return rel[rel["release_id"] == release_id].reset_index(drop=True)


def _snapshot(history: History, release_id: int) -> pd.DataFrame:
    snap = history.snapshots
    return snap[snap["release_id"] == release_id].reset_index(drop=True)


def _classes(table: pd.DataFrame, spec: Spec, names: list[str]):
    """The classes of one release: label per row, and per class its box ``(lo, hi)`` on ``names``, its size,
    and its signature matrix (class x sensitive value, counts of rows)."""
    label = equivalence_classes(table, spec, tuple(names))
    first = pd.Series(np.arange(len(table))).groupby(label).first().to_numpy()
    lo = np.column_stack([table[f"{a}__lo"].to_numpy(np.float64)[first] for a in names])
    hi = np.column_stack([table[f"{a}__hi"].to_numpy(np.float64)[first] for a in names])
    codes = _codes(table[spec.sensitive], spec)
    known = codes >= 0  # a release that leaves the sensitive attribute out publishes no value (null)
    counts = sparse.csr_matrix(
        (np.ones(int(known.sum())), (label[known], codes[known])), shape=(len(first), len(spec.sensitive_values))
    ).toarray()
    return label, lo, hi, counts


def candidate_sets(history: History, release_id: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Xiao-Tao Def. 15 / taxonomy Def. 13 step 1 for one release: each individual of T(j) with its candidate
    sensitive set CSS(j), the union of the sensitive values of every class whose box contains the individual's
    QI values on the attributes the release publishes.

    Returns ``(individuals, css)``: the snapshot rows of T(j) (``id``, sensitive) and a boolean matrix
    (individuals x ``spec.sensitive_values``). A release without the sensitive attribute (V0 of Shmueli-Tassa,
    a projection without it) narrows nothing: every value stays a candidate.
    """
    spec = history.spec
    snap = _snapshot(history, release_id)
    css = history.candidate_sets.get(release_id)
    if css is None or css.shape != (len(snap), len(spec.sensitive_values)):
        css = history.candidate_sets[release_id] = _candidate_matrix(history, release_id, snap)
    return snap[[spec.id, spec.sensitive]], css


def _candidate_matrix(history: History, release_id: int, snap: pd.DataFrame) -> np.ndarray:
    """The candidate sensitive sets of ``candidate_sets``, computed from the release and the snapshot."""
    spec = history.spec
    table = _release(history, release_id)
    if table[spec.sensitive].isna().all():
        return np.ones((len(snap), len(spec.sensitive_values)), dtype=bool)
    names = released_attributes(table, spec)
    _, lo, hi, counts = _classes(table, spec, names)
    points = encode(snap, spec, tuple(names))
    pi, gi = contained_pairs(points, lo, hi)
    member = sparse.csr_matrix((np.ones(len(pi)), (pi, gi)), shape=(len(snap), len(lo)))
    return np.asarray((member @ sparse.csr_matrix(counts > 0)).todense()) > 0


def _as_tuples(matrix: np.ndarray, values: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Each boolean row as the tuple of the values it selects (only used on violation rows)."""
    rows, cols = np.nonzero(matrix)
    grouped = pd.Series(np.asarray(values, dtype=object)[cols]).groupby(rows).agg(tuple)
    return [grouped.get(r, ()) for r in range(len(matrix))]


def _report(name: str, frame: pd.DataFrame, size: np.ndarray, bound: int, spec: Spec, css, extra=None) -> Report:
    """A per-individual report: rows below ``bound`` become violations (with their candidate sets)."""
    below = size < bound
    violations = frame[below].reset_index(drop=True)
    if css is not None:
        violations["candidates"] = _as_tuples(css[below], spec.sensitive_values)
    summary = {
        "attacked": int(len(frame)),
        "disclosed": int((size == 1).sum()),
        "below_bound": int(below.sum()),
        "bound": int(bound),
        "min_candidates": int(size.min()) if len(size) else 0,
    }
    summary.update(extra or {})
    return Report(name, not below.any(), violations, summary)


def _skip(name: str, reason: str) -> Report:
    """The report of an attack whose preconditions the history lacks: ok, with the reason in the summary."""
    return Report(name, True, pd.DataFrame(), {"skipped": reason})


# ------------------------------------------------------------------------------------------------ intersection


def _stacked_css(history: History) -> tuple[pd.DataFrame, np.ndarray]:
    """Candidate sets of every individual in every release, stacked: ``release_id, id, sensitive`` and css."""
    frames, sets = [], []
    for j in history.release_ids:
        individuals, css = candidate_sets(history, j)
        frames.append(individuals.assign(release_id=j))
        sets.append(css)
    return pd.concat(frames, ignore_index=True), np.concatenate(sets)


def intersection_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Intersection attack (taxonomy §IV-B1, Def. 13; Xiao-Tao Def. 15, Lemmas 1 and 2).

    The adversary knows each individual's QI values and lifespan. For each release j it computes the
    candidate sensitive set CSS(j) (``candidate_sets``); over each maximal run of releases in which the
    individual keeps its sensitive value it intersects them. By Lemma 2 the true value is in the
    intersection; by Lemma 1 an intersection of size 1 discloses it (risk 1). Violations: one row per (id,
    run) whose intersection is smaller than the model's bound: ``id, first, last, size, risk`` (risk
    ``1/size``, the random-world estimate, Def. 3), ``contains_true``, ``candidates``.
    """
    spec = history.spec
    if history.snapshots is None:
        return _skip("intersection", "no snapshots: the adversary's QI values and lifespans are unknown")
    stacked, css = _stacked_css(history)
    order = np.lexsort((stacked["release_id"].to_numpy(), pd.factorize(stacked[spec.id])[0]))
    stacked, css = stacked.iloc[order].reset_index(drop=True), css[order]
    ids = stacked[spec.id].to_numpy()
    sens = stacked[spec.sensitive].astype(str).to_numpy()
    new_run = np.ones(len(stacked), dtype=bool)
    new_run[1:] = (ids[1:] != ids[:-1]) | (sens[1:] != sens[:-1])
    starts = np.flatnonzero(new_run)
    inter = np.logical_and.reduceat(css, starts, axis=0) if len(starts) else css[:0]
    size = inter.sum(axis=1)
    truth = _codes(stacked[spec.sensitive].iloc[starts], spec)
    rel = stacked["release_id"].to_numpy()
    frame = pd.DataFrame({
        spec.id: ids[starts],
        "first": rel[starts],
        "last": np.maximum.reduceat(rel, starts) if len(starts) else rel[:0],
        "size": size,
        "risk": 1.0 / np.maximum(size, 1),
        "contains_true": inter[np.arange(len(starts)), truth],
    })
    extra = {"true_value_missed": int((~frame["contains_true"]).sum())}
    return _report("intersection", frame, size, bound.values, spec, inter, extra)


# -------------------------------------------------------------------------------- critical absence / addition


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
    """
    spec = history.spec
    if history.snapshots is None:
        return _skip("critical", "no snapshots: lifespans are unknown")
    ids = history.release_ids
    if len(ids) < 2:
        return _skip("critical", "a single release has no absence or addition")
    fakes = history.counterfeits.groupby("release_id")["count"].sum() if len(history.counterfeits) else {}
    S = len(spec.sensitive_values)
    counts = {j: np.bincount(_codes(_release(history, j)[spec.sensitive], spec), minlength=S) for j in ids}
    members = {j: _snapshot(history, j)[spec.id] for j in ids}
    cache: dict[int, tuple[pd.DataFrame, np.ndarray]] = {}
    frames, sets = [], []
    for before, after in zip(ids[:-1], ids[1:], strict=True):
        change = counts[after] - counts[before]
        for kind, release, other, sign in (("absence", before, after, -1), ("addition", after, before, 1)):
            moved = ~members[release].isin(members[other]).to_numpy()
            movers = int(moved.sum()) + int(fakes.get(release, 0))
            delta = np.clip(sign * change, 0, None)
            if movers == 0 or delta.sum() != movers:
                continue
            if release not in cache:
                cache[release] = candidate_sets(history, release)
            who, css = cache[release]
            frames.append(who[moved].assign(release_id=release, kind=kind))
            sets.append(css[moved] & (delta > 0))
    if not frames:
        return Report("critical", True, pd.DataFrame(), {"attacked": 0, "disclosed": 0, "below_bound": 0,
                                                        "bound": bound.values, "min_candidates": 0})
    frame = pd.concat(frames, ignore_index=True)
    cand = np.concatenate(sets)
    size = cand.sum(axis=1)
    truth = _codes(frame[spec.sensitive], spec)
    out = pd.DataFrame({spec.id: frame[spec.id], "release_id": frame["release_id"], "kind": frame["kind"],
                        "size": size, "risk": 1.0 / np.maximum(size, 1),
                        "contains_true": cand[np.arange(len(frame)), truth]})
    return _report("critical", out, size, bound.values, spec, cand)


# -------------------------------------------------------------------------------------- correspondence (BCF)


def _hosting_classes(history: History, release_id: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Hosting class of each individual of release j, and the class boxes and value counts (``_classes``)."""
    spec = history.spec
    table = _release(history, release_id)
    names = released_attributes(table, spec)
    label, lo, hi, counts = _classes(table, spec, names)
    index = pd.Series(label, index=table["group_id"].to_numpy()).groupby(level=0).first()
    host = history.hosting[history.hosting["release_id"] == release_id]
    frame = pd.DataFrame({spec.id: host[spec.id].to_numpy(), "cls": index.reindex(host["group_id"]).to_numpy()})
    return frame, lo, hi, counts


def _correspondence_pairs(history: History):
    """Consecutive pairs of releases with the hosting classes of each individual in both (forward, cross) or
    only in the later one (backward)."""
    spec = history.spec
    ids = history.release_ids
    for before, after in zip(ids[:-1], ids[1:], strict=True):
        h1, lo1, hi1, c1 = _hosting_classes(history, before)
        h2, lo2, hi2, c2 = _hosting_classes(history, after)
        both = h1.merge(h2, on=spec.id, suffixes=("1", "2"))
        yield before, after, both, (h2, h1), (lo1, hi1, c1), (lo2, hi2, c2)


def _correspondence_precondition(history: History, name: str) -> Report | None:
    if history.hosting is None or history.snapshots is None:
        return _skip(name, "no hosting groups or snapshots: the classes of each user are unknown")
    if history.releases["group_id"].isna().any():
        return _skip(name, "non-homogeneous release: there are no classes to correspond")
    if len(history.release_ids) < 2:
        return _skip(name, "a single release has no correspondence")
    present = history.snapshots.groupby(history.spec.id)["release_id"].agg(["min", "max", "count"])
    last = max(history.release_ids)
    deleted = present["max"] < last
    gaps = present["count"] < present["max"] - present["min"] + 1
    if (deleted | gaps).any():
        return _skip(name, "not an incremental history (some individual left): Defs. 24-31 assume inserts only")
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
    skipped = _correspondence_precondition(history, name)
    if skipped is not None:
        return skipped
    frames = []
    for before, after, both, _, (_, _, c1), (_, _, c2) in _correspondence_pairs(history):
        crack = _crack(both, c1, c2, side)
        size = (c1 if side == 1 else c2).sum(axis=1).astype(np.int64)[both[f"cls{side}"].to_numpy()]
        frames.append(pd.DataFrame({spec.id: both[spec.id], "before": before, "after": after,
                                    "class_size": size, "crack": crack, "size": size - crack}))
    frame = pd.concat(frames, ignore_index=True)
    frame["risk"] = 1.0 / np.maximum(frame["size"], 1)
    return _report(name, frame, frame["size"].to_numpy(), bound.tuples, spec, None)


def forward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Forward attack (taxonomy Def. 14; F-anonymity, Defs. 24-25, Theorem 2, Example 10) on incremental data.

    For a user in both T*_i (class Q1) and T*_{i+1} (class Q2), each repetition subset ``g`` of Q1 (its tuples
    with one sensitive value) has crack size ``|g| - min(|g|, |g'|)`` against the subset ``g'`` of Q2 with the
    same value; ``|Q1| - F(Q1, Q2)`` candidates remain for the user in T*_i. Violations: ``id, before, after,
    class_size, crack, size, risk`` with ``size`` below the bound (BCF-anonymity, Def. 31).
    """
    return _bcf_report("forward", history, 1, bound)


def cross_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Cross attack (taxonomy Def. 15; C-anonymity, Defs. 27-28, Theorem 3): as ``forward_attack`` from the
    side of Q2, crack sizes ``|g'| - min(|g|, |g'|)`` and ``|Q2| - C(Q1, Q2)`` candidates in T*_{i+1}."""
    return _bcf_report("cross", history, 2, bound)


def backward_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Backward attack (taxonomy Def. 16; B-anonymity, Defs. 29-30, Theorem 5, Example 5) on incremental data.

    For a user new in T*_{i+1} (class Q2) and each repetition subset ``g2`` of Q2 with value s: G1 = the
    tuples of T*_i with value s whose class box intersects Q2's (they could be records of g2), G2 = the tuples
    of T*_{i+1} with value s whose class box intersects one of those classes. The crack size is 0 when
    ``|G2| < |g2|``, else ``max(0, |G1| - (|G2| - |g2|))`` (capped at ``|g2|``); ``|Q2| - B(Q2)`` candidates
    remain. Class-box overlaps use ``overlapping_pairs``; the two hops are sparse products.
    """
    spec = history.spec
    skipped = _correspondence_precondition(history, "backward")
    if skipped is not None:
        return skipped
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
        return Report("backward", True, pd.DataFrame(), {"attacked": 0, "disclosed": 0, "below_bound": 0,
                                                        "bound": bound.tuples, "min_candidates": 0})
    frame = pd.concat(frames, ignore_index=True)
    frame["risk"] = 1.0 / np.maximum(frame["size"], 1)
    return _report("backward", frame, frame["size"].to_numpy(), bound.tuples, spec, None)


# ------------------------------------------------------------------------------------------------- equivalence


def _shared_persons(cls: np.ndarray, person: np.ndarray, signature: np.ndarray):
    """Pairs of classes ``a < b`` with equal value signature (``U_a = U_b``) sharing at least one person, and
    how many they share: a self-join of ``(person, signature)`` restricted to the persons seen twice under one
    signature, instead of all of ``S S^T``."""
    frame = pd.DataFrame({"cls": cls, "person": person, "sig": signature})
    frame = frame[frame.duplicated(["person", "sig"], keep=False)]
    pairs = frame.merge(frame, on=["person", "sig"])
    pairs = pairs[pairs["cls_x"] < pairs["cls_y"]]
    common = pairs.groupby(["cls_x", "cls_y"]).size()
    return (common.index.get_level_values(0).to_numpy(), common.index.get_level_values(1).to_numpy(),
            common.to_numpy())


def _only(members: pd.DataFrame, mine: np.ndarray, other: np.ndarray) -> list[tuple]:
    """Per pair p, the persons of class ``mine[p]`` not in class ``other[p]`` (sorted): every class's members
    as one padded row, in person order, of a (classes x largest class) table; a member of row ``mine[p]`` is
    alone when the key (p, person) is not among the keys of row ``other[p]``, which are sorted by construction
    (one ``searchsorted`` over all pairs)."""
    if not len(mine):
        return []
    members = members.sort_values(["cls", "who"], kind="stable")
    cls = members["cls"].to_numpy()
    who, people = pd.factorize(members["who"], sort=True)
    size = np.bincount(cls, minlength=int(max(mine.max(), other.max())) + 1)
    slot = np.arange(len(cls)) - np.concatenate(([0], np.cumsum(size)[:-1]))[cls]
    table = np.full((len(size), int(size.max())), -1, dtype=np.int64)
    table[cls, slot] = who
    a, b = table[mine], table[other]
    pair = np.arange(len(mine))[:, None] * len(people)
    keys_b = (pair + b)[b >= 0]
    keys_a = pair + a
    at = np.minimum(np.searchsorted(keys_b, keys_a), len(keys_b) - 1)
    alone = (a >= 0) & (keys_b[at] != keys_a)
    rows, cols = np.nonzero(alone)
    return _tuples_by_row(np.asarray(people, dtype=object)[a[rows, cols]], rows, len(mine))


def _tuples_by_row(values: np.ndarray, rows: np.ndarray, n: int) -> list[tuple]:
    """``values`` grouped into one tuple per row 0..n-1 (``rows`` sorted), rows of equal length at once."""
    counts = np.bincount(rows, minlength=n)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out: list[tuple] = [()] * n
    for c in np.unique(counts[counts > 0]):
        which = np.flatnonzero(counts == c)
        block = values[start[which][:, None] + np.arange(c)]
        for row, items in zip(which.tolist(), map(tuple, block.tolist()), strict=True):
            out[row] = items
    return out


def _lifetime_candidates(history: History) -> pd.DataFrame:
    """Per individual the intersection of its candidate sets over every release it appears in (no updates)."""
    spec = history.spec
    stacked, css = _stacked_css(history)
    codes, people = pd.factorize(stacked[spec.id])
    inter = np.ones((len(people), css.shape[1]), dtype=bool)
    np.logical_and.at(inter, codes, css)
    return pd.DataFrame(inter, index=people)


def _combined_sizes(history: History, only_a, only_b, e: np.ndarray) -> np.ndarray:
    """For the 1-equivalences, the size of the two linked people's combined candidate set (the intersection of
    both lifetime intersections: they share one value, taxonomy Def. 22); ``e`` elsewhere, where the link
    does not tie one person to another."""
    out = e.astype(np.int64).copy()
    ones = np.flatnonzero(e == 1)
    if not len(ones) or history.snapshots is None:
        return out
    cand = _lifetime_candidates(history)
    left = cand.reindex([only_a[i][0] for i in ones]).to_numpy(bool)
    right = cand.reindex([only_b[i][0] for i in ones]).to_numpy(bool)
    out[ones] = (left & right).sum(axis=1)
    return out


def equivalence_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Value-equivalence attack (taxonomy Defs. 18-20, Examples 7-9), for the instances ``W = e_a - e_b``.

    Classes of all releases are the rows of the person matrix S (hosting: who is in each class; each
    counterfeit is a person of its own, seen once) and of the value matrix U (published value counts). A pair of
    classes with ``U_a = U_b`` and persons that differ gives ``W = e_a - e_b`` with ``W . U = 0``, ``W . S``
    integral and ``e = ||W . S||_1 / 2 = |P_a minus P_b|``: the e persons only in P_a have the same multiset of
    sensitive values as the e persons only in P_b (e = 1: two people linked to one value, Example 9).

    Only pairs of classes sharing a person can have ``e`` below a class size, so the search runs over the
    pairs of equal-signature classes that share a person (``_shared_persons``) rather than all pairs. General
    instances (``W`` with more than two non-zeros) are an integer-programming search that the taxonomy does not
    bound (Def. 20 only asks for some W); they are not attempted. Violations: instances with ``e`` below the
    bound (``bound.values``) whose two sides both hold a real person (``release_a, group_a, release_b,
    group_b, e, only_a, only_b, combined_size``). A link alone relates two
    people without disclosing a value; it discloses (the interior attack, Def. 22) when, for e = 1, the
    intersection of both people's lifetime candidate sets (``intersection_attack``) is below the bound:
    ``combined_size``. ``ok`` is False only for such disclosing links (summary ``disclosed``).
    """
    spec = history.spec
    if history.hosting is None:
        return _skip("equivalence", "no hosting groups: the persons of each class are unknown")
    if history.releases["group_id"].isna().any():
        return _skip("equivalence", "non-homogeneous release: Defs. 18-20 are stated over classes")
    rel = history.releases
    keys = rel[["release_id", "group_id"]].drop_duplicates().sort_values(["release_id", "group_id"])
    keys = keys.reset_index(drop=True)
    index = pd.Series(np.arange(len(keys)), index=pd.MultiIndex.from_frame(keys))
    row_class = index.reindex(pd.MultiIndex.from_frame(rel[["release_id", "group_id"]])).to_numpy()
    values = sparse.csr_matrix((np.ones(len(rel)), (row_class, _codes(rel[spec.sensitive], spec))),
                               shape=(len(keys), len(spec.sensitive_values))).toarray()
    host = history.hosting
    host_class = index.reindex(pd.MultiIndex.from_frame(host[["release_id", "group_id"]])).to_numpy()
    person = pd.factorize(host[spec.id])[0]
    signature = np.unique(values, axis=0, return_inverse=True)[1].reshape(-1)
    a, b, common = _shared_persons(host_class, person, signature[host_class])
    size = values.sum(axis=1)
    real = np.bincount(host_class, minlength=len(keys))
    same = keys["release_id"].to_numpy()[a] != keys["release_id"].to_numpy()[b]
    e = size[a] - common
    linking = same & (e > 0) & (real[a] > common) & (real[b] > common)
    bound = bound.values
    hit = linking & (e < bound)
    ra, rb = a[hit], b[hit]
    members = pd.DataFrame({"cls": host_class, "who": host[spec.id].to_numpy()})
    only_a, only_b = _only(members, ra, rb), _only(members, rb, ra)
    violations = pd.DataFrame({
        "release_a": keys["release_id"].to_numpy()[ra], "group_a": keys["group_id"].to_numpy()[ra],
        "release_b": keys["release_id"].to_numpy()[rb], "group_b": keys["group_id"].to_numpy()[rb],
        "e": e[hit].astype(np.int64), "only_a": only_a, "only_b": only_b,
    })
    violations["combined_size"] = _combined_sizes(history, only_a, only_b, e[hit])
    disclosing = (violations["e"] == 1) & (violations["combined_size"] < bound)
    summary = {"instances": int(linking.sum()), "below_bound": int(hit.sum()), "bound": bound,
               "disclosed": int(disclosing.sum()), "min_e": int(e[linking].min()) if linking.any() else 0}
    return Report("equivalence", not disclosing.any(), violations, summary)


# ------------------------------------------------------------------------------------------- vertical releases


def _attribute_sets(history: History) -> dict[int, tuple[str, ...]]:
    """The quasi-identifiers each release publishes."""
    return {j: tuple(released_attributes(_release(history, j), history.spec)) for j in history.release_ids}


def _join_pair(left: pd.DataFrame, right: pd.DataFrame, on: list[str], sensitive: str) -> pd.DataFrame:
    """The lossy join of two generalised tables (Wang-Fung §1.1): every pair of rows whose boxes intersect on
    the common attributes ``on`` (and whose sensitive values agree when both carry one). A joined row keeps the
    intersection of the two boxes on ``on`` and every other attribute of either side."""
    both_sensitive = left[sensitive].notna().all() and right[sensitive].notna().all()
    lo_cols = [f"{a}__lo" for a in on]
    hi_cols = [f"{a}__hi" for a in on]
    alo, ahi = left[lo_cols].to_numpy(np.float64), left[hi_cols].to_numpy(np.float64)
    blo, bhi = right[lo_cols].to_numpy(np.float64), right[hi_cols].to_numpy(np.float64)
    if both_sensitive:
        ca = pd.factorize(pd.concat([left[sensitive], right[sensitive]]).astype(str))[0].astype(np.float64)
        alo, ahi = np.column_stack([alo, ca[: len(left)]]), np.column_stack([ahi, ca[: len(left)]])
        blo, bhi = np.column_stack([blo, ca[len(left):]]), np.column_stack([bhi, ca[len(left):]])
    i, j = overlapping_pairs(alo, ahi, blo, bhi)
    out = left.iloc[i].reset_index(drop=True)
    other = right.iloc[j].reset_index(drop=True)
    for a in on:
        out[f"{a}__lo"] = np.maximum(out[f"{a}__lo"].to_numpy(np.float64), other[f"{a}__lo"].to_numpy(np.float64))
        out[f"{a}__hi"] = np.minimum(out[f"{a}__hi"].to_numpy(np.float64), other[f"{a}__hi"].to_numpy(np.float64))
    for column in other.columns:
        if column not in out.columns or out[column].isna().all():
            out[column] = other[column]
    out[sensitive] = out[sensitive].where(out[sensitive].notna(), other[sensitive])
    return out


def _default_x(history: History, sets: dict[int, tuple[str, ...]]) -> list[str]:
    """The quasi-identifiers some release leaves out (only the join brings them together); all when none."""
    spec = history.spec
    common = set.intersection(*(set(s) for s in sets.values()))
    x = [a for a in spec.quasi_identifiers if a not in common and any(a in s for s in sets.values())]
    return x or list(spec.quasi_identifiers)


def _join_all(history: History, sets: dict[int, tuple[str, ...]]) -> pd.DataFrame | str:
    """The lossy join of every release in release order, or the reason it cannot be formed."""
    spec = history.spec
    joined, attrs = None, set()
    for j in history.release_ids:
        table = _release(history, j).drop(columns=["release_id", "group_id"])
        left_out = [c for a in spec.quasi_identifiers if a not in sets[j] for c in (a, f"{a}__lo", f"{a}__hi")]
        table = table.drop(columns=[c for c in left_out if c in table.columns])
        if joined is None:
            joined, attrs = table, set(sets[j])
            continue
        on = sorted(attrs & set(sets[j]), key=list(spec.quasi_identifiers).index)
        if not on:
            return f"release {j} shares no quasi-identifier with the earlier ones: no join key"
        joined = _join_pair(joined, table, on, spec.sensitive)
        attrs |= set(sets[j])
    return joined


def join_groups(history: History, x: Iterable[str] | None = None) -> pd.DataFrame:
    """The ``(x, y)`` groups of the lossy join of all releases (Wang-Fung §1.1): ``<X labels>, <X>__lo/__hi,
    <sensitive>, size`` and, with snapshots, ``genuine`` (individuals whose true X values lie in the group's
    box and who have its sensitive value). Raises ValueError when a release shares no attribute to join on."""
    spec = history.spec
    sets = _attribute_sets(history)
    x = list(x) if x is not None else _default_x(history, sets)
    joined = _join_all(history, sets)
    if isinstance(joined, str):
        raise ValueError(joined)
    keys = [c for a in x for c in (f"{a}__lo", f"{a}__hi")]
    groups = joined.groupby(keys + [spec.sensitive], dropna=False)
    sizes = groups.size().rename("size").reset_index()
    sizes[x] = groups[x].first().reset_index(drop=True).to_numpy()
    if history.snapshots is not None:
        snap = history.snapshots.drop_duplicates(spec.id, keep="last")
        pts = np.column_stack([encode(snap, spec, tuple(x)), _codes(snap[spec.sensitive], spec)])
        codes = _codes(sizes[spec.sensitive], spec)
        glo = np.column_stack([sizes[[f"{a}__lo" for a in x]].to_numpy(np.float64), codes])
        ghi = np.column_stack([sizes[[f"{a}__hi" for a in x]].to_numpy(np.float64), codes])
        _, gi = contained_pairs(pts, glo, ghi)
        sizes["genuine"] = np.bincount(gi, minlength=len(sizes))
    return sizes


def join_attack(history: History, bound: Bound = NO_DISCLOSURE, x: Iterable[str] | None = None) -> Report:
    """The join attack on vertical releases (Wang-Fung §1.1 Example 1, (X, Y)-anonymity Def. 3.1).

    The adversary joins the releases, in release order, on their common quasi-identifiers; generalised values
    match when they intersect, so the join is lossy: a record may match records of other persons. ``X`` (default:
    the quasi-identifiers some release leaves out, i.e. those only the join brings together; all QIs when every
    release has the same) identifies people, ``Y`` is the sensitive attribute. Each ``(x, y)`` group of the join
    (``join_groups``) has a size; a group smaller than the bound (``bound.tuples``: k, m or l) sharpens
    identification (``{Bob, HIV}`` of size 1), while a group larger than its ``genuine`` count is lossy
    (``{Alice, Cancer}``: 4 joined records for 2 people). Violations: groups below the bound
    (``<X labels>, <sensitive>, size, genuine``). Cost: the size of the join (one ``overlapping_pairs`` per
    release).
    """
    spec = history.spec
    sets = _attribute_sets(history)
    if len(set(sets.values())) < 2:
        return _skip("join", "every release publishes the same quasi-identifiers: there is nothing to join")
    x = list(x) if x is not None else _default_x(history, sets)
    try:
        sizes = join_groups(history, x)
    except ValueError as exc:
        return _skip("join", str(exc))
    bound = bound.tuples
    below = sizes["size"] < bound
    columns = [*x, spec.sensitive, "size"] + (["genuine"] if "genuine" in sizes else [])
    summary = {"joined_rows": int(sizes["size"].sum()), "groups": int(len(sizes)), "below_bound": int(below.sum()),
               "disclosed": int((sizes["size"] == 1).sum()), "bound": bound, "x": list(x),
               "lossy_groups": int((sizes["size"] > sizes["genuine"]).sum()) if "genuine" in sizes else 0}
    return Report("join", not below.any(), sizes.loc[below, columns].reset_index(drop=True), summary)


def _allowed_edges(n: int, u: np.ndarray, r: np.ndarray) -> np.ndarray | None:
    """Edges ``(u, r)`` of a bipartite graph (n individuals, n rows) that lie on some perfect matching, or None
    when there is no perfect matching. A maximum matching, then the strongly connected components of the graph
    with matched edges row -> individual and the others individual -> row (Dulmage-Mendelsohn): an unmatched
    edge lies on a perfect matching iff its ends share a component."""
    graph = sparse.csr_matrix((np.ones(len(u)), (u, r)), shape=(n, n))
    match = csgraph.maximum_bipartite_matching(graph, perm_type="column")
    if (match < 0).any():
        return None
    matched = match[u] == r
    src = np.where(matched, n + r, u)
    dst = np.where(matched, u, n + r)
    directed = sparse.csr_matrix((np.ones(len(u)), (src, dst)), shape=(2 * n, 2 * n))
    _, comp = csgraph.connected_components(directed, directed=True, connection="strong")
    return matched | (comp[u] == comp[n + r])


def possible_world_attack(history: History, bound: Bound = NO_DISCLOSURE, rounds: int = 10) -> Report:
    """Linking individuals through all releases with the background release V0 (Shmueli-Tassa §3, Def. 3.1,
    Examples 1.1 and 3.2).

    The adversary knows every individual and its QI values (V0). A possible world assigns each individual one
    sensitive value such that every release admits a bijection between individuals and its rows, each row
    generalising its individual (Def. 3.1). The attack keeps, per individual, the values some world may give
    it, by constraint propagation until nothing changes (at most ``rounds`` sweeps): in each release, an
    individual may take row r only if r's box contains its QI values on the released attributes and r's value is
    still possible for it; only edges on some perfect matching survive (``_allowed_edges``); the individual's
    values shrink to those of its surviving rows. This is sound (the true world always survives) and rules out
    what V0 rules out in Example 3.2; deciding exact membership in PW is a permanent-style count the paper does
    not ask for. A release whose rows and individuals differ in number (counterfeits) contributes its
    candidate sets only. Violations: ``id, size, risk, contains_true, candidates`` below the bound.
    """
    spec = history.spec
    if history.snapshots is None:
        return _skip("possible_worlds", "no snapshots: V0 (the individuals and their QI values) is unknown")
    if len(set(_attribute_sets(history).values())) < 2:
        return _skip("possible_worlds", "every release publishes the same quasi-identifiers: the intersection "
                                        "attack covers them")
    people = pd.Index(history.snapshots[spec.id].drop_duplicates())
    domain = np.ones((len(people), len(spec.sensitive_values)), dtype=bool)
    releases = []
    for j in history.release_ids:
        table = _release(history, j)
        if table[spec.sensitive].isna().all():
            continue
        snap = _snapshot(history, j)
        names = released_attributes(table, spec)
        lo = table[[f"{a}__lo" for a in names]].to_numpy(np.float64)
        hi = table[[f"{a}__hi" for a in names]].to_numpy(np.float64)
        u, r = contained_pairs(encode(snap, spec, tuple(names)), lo, hi)
        releases.append((people.get_indexer(snap[spec.id]), u, r, _codes(table[spec.sensitive], spec),
                         len(snap) == len(table)))
    for _ in range(rounds):
        before = domain.copy()
        for who, u, r, codes, bijective in releases:
            keep = domain[who[u], codes[r]]
            u_k, r_k = u[keep], r[keep]
            if bijective:
                allowed = _allowed_edges(len(who), u_k, r_k)
                if allowed is not None:
                    u_k, r_k = u_k[allowed], r_k[allowed]
            reach = np.zeros((len(who), domain.shape[1]), dtype=bool)
            reach[u_k, codes[r_k]] = True
            domain[who] &= reach
        if np.array_equal(before, domain):
            break
    size = domain.sum(axis=1)
    last = history.snapshots.drop_duplicates(spec.id, keep="last").set_index(spec.id)[spec.sensitive]
    truth = _codes(last.reindex(people), spec)
    frame = pd.DataFrame({spec.id: people.to_numpy(), "size": size, "risk": 1.0 / np.maximum(size, 1),
                          "contains_true": domain[np.arange(len(people)), truth]})
    return _report("possible_worlds", frame, size, bound.values, spec, domain)


# ------------------------------------------------------------------------------------------- internal updates


def _update_matrix(cus: Mapping[str, Iterable[str]], spec: Spec) -> np.ndarray:
    """E[s, s'] = s' is in CUS(s) (Li-Zhou Def. 12); a value is always in its own CUS."""
    values = pd.Index(spec.sensitive_values)
    E = np.eye(len(values), dtype=bool)
    for source, targets in cus.items():
        if source in values:
            idx = values.get_indexer([t for t in targets if t in values])
            E[values.get_loc(source), idx] = True
    return E


def sug_attack(
    history: History, bound: Bound = NO_DISCLOSURE, update_sets: Mapping[str, Iterable[str]] | None = None
) -> Report:
    """The SUG attack on data with internal updates (Li-Zhou §III: Defs. 10-11, eqs. 1-2, Lemma 2).

    For each individual the sensitive attribute update graph has one layer per release it appears in, the
    nodes of layer i being its candidate sensitive set C_i (``candidate_sets``; the up-to-date adversary knows
    its QI values in each release), and an edge s -> s' between consecutive layers when s' is in CUS(s)
    (``update_sets``, default the spec's ``model.update_sets``). Node weights are 1/|C_i| and edge weights 1/out-degree
    (random world assumption, Example 3). The feasible sub-SUG keeps the nodes on a path from the first layer
    to the last (Def. 11); the risk of the true value at layer i is the weight of the feasible paths through it
    over the weight of all feasible paths (eqs. 1-2), computed by a forward-backward recursion over all
    individuals at once instead of enumerating paths. By Lemma 2 the risk is 1 iff the layer keeps one node.
    Violations: ``id, release_id, size`` (feasible nodes of that layer), ``risk``, ``candidates``, for
    layers with fewer than the bound.
    """
    spec = history.spec
    cus = update_sets if update_sets is not None else spec.model.params.get("update_sets")
    if cus is None:
        return _skip("sug", "no candidate update sets (CUS): pass update_sets= or set the spec's model.update_sets")
    if history.snapshots is None:
        return _skip("sug", "no snapshots: the adversary's QI values and lifespans are unknown")
    frame, feasible = sug_risks(history, cus)
    return _report("sug", frame, frame["size"].to_numpy(), bound.values, spec, feasible,
                   {"max_risk": float(frame["risk"].max()) if len(frame) else 0.0})


def sug_risks(history: History, cus: Mapping[str, Iterable[str]]) -> tuple[pd.DataFrame, np.ndarray]:
    """Every layer of every individual's feasible sub-SUG (see ``sug_attack``): ``id, release_id, size, risk``
    and the boolean matrix of its feasible nodes over ``spec.sensitive_values``. O(releases * n * S^2)."""
    spec = history.spec
    E = _update_matrix(cus, spec).astype(np.float64)
    people = pd.Index(history.snapshots[spec.id].drop_duplicates())
    n, S = len(people), len(spec.sensitive_values)
    layers = []
    forward = np.zeros((n, S))
    seen = np.zeros(n, dtype=bool)
    for j in history.release_ids:
        individuals, css = candidate_sets(history, j)
        who = people.get_indexer(individuals[spec.id])
        weight = css / np.maximum(css.sum(axis=1, keepdims=True), 1)
        prev = forward[who]
        out_degree = css.astype(np.float64) @ E.T  # per previous value: its successors in C_i
        step = np.where(out_degree > 0, prev / np.where(out_degree > 0, out_degree, 1), 0) @ E
        f = np.where(seen[who, None], step * weight, weight)
        f /= np.maximum(f.sum(axis=1, keepdims=True), 1e-300)
        forward[who] = f
        seen[who] = True
        layers.append((j, who, css, weight, f, individuals[spec.sensitive]))
    backward = np.ones((n, S))
    frames, sets = [], []
    for j, who, css, weight, f, truth_values in reversed(layers):
        b = backward[who]
        through = f * b
        total = through.sum(axis=1)
        feasible = through > 0
        truth = _codes(truth_values, spec)
        risk = through[np.arange(len(who)), truth] / np.maximum(total, 1e-300)
        frames.append(pd.DataFrame({spec.id: people[who], "release_id": j, "size": feasible.sum(axis=1),
                                    "risk": risk}))
        sets.append(feasible)
        out_degree = css.astype(np.float64) @ E.T
        nxt = (b * weight) @ E.T
        back = np.where(out_degree > 0, nxt / np.where(out_degree > 0, out_degree, 1), 0)
        back /= np.maximum(back.max(axis=1, keepdims=True), 1e-300)
        backward[who] = back
    return pd.concat(frames[::-1], ignore_index=True), np.concatenate(sets[::-1])


# ------------------------------------------------------------------------------------------------------- suite

#: Every attack by name, in the order ``attack_history`` runs them.
ATTACKS = {
    "intersection": intersection_attack,
    "critical": critical_attack,
    "forward": forward_attack,
    "cross": cross_attack,
    "backward": backward_attack,
    "equivalence": equivalence_attack,
    "join": join_attack,
    "possible_worlds": possible_world_attack,
    "sug": sug_attack,
}


def attack_history(
    history: History, bound: Bound = NO_DISCLOSURE, attacks: Sequence[str] | None = None
) -> list[Report]:
    """Run the named attacks (default: all of ``ATTACKS``) over ``history``. An attack whose preconditions the
    history lacks (no snapshots, not incremental, not vertical, no CUS) returns an ok report whose summary says
    ``skipped`` and why. Unknown names raise ``ValueError`` naming them."""
    names = list(ATTACKS) if attacks is None else list(attacks)
    unknown = [a for a in names if a not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {unknown}; the attacks are {list(ATTACKS)}")
    return [ATTACKS[a](history, bound) for a in names]
