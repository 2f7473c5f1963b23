"""Utility of a published release: how much the generalisation costs an analyst.

Every metric reads one release in the published format of the DuckDB contract (``group_id``, for each released
quasi-identifier ``A``: ``A``, ``A__lo``, ``A__hi``, ..., the sensitive column; a ``release_id`` column, if
present, is ignored) and is defined for homogeneous releases (one box per QI group, Xiao-Tao) and for
non-homogeneous, per-tuple generalisation (``group_id`` null, Shmueli-Tassa) alike. Entries of an attribute a
release does not include (null bounds) are left out of the averages, as in Shmueli-Tassa §6.

- ``loss_metric``: LM (Iyengar; Shmueli-Tassa §2.2 eq. 1), mean over rows and attributes, 0..1.
- ``entropy_measure``: EM (Shmueli-Tassa §2.2), mean conditional entropy per entry, in bits.
- ``ncp``: normalised certainty penalty (taxonomy Def. 54), mean over rows, 0..1.
- ``discernibility``: DM(T*, k) (taxonomy Def. 53).
- ``kl_divergence``: KL(T, T*) (taxonomy Def. 55), T* read as the uniform spread of each row over its box.
- ``query_error``: median relative error of random range-count queries with the counterfeit correction of
  Xiao-Tao §5.2 (taxonomy Defs. 50-51).
- ``summarise``: the figures the manifest and the Dagster UI show.

QI classes are ``grouping.qi_classes`` (a ``group_id`` where set, else the generalised box), QI values
``encoding.encode`` and box containment ``intervals.contained_pairs``: utility imports no attack.

A categorical bound is a leaf rank, so a node covering leaf ranks ``lo..hi`` holds ``hi - lo + 1`` leaves. The
domain width of a numeric attribute is ``max(A__hi) - min(A__lo)`` of the table unless ``domains`` gives it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..encoding import encode, sensitive_codes
from ..grouping import qi_classes, released_attributes
from ..intervals import contained_pairs
from ..spec import BoundSpec


def _bounds(table: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    return table[f"{name}__lo"].to_numpy(np.float64), table[f"{name}__hi"].to_numpy(np.float64)


def _numeric_width(table: pd.DataFrame, name: str, domains: Mapping[str, float] | None) -> float:
    if domains is not None and name in domains:
        return float(domains[name])
    lo, hi = _bounds(table, name)
    return float(np.nanmax(hi) - np.nanmin(lo))


def _leaves(spec: BoundSpec, name: str) -> int:
    return len(spec.taxonomy(name).leaves)


def _penalties(table: pd.DataFrame, spec: BoundSpec, names: list[str], domains, categorical) -> np.ndarray:
    """(rows, attributes) matrix of per-entry penalties, NaN where the entry is not released.

    Numeric entries cost ``(hi - lo) / width``; categorical ones ``categorical(leaves under node, leaves)``.
    """
    out = np.full((len(table), len(names)), np.nan)
    for j, name in enumerate(names):
        lo, hi = _bounds(table, name)
        if spec.quasi_identifiers[name].numeric:
            width = _numeric_width(table, name, domains)
            out[:, j] = (hi - lo) / width if width > 0 else 0.0
        else:
            out[:, j] = categorical(hi - lo + 1, _leaves(spec, name))
    return out


def _lm_categorical(under: np.ndarray, leaves: int) -> np.ndarray:
    return (under - 1) / (leaves - 1) if leaves > 1 else np.zeros_like(under)


def _ncp_categorical(under: np.ndarray, leaves: int) -> np.ndarray:
    return np.where(under > 1, under / leaves, 0.0)


def loss_metric(
    table: pd.DataFrame,
    spec: BoundSpec,
    attributes: tuple[str, ...] | None = None,
    domains: Mapping[str, float] | None = None,
) -> float:
    """LM information loss (Shmueli-Tassa §2.2 eq. 1, after Iyengar): mean over rows and released attributes of
    ``(|v(m)| - 1) / (|A_m| - 1)``; 0 for an ungeneralised table, 1 for a fully suppressed one.

    Categorical: ``(leaves under the node - 1) / (leaves - 1)``. Numeric: ``interval width / domain width``, the
    domain width from ``domains`` or the table's own ``min(A__lo)..max(A__hi)``. O(rows * attributes).
    """
    names = released_attributes(table, spec, attributes)
    if not names or not len(table):
        return 0.0
    return float(np.nanmean(_penalties(table, spec, names, domains, _lm_categorical)))


def ncp(
    table: pd.DataFrame,
    spec: BoundSpec,
    attributes: tuple[str, ...] | None = None,
    weights: Mapping[str, float] | None = None,
    domains: Mapping[str, float] | None = None,
) -> float:
    """Normalised certainty penalty (taxonomy Def. 54), mean over rows of ``sum_i w_i NCP_Ai(t*)``.

    Numeric: ``(y - x) / |A|`` with ``|A| = max - min`` (the table's range unless ``domains`` gives it);
    categorical: 0 for a leaf, else ``leaves under the node / leaves``. Weights default to ``1 / attributes``
    (so the result is in 0..1); an entry that is not released contributes nothing. O(rows * attributes).
    """
    names = released_attributes(table, spec, attributes)
    if not names or not len(table):
        return 0.0
    pen = _penalties(table, spec, names, domains, _ncp_categorical)
    w = np.array([(weights or {}).get(a, 1.0 / len(names)) for a in names])
    return float(np.nansum(pen * w, axis=1).mean())


def _value_frequencies(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted distinct values and the prefix sums of ``p`` and ``p log2 p`` (``p`` their relative frequency)."""
    uniq, counts = np.unique(values, return_counts=True)
    p = counts / counts.sum()
    zero = np.zeros(1)
    return uniq, np.concatenate([zero, np.cumsum(p)]), np.concatenate([zero, np.cumsum(p * np.log2(p))])


def entropy_measure(
    table: pd.DataFrame, snapshot: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...] | None = None
) -> float:
    """EM information loss (Shmueli-Tassa §2.2): mean over released entries of the conditional entropy
    ``H(v) = -sum q_i log2 q_i``, ``q_i = p_i / sum p`` over the values ``b_i`` of the snapshot inside ``v``.

    ``p_i`` is the relative frequency of ``b_i`` in the snapshot T (the distribution EM assumes is known).
    The paper's total is this mean times the number of released entries. With prefix sums over the sorted
    values, ``H(v) = log2 S - (sum p log2 p) / S`` with ``S = sum p`` over ``v``: O((rows + n) log n).
    """
    names = released_attributes(table, spec, attributes)
    if not names or not len(table):
        return 0.0
    X = encode(snapshot, spec, tuple(names))
    out = np.full((len(table), len(names)), np.nan)
    for j, name in enumerate(names):
        uniq, cp, cplogp = _value_frequencies(X[:, j])
        lo, hi = _bounds(table, name)
        a = np.searchsorted(uniq, lo, side="left")
        b = np.searchsorted(uniq, hi, side="right")
        mass = cp[b] - cp[a]
        plogp = cplogp[b] - cplogp[a]
        with np.errstate(divide="ignore", invalid="ignore"):
            h = np.where(mass > 0, np.log2(np.where(mass > 0, mass, 1.0)) - plogp / np.where(mass > 0, mass, 1.0), 0)
        out[:, j] = np.where(np.isnan(lo), np.nan, np.maximum(h, 0.0))
    return float(np.nanmean(out))


