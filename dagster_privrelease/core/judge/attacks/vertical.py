"""Attacks on vertical releases (each release publishes a subset of the quasi-identifiers): the lossy join of
Wang-Fung (§1.1 Example 1, (X, Y)-anonymity Def. 3.1), judged per individual, and possible worlds with the
background release V0 of Shmueli-Tassa (§3, Def. 3.1, Examples 1.1 and 3.2).

Memory: a lossy join can be far larger than the releases (a 2,000-row, 7-release history of homogeneous groups
once grew to 23 GB); no join here holds more than ``JOIN_BUDGET`` rows, and the join attack with every QI known
needs no join at all.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse import csgraph

from ...encoding import codes_in, encode, sensitive_codes
from ...grouping import class_boxes, released_attributes
from ...intervals import contained_pairs, overlapping_pairs
from ...spec import BoundSpec
from ..history import Bound, History, Report
from ..report import attack_report, skipped
from .intersection import NO_DISCLOSURE

#: Rows of a lossy join the attacks may hold at once (issue 11, item 6). A joined row holds a few dozen cells, so
#: the budget keeps a join under ~100 MB; past it ``join_groups`` refuses and ``join_attack`` either judges
#: without the join (V0: exact, ``_linked_without_join``) or is skipped, saying so.
JOIN_BUDGET = 500_000

#: Candidate pairs examined at once when a join is counted against its budget (``_bounded_pairs``).
_CANDIDATES_PER_CHUNK = 4_000_000


def _attribute_sets(history: History) -> dict[int, tuple[str, ...]]:
    """The quasi-identifiers each release publishes."""
    return {j: tuple(released_attributes(history.release(j), history.spec)) for j in history.release_ids}


def _bounded_pairs(
    alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray, room: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """``intervals.overlapping_pairs``, or None when there are more than ``room`` pairs, decided before more than
    ``room`` + one chunk of pairs is held. Per a-box, an upper bound of its pairs: the exact overlap count on one
    column (``#{b: blo <= ahi} - #{b: bhi < alo}``, two ``searchsorted``), the least over the columns. When the
    bounds add up to at most ``room`` the join runs at once; otherwise the a-boxes are joined in chunks of at most
    max(``room``, ``_CANDIDATES_PER_CHUNK``) bounded pairs, stopping as soon as the exact count passes ``room``.
    O(d (n + g) log g) for the bounds, then ``overlapping_pairs`` per chunk."""
    bound = np.full(len(alo), len(blo), dtype=np.int64)
    for k in range(alo.shape[1]):
        count = np.searchsorted(np.sort(blo[:, k]), ahi[:, k], "right") - np.searchsorted(np.sort(bhi[:, k]),
                                                                                          alo[:, k], "left")
        bound = np.minimum(bound, count)
    if bound.sum() <= room:
        return overlapping_pairs(alo, ahi, blo, bhi)
    chunk = max(room, _CANDIDATES_PER_CHUNK)
    cuts = np.searchsorted(np.cumsum(bound), np.arange(chunk, int(bound.sum()) + chunk, chunk), "right")
    out_i, out_j, total, start = [], [], 0, 0
    for stop in np.unique(np.append(np.maximum(cuts, 1), len(alo)).clip(max=len(alo))):
        if stop <= start:
            continue
        i, j = overlapping_pairs(alo[start:stop], ahi[start:stop], blo, bhi)
        total += len(i)
        if total > room:
            return None
        out_i.append(i + start)
        out_j.append(j)
        start = stop
    return np.concatenate(out_i), np.concatenate(out_j)


def _join_pair(
    left: pd.DataFrame, right: pd.DataFrame, on: list[str], sensitive: str, room: int
) -> pd.DataFrame | None:
    """The lossy join of two generalised tables (Wang-Fung §1.1): every pair of rows whose boxes intersect on
    the common attributes ``on`` (and whose sensitive values agree when both carry one). A joined row keeps the
    intersection of the two boxes on ``on`` and every other attribute of either side. None when the join holds
    more than ``room`` rows (``_bounded_pairs``: no joined row is built then)."""
    both_sensitive = left[sensitive].notna().all() and right[sensitive].notna().all()
    lo_cols = [f"{a}__lo" for a in on]
    hi_cols = [f"{a}__hi" for a in on]
    alo, ahi = left[lo_cols].to_numpy(np.float64), left[hi_cols].to_numpy(np.float64)
    blo, bhi = right[lo_cols].to_numpy(np.float64), right[hi_cols].to_numpy(np.float64)
    if both_sensitive:
        ca = pd.factorize(pd.concat([left[sensitive], right[sensitive]]).astype(str))[0].astype(np.float64)
        alo, ahi = np.column_stack([alo, ca[: len(left)]]), np.column_stack([ahi, ca[: len(left)]])
        blo, bhi = np.column_stack([blo, ca[len(left):]]), np.column_stack([bhi, ca[len(left):]])
    pairs = _bounded_pairs(alo, ahi, blo, bhi, room)
    if pairs is None:
        return None
    i, j = pairs
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


def _join_all(history: History, sets: dict[int, tuple[str, ...]], budget: int) -> pd.DataFrame | str:
    """The lossy join of every release in release order, on the common quasi-identifiers and the sensitive value
    when both sides carry it, or the reason it cannot be formed (no join key, or more than ``budget`` rows at some
    step: nothing past the budget is materialised)."""
    spec = history.spec
    joined, attrs = None, set()
    for j in history.release_ids:
        table = history.release(j).drop(columns=["release_id", "group_id"])
        left_out = [c for a in spec.quasi_identifiers if a not in sets[j] for c in (a, f"{a}__lo", f"{a}__hi")]
        table = table.drop(columns=[c for c in left_out if c in table.columns])
        if joined is None:
            joined, attrs = table, set(sets[j])
            continue
        on = sorted(attrs & set(sets[j]), key=list(spec.quasi_identifiers).index)
        if not on and not (joined[spec.sensitive].notna().all() and table[spec.sensitive].notna().all()):
            return f"release {j} shares no quasi-identifier or sensitive value with the earlier ones: no join key"
        step = _join_pair(joined, table, on, spec.sensitive, budget)
        if step is None:
            return (f"the lossy join of releases {history.release_ids[0]}..{j} holds more than the budget of "
                    f"{budget:,} rows; it was not materialised")
        joined = step
        attrs |= set(sets[j])
    return joined


def join_groups(history: History, x: Iterable[str] | None = None, budget: int = JOIN_BUDGET) -> pd.DataFrame:
    """The ``(x, y)`` groups of the lossy join of all releases (Wang-Fung §1.1): ``<X labels>, <X>__lo/__hi,
    <sensitive>, size`` and, with snapshots, ``genuine`` (individuals whose true X values lie in the group's
    box and who have its sensitive value). ``x`` defaults to the quasi-identifiers some release leaves out.
    Raises ValueError when a release shares no attribute to join on, or when the join would hold more than
    ``budget`` rows. O(join size + n log n), the join never above ``budget`` rows."""
    spec = history.spec
    sets = _attribute_sets(history)
    x = list(x) if x is not None else _default_x(history, sets)
    joined = _join_all(history, sets, budget)
    if isinstance(joined, str):
        raise ValueError(joined)
    keys = [c for a in x for c in (f"{a}__lo", f"{a}__hi")]
    groups = joined.groupby(keys + [spec.sensitive], dropna=False)
    sizes = groups.size().rename("size").reset_index()
    sizes[x] = groups[x].first().reset_index(drop=True).to_numpy()
    if history.snapshots is not None:
        snap = history.snapshots.drop_duplicates(spec.id, keep="last")
        pts = np.column_stack([encode(snap, spec, tuple(x)), sensitive_codes(snap, spec)])
        codes = sensitive_codes(sizes, spec)
        glo = np.column_stack([sizes[[f"{a}__lo" for a in x]].to_numpy(np.float64), codes])
        ghi = np.column_stack([sizes[[f"{a}__hi" for a in x]].to_numpy(np.float64), codes])
        _, gi = contained_pairs(pts, glo, ghi)
        sizes["genuine"] = np.bincount(gi, minlength=len(sizes))
    return sizes


def _records_through_the_join(spec: BoundSpec, last: pd.DataFrame, joined: pd.DataFrame, x: list[str]) -> np.ndarray:
    """(individuals x values): the records of the materialised lossy join ``joined`` whose box on ``x`` holds the
    individual's values (``last``: one snapshot row per individual), by sensitive value. Attributes of ``x`` no
    release publishes constrain nothing. O(n log n + containments)."""
    codes = sensitive_codes(joined, spec)
    joined, codes = joined[codes >= 0], codes[codes >= 0]
    on = [a for a in x if f"{a}__lo" in joined.columns and joined[f"{a}__lo"].notna().any()]
    S = len(spec.sensitive_values or ())
    if not on:
        return np.tile(np.bincount(codes, minlength=S).astype(np.float64), (len(last), 1))
    lo = joined[[f"{a}__lo" for a in on]].to_numpy(np.float64)
    hi = joined[[f"{a}__hi" for a in on]].to_numpy(np.float64)
    pi, gi = contained_pairs(encode(last, spec, tuple(on)), lo, hi)
    return sparse.csr_matrix((np.ones(len(pi)), (pi, codes[gi])), shape=(len(last), S)).toarray()


def _log_records_without_the_join(history: History, people: pd.Index) -> np.ndarray:
    """(individuals x values): the log of the number of lossy-join records consistent with each individual, by
    sensitive value, computed release by release without the join, for an adversary who knows every QI (V0).

    Why it is exact: a join record is a tuple of rows, one per release, whose boxes meet on common attributes and
    whose sensitive values agree where carried; it is consistent with individual t when t's QI values lie in its
    box, i.e. in the box of each of its rows on the attributes that row's release publishes (the meeting is then
    automatic: t's values are in it). So the records of value s consistent with t number
    Π_j c_j(t, s), c_j(t, s) the rows of release j containing t with value s (for a release without the sensitive
    attribute: every row containing t). Release j counts for the individuals of T(j) only (V0 with lifespans,
    Shmueli-Tassa §5.2); sensitive values are assumed fixed (§5.3), ``contains_true`` says when they were not.
    Logs, because the products grow as n^releases. Per release: ``grouping.class_boxes``, one
    ``intervals.contained_pairs`` and a sparse product: O(n log n + containments + n x values)."""
    spec = history.spec
    S = len(spec.sensitive_values or ())
    log_count = np.zeros((len(people), S))
    for j in history.release_ids:
        table, snap = history.release(j), history.snapshot(j)
        who = people.get_indexer(snap[spec.id])
        names = released_attributes(table, spec)
        label, lo, hi, counts = class_boxes(table, spec, names)
        if table[spec.sensitive].isna().any():  # a release without the sensitive attribute narrows no value
            counts = np.repeat(np.bincount(label, minlength=len(lo))[:, None].astype(np.float64), S, axis=1)
        if names:
            pi, gi = contained_pairs(encode(snap, spec, tuple(names)), lo, hi)
            member = sparse.csr_matrix((np.ones(len(pi)), (pi, gi)), shape=(len(snap), len(lo)))
            count = np.asarray(member @ counts)
        else:
            count = np.tile(counts.sum(axis=0), (len(snap), 1))
        with np.errstate(divide="ignore"):
            log_count[who] += np.log(count)
    return log_count


def join_attack(
    history: History, bound: Bound = NO_DISCLOSURE, x: Iterable[str] | None = None, budget: int = JOIN_BUDGET,
) -> Report:
    """The join attack on vertical releases (Wang-Fung §1.1 Example 1, (X, Y)-anonymity and -linkability Defs.
    3.1-3.2), judged per individual.

    The adversary joins the releases on their common quasi-identifiers; generalised values match when they
    intersect, so the join is lossy: a record may join rows of other persons. It knows each individual's values
    on ``x``: by default every quasi-identifier, the background release V0 = ID || T|[Q] of Shmueli-Tassa §3
    (eq. (3)); Wang-Fung's own adversary knows X only (``x=["Name"]`` in Example 1). An individual is linked to
    the sensitive values of the join records whose box holds its ``x`` values: ``size`` values (Wang-Fung's
    a_Y(x) with Y the sensitive attribute), over ``records`` join records (more than its own tuples: the join is
    lossy for it), ``risk`` the largest share of one value among them (Def. 3.2's linkability l_y(x)). A join
    group of one record (Wang-Fung's {Bob, HIV}) discloses nobody by itself: what counts is how many values each
    person keeps. Violations: the individuals linked to fewer values than ``bound.values`` (``id, size, risk,
    records, contains_true, candidates``); the true value is always among them when values do not change.

    With V0 (``x`` covers every published quasi-identifier) the records are counted without the join
    (``_log_records_without_the_join``, exact): O(releases x (n log n + containments + n x values)), a few MB on a
    history of 2,000 rows. Otherwise the join is materialised up to ``budget`` rows (``_join_all``); past it the
    attack is skipped, saying so, since only the join tells which rows of other releases meet a partial ``x``.
    Skipped too without snapshots (nobody to attack), when every release publishes the same quasi-identifiers (the
    intersection attack covers them) or when no release publishes the sensitive attribute.
    """
    spec = history.spec
    if history.snapshots is None:
        return skipped("join", "no snapshots: the individuals and their QI values (V0) are unknown")
    sets = _attribute_sets(history)
    if len(set(sets.values())) < 2:
        return skipped("join", "every release publishes the same quasi-identifiers: there is nothing to join (the "
                               "intersection attack covers them)")
    if all(history.release(j)[spec.sensitive].isna().all() for j in history.release_ids):
        return skipped("join", "no release publishes the sensitive attribute")
    x = list(spec.quasi_identifiers) if x is None else list(x)
    people = pd.Index(history.snapshots[spec.id].drop_duplicates())
    last = history.snapshots.drop_duplicates(spec.id, keep="last").set_index(spec.id).reindex(people)
    if set().union(*sets.values()) <= set(x):
        log_count = _log_records_without_the_join(history, people)
        top = log_count.max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            total = top[:, 0] + np.log(np.exp(log_count - top).sum(axis=1))
        linked = np.isfinite(log_count)
        records, risk = np.exp(total), np.exp(top[:, 0] - total)
        how = {"method": "V0: every QI known, counted without materialising the join"}
    else:
        joined = _join_all(history, sets, budget)
        if isinstance(joined, str):
            return skipped("join", f"{joined}; with x = every quasi-identifier (V0) it is judged without the join")
        count = _records_through_the_join(spec, last.reset_index(), joined, x)
        linked, records = count > 0, count.sum(axis=1)
        risk = count.max(axis=1) / np.maximum(records, 1)
        how = {"method": "the lossy join, materialised", "joined_rows": len(joined)}
    size = linked.sum(axis=1)
    values = spec.sensitive_values or ()
    truth = codes_in(last[spec.sensitive], values)
    frame = pd.DataFrame({spec.id: people.to_numpy(), "size": size, "risk": risk, "records": records,
                          "contains_true": linked[np.arange(len(people)), truth]})
    return attack_report("join", frame, size, bound.values, values, linked,
                         {"x": x, "budget": budget, **how})


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
    O(rounds x releases x (containments + a maximum matching and strong components over them)).
    """
    spec = history.spec
    if history.snapshots is None:
        return skipped("possible_worlds", "no snapshots: V0 (the individuals and their QI values) is unknown")
    if len(set(_attribute_sets(history).values())) < 2:
        return skipped("possible_worlds", "every release publishes the same quasi-identifiers: the intersection "
                                        "attack covers them")
    people = pd.Index(history.snapshots[spec.id].drop_duplicates())
    values = spec.sensitive_values or ()
    domain = np.ones((len(people), len(values)), dtype=bool)
    releases = []
    for j in history.release_ids:
        table = history.release(j)
        if table[spec.sensitive].isna().all():
            continue
        snap = history.snapshot(j)
        names = released_attributes(table, spec)
        lo = table[[f"{a}__lo" for a in names]].to_numpy(np.float64)
        hi = table[[f"{a}__hi" for a in names]].to_numpy(np.float64)
        u, r = contained_pairs(encode(snap, spec, tuple(names)), lo, hi)
        releases.append((people.get_indexer(snap[spec.id]), u, r, sensitive_codes(table, spec),
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
    truth = codes_in(last.reindex(people), values)
    frame = pd.DataFrame({spec.id: people.to_numpy(), "size": size, "risk": 1.0 / np.maximum(size, 1),
                          "contains_true": domain[np.arange(len(people)), truth]})
    return attack_report("possible_worlds", frame, size, bound.values, values, domain)