def _classes(
    table: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``grouping.qi_classes`` of one release (its ``release_id`` ignored) on its released attributes:
    ``(class per row, first row per class, size per class)``. O(n log n)."""
    return qi_classes(table, released_attributes(table, spec, attributes), by_release=False)


def discernibility(table: pd.DataFrame, spec: BoundSpec, k: int = 1) -> float:
    """Discernibility DM(T*, k) (taxonomy Def. 53): ``|Q|^2`` for each class of at least ``k`` rows and
    ``|T*| * |Q|`` for each smaller one. Classes per ``grouping.qi_classes``; counterfeits count as rows.
    O(n log n)."""
    sizes = _classes(table, spec)[2].astype(np.float64)
    return float(np.where(sizes >= k, sizes**2, len(table) * sizes).sum())


def _cells(table: pd.DataFrame, spec: BoundSpec, names: list[str], grids: list[np.ndarray]) -> np.ndarray:
    """Number of domain cells inside each row's box: the product over attributes of the grid values in it."""
    cells = np.ones(len(table))
    for name, grid in zip(names, grids, strict=True):
        lo, hi = _bounds(table, name)
        cells *= np.searchsorted(grid, hi, side="right") - np.searchsorted(grid, lo, side="left")
    return cells


def kl_divergence(
    table: pd.DataFrame, snapshot: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...] | None = None
) -> float:
    """KL(T, T*) (taxonomy Def. 55) over the cells (QI values, sensitive value) of the snapshot T.

    ``p_i``: frequency of cell ``t_i`` in T. ``p*_i``: the published table read as a distribution, each of its
    ``N*`` rows spreading ``1 / N*`` uniformly over the cells of its box with its sensitive value; the cells of
    a numeric attribute are the snapshot's distinct values, those of a categorical one its taxonomy's leaves.
    Box containment is the vectorised interval join ``intervals.contained_pairs``. Natural log; 0 iff T* = T.
    O(n log n + rows x cells containments).
    """
    names = released_attributes(table, spec, attributes)
    X = encode(snapshot, spec, tuple(names))
    codes = sensitive_codes(snapshot, spec).astype(np.float64)
    points, counts = np.unique(np.column_stack([X, codes]), axis=0, return_counts=True)
    p = counts / counts.sum()
    grids = [
        np.unique(X[:, j]) if spec.quasi_identifiers[a].numeric else np.arange(_leaves(spec, a), dtype=np.float64)
        for j, a in enumerate(names)
    ]
    star_codes = sensitive_codes(table, spec).astype(np.float64)
    lo = np.column_stack([_bounds(table, a)[0] for a in names] + [star_codes])
    hi = np.column_stack([_bounds(table, a)[1] for a in names] + [star_codes])
    mass = 1.0 / (len(table) * np.maximum(_cells(table, spec, names, grids), 1))
    pi, gi = contained_pairs(points, lo, hi)
    p_star = np.bincount(pi, weights=mass[gi], minlength=len(points))
    with np.errstate(divide="ignore"):
        return float(np.sum(p * np.log(p / p_star)))


def _domain(snapshot_X: np.ndarray, spec: BoundSpec, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per attribute the domain ``[lo, hi]`` queries are drawn from: the snapshot's range (numeric) or the leaf
    ranks ``0..leaves-1`` (categorical)."""
    lo = np.empty(len(names))
    hi = np.empty(len(names))
    for j, name in enumerate(names):
        if spec.quasi_identifiers[name].numeric:
            lo[j], hi[j] = snapshot_X[:, j].min(), snapshot_X[:, j].max()
        else:
            lo[j], hi[j] = 0, _leaves(spec, name) - 1
    return lo, hi


def random_queries(
    snapshot: pd.DataFrame, spec: BoundSpec, theta: float, queries: int, rng: np.random.Generator,
    attributes: tuple[str, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A workload of range-count queries (Xiao-Tao §5.2): on each released QI and on the sensitive attribute a
    random range of length ``|A| * theta^(1/(d+1))``, ``|A|`` the domain size, ``d`` the number of QIs.

    Returns ``(lo, hi)``, each ``(queries, d + 1)``: inclusive bounds; numeric ranges are real intervals,
    categorical and sensitive ones whole leaf-rank / sensitive-code ranges of at least one value (the sensitive
    codes index ``spec.sensitive_values``). Deterministic given ``rng``. O(n d + queries d).
    """
    names = list(attributes or spec.quasi_identifiers)
    X = encode(snapshot, spec, tuple(names))
    frac = theta ** (1.0 / (len(names) + 1))
    dom_lo, dom_hi = _domain(X, spec, names)
    lo = np.empty((queries, len(names) + 1))
    hi = np.empty_like(lo)
    discrete = [not spec.quasi_identifiers[a].numeric for a in names] + [True]
    sizes = np.append(dom_hi - dom_lo, len(spec.sensitive_values) - 1)
    starts = np.append(dom_lo, 0)
    for j, is_discrete in enumerate(discrete):
        if is_discrete:
            span = max(1, round((sizes[j] + 1) * frac))
            lo[:, j] = starts[j] + rng.integers(0, int(sizes[j]) + 2 - span, size=queries)
            hi[:, j] = lo[:, j] + span - 1
        else:
            span = sizes[j] * frac
            lo[:, j] = starts[j] + rng.random(queries) * (sizes[j] - span)
            hi[:, j] = lo[:, j] + span
    return lo, hi


def query_actual(
    snapshot: pd.DataFrame, spec: BoundSpec, lo: np.ndarray, hi: np.ndarray, attributes: tuple[str, ...] | None = None
) -> np.ndarray:
    """Exact answers ``act`` of the workload on the microdata T(j): tuples inside every range. Tuples that share
    their QI and sensitive codes are counted once with their multiplicity (a table repeats its points: 120k
    Census-KDD workers hold about a tenth as many), then blocks of queries against the distinct points:
    O(rows log rows + queries * points * (d + 1))."""
    names = tuple(attributes or spec.quasi_identifiers)
    rows = np.column_stack([encode(snapshot, spec, names), sensitive_codes(snapshot, spec)])
    P, count = np.unique(rows, axis=0, return_counts=True) if len(rows) else (rows, np.zeros(0, np.int64))
    out = np.empty(len(lo), dtype=np.int64)
    block = max(1, 2_000_000 // max(len(P), 1))
    for s in range(0, len(lo), block):
        inside = (P[None, :, :] >= lo[s : s + block, None, :]) & (P[None, :, :] <= hi[s : s + block, None, :])
        out[s : s + block] = inside.all(axis=2) @ count
    return out


def query_estimate(
    table: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec, lo: np.ndarray, hi: np.ndarray,
    attributes: tuple[str, ...] | None = None,
) -> np.ndarray:
    """Estimated answers ``est`` from T*(j) and R(j) (Xiao-Tao §5.2): the sum over QI groups of
    ``(|QI*| - c3) * c1 * c2``, with ``c1`` the fraction of the group's box inside the query's QI ranges
    (numeric: length ratio, a point box counting 1 when inside; categorical: the share of its leaves),
    ``c2`` the share of the group's rows whose sensitive value qualifies and ``c3`` its counterfeits (R(j)).
    A non-homogeneous release has one group per row. O(rows + groups * values) for the groups' histograms of
    sensitive codes, then O(queries * groups * d) in blocks of queries.
    """
    names = list(attributes or spec.quasi_identifiers)
    classes, first, size = _classes(table, spec, tuple(names))
    codes = sensitive_codes(table, spec)
    size = size.astype(np.float64)
    c3 = np.zeros(len(size))
    if len(counterfeits) and "group_id" in table.columns and table["group_id"].notna().all():
        gid = table["group_id"].to_numpy()[first]
        c3 = pd.Series(gid).map(counterfeits.groupby("group_id")["count"].sum()).fillna(0).to_numpy(np.float64)
    glo = np.column_stack([_bounds(table, a)[0][first] for a in names])
    ghi = np.column_stack([_bounds(table, a)[1][first] for a in names])
    discrete = np.array([not spec.quasi_identifiers[a].numeric for a in names])
    ext = np.where(discrete, ghi - glo + 1, ghi - glo)
    # c2 from each group's cumulative histogram of sensitive codes: O(rows + groups x values) once, then
    # O(groups) per query (codes outside the domain, -1, never qualify)
    values = max(len(spec.sensitive_values), int(codes.max()) + 1 if len(codes) else 0, 1)
    known = codes >= 0
    hist = np.bincount(classes[known] * values + codes[known], minlength=len(size) * values)
    cum = np.zeros((len(size), values + 1))
    cum[:, 1:] = np.cumsum(hist.reshape(len(size), values), axis=1)
    out = np.empty(len(lo))
    block = max(1, 2_000_000 // max(len(size) * max(len(names), 1), 1))
    for s in range(0, len(lo), block):
        qlo, qhi = lo[s : s + block, None, :-1], hi[s : s + block, None, :-1]
        overlap = np.minimum(ghi, qhi) - np.maximum(glo, qlo)
        overlap = np.where(discrete, overlap + 1, overlap)
        point_in = (glo >= qlo) & (glo <= qhi)
        frac = np.where(ext > 0, np.clip(overlap, 0, None) / np.where(ext > 0, ext, 1), point_in)
        c1 = frac.prod(axis=2)
        vlo = np.clip(np.ceil(lo[s : s + block, -1]), 0, values).astype(np.int64)  # codes >= lo
        vhi = np.clip(np.floor(hi[s : s + block, -1]) + 1, 0, values).astype(np.int64)  # codes <= hi
        c2 = np.clip(cum[:, vhi] - cum[:, vlo], 0, None).T / size
        out[s : s + block] = ((size - c3) * c1 * c2).sum(axis=1)
    return out


def query_error(
    table: pd.DataFrame, snapshot: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec,
    theta: float = 0.1, queries: int = 1000, rng: np.random.Generator | None = None,
) -> float:
    """Workload error (Xiao-Tao §5.2; taxonomy Def. 51): the median of ``|act - est| / act`` over a workload of
    ``random_queries``; queries whose exact answer is 0 have no relative error and are left out (NaN if all
    are). Deterministic given ``rng`` (default: seed 0). O(queries * (rows + groups) * d): ``query_actual`` and
    ``query_estimate``."""
    rng = rng if rng is not None else np.random.default_rng(0)
    names = tuple(released_attributes(table, spec))
    lo, hi = random_queries(snapshot, spec, theta, queries, rng, names)
    act = query_actual(snapshot, spec, lo, hi, names)
    est = query_estimate(table, counterfeits, spec, lo, hi, names)
    keep = act > 0
    return float(np.median(np.abs(act[keep] - est[keep]) / act[keep])) if keep.any() else float("nan")


def summarise(
    table: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec, snapshot: pd.DataFrame | None = None,
    queries: int = 200,
) -> dict[str, float]:
    """The utility figures of one release for the manifest and the Dagster UI: ``lm``, ``ncp``,
    ``discernibility``, ``query_error`` (median relative error at theta = 0.1 over ``queries`` queries, seed 0;
    NaN without the ``snapshot`` the actual answers come from), ``rows``, ``groups``, ``counterfeits``. The cost
    is ``query_error``'s (the metrics before it are O(n log n))."""
    error = float("nan") if snapshot is None else query_error(table, snapshot, counterfeits, spec, 0.1, queries)
    return {
        "lm": loss_metric(table, spec),
        "ncp": ncp(table, spec),
        "discernibility": discernibility(table, spec),
        "query_error": error,
        "rows": float(len(table)),
        "groups": float(len(_classes(table, spec)[1])) if len(table) else 0.0,
        "counterfeits": float(counterfeits["count"].sum()) if len(counterfeits) else 0.0,
    }
