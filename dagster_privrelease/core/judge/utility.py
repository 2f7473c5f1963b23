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

from ..encoding import dense_ranks, distinct_rank_rows, encode, sensitive_codes
from ..grouping import pack_bits, popcount, qi_classes, released_attributes
from ..intervals import contained_pairs
from ..models.kernels.compiled import compiled
from ..models.kernels.compiled import loaded as kernels_loaded
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


#: ``_classes``' result: (class per row, first row per class, size per class).
Classes = tuple[np.ndarray, np.ndarray, np.ndarray]


def _classes(table: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...] | None = None) -> Classes:
    """``grouping.qi_classes`` of one release (its ``release_id`` ignored) on its released attributes:
    ``(class per row, first row per class, size per class)``. O(n log n)."""
    return qi_classes(table, released_attributes(table, spec, attributes), by_release=False)


def discernibility(table: pd.DataFrame, spec: BoundSpec, k: int = 1, classes: Classes | None = None) -> float:
    """Discernibility DM(T*, k) (taxonomy Def. 53): ``|Q|^2`` for each class of at least ``k`` rows and
    ``|T*| * |Q|`` for each smaller one. Classes per ``grouping.qi_classes`` (``classes``: ``_classes(table,
    spec)`` when the caller has it); counterfeits count as rows. O(n log n), O(classes) given them."""
    sizes = (_classes(table, spec) if classes is None else classes)[2].astype(np.float64)
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
    return _workload(encode(snapshot, spec, tuple(names)), spec, names, theta, queries, rng)


def _workload(
    X: np.ndarray, spec: BoundSpec, names: list[str], theta: float, queries: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``random_queries`` on the snapshot's encoded QIs ``X`` (``encode`` on ``names``). O(n d + queries d)."""
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


def _ranked_points(rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """The distinct rows of an (n, k) matrix as ``(points, values, count)``: ``points[p, j]`` the rank plus one of
    point p's value among ``values[j]``, column j's distinct values in order (0 for NaN, inside no range), and
    ``count[p]`` how many rows hold point p. Ranks by ``encoding.dense_ranks``, rows as one integer key each
    (``encoding.distinct_rank_rows``): O(n k log n), no sort of rows."""
    ranks, values = dense_ranks(rows)
    first, _, count = distinct_rank_rows(ranks, values)
    return ranks[first], values, count


def query_actual(
    snapshot: pd.DataFrame, spec: BoundSpec, lo: np.ndarray, hi: np.ndarray, attributes: tuple[str, ...] | None = None
) -> np.ndarray:
    """Exact answers ``act`` of the workload on the microdata T(j): tuples inside every range. Tuples that share
    their QI and sensitive codes are counted once with their multiplicity (a table repeats its points: 120k
    Census-KDD workers hold about 52,000; ``_ranked_points``), a range on a column is a range of ranks of its
    distinct values, and the points inside a query are and-ed bitsets (``_count_inside``):
    O(rows (d + 1) log rows + queries * points * (d + 1) / 64)."""
    names = tuple(attributes or spec.quasi_identifiers)
    return _count_inside(np.column_stack([encode(snapshot, spec, names), sensitive_codes(snapshot, spec)]), lo, hi)


#: Bytes of the per-column tables of ``_bitset_counts`` (one bitset of the points per rank and column) above
#: which ``_count_inside`` compares ranks byte by byte instead (a numeric column of many distinct values).
_BITSET_BUDGET = 64 << 20


def _count_inside(rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, budget: int = _BITSET_BUDGET) -> np.ndarray:
    """``query_actual`` on the snapshot's rows of QI values and sensitive codes, an (n, d + 1) matrix: per query,
    the rows inside every range ``[lo, hi]``. A range on a column is the range of ranks
    ``[searchsorted(values, lo, left), searchsorted(values, hi, right))`` of its distinct values (shifted by one,
    0 for NaN). With the points as bitsets (``_bitset_counts``, while its tables fit ``budget`` bytes), a query
    is d + 1 and-ed pairs of bitset rows and weighted popcounts: O(queries * points * (d + 1) / 64); otherwise
    per block of queries and per column one look-up of each point's rank in a (queries, ranks) table of
    booleans, and-ed over the columns, then a matrix product with the multiplicities: O(queries * points *
    (d + 1)) byte operations. Plus O(n (d + 1) log n) for the distinct points (``_ranked_points``)."""
    out = np.zeros(len(lo), dtype=np.int64)
    if not len(rows):
        return out
    points, values, count = _ranked_points(rows)
    first = [np.searchsorted(v, lo[:, j], side="left") + 1 for j, v in enumerate(values)]
    after = [np.searchsorted(v, hi[:, j], side="right") + 1 for j, v in enumerate(values)]
    if sum(len(v) + 2 for v in values) * 8 * -(-len(points) // 64) <= budget:
        return _bitset_counts(points, [len(v) for v in values], count, first, after)
    weight = count.astype(np.float64)  # exact: a count below 2^53
    block = max(1, 8_000_000 // len(points))
    for s in range(0, len(lo), block):
        inside = np.ones((len(lo[s : s + block]), len(points)), dtype=bool)
        for j, distinct in enumerate(values):
            grid = np.arange(len(distinct) + 1)
            table = (grid >= first[j][s : s + block, None]) & (grid < after[j][s : s + block, None])
            inside &= np.take(table, points[:, j], axis=1)
        out[s : s + block] = np.rint(inside @ weight).astype(np.int64)
    return out


def _bitset_counts(
    points: np.ndarray, sizes: list[int], count: np.ndarray, first: list[np.ndarray], after: list[np.ndarray]
) -> np.ndarray:
    """Per query, the total ``count`` of the points whose rank on every column j lies in ``[first[j][q],
    after[j][q])`` (ranks 0..sizes[j], ``_count_inside``). Per column, ``below[t]`` is the bitset (``pack_bits``)
    of the points of rank below t, so a query's points on that column are ``below[after] & ~below[first]``; the
    count is the popcount of the and over the columns with each bit plane of ``count``, weighted by its power of
    two. O(points * sum(sizes)) bits for the tables, O(queries * points / 64 * (d + 1 + log2 max count))."""
    tables = [pack_bits(points[:, j][None, :] < np.arange(size + 2)[:, None]) for j, size in enumerate(sizes)]
    planes = [pack_bits(((count >> bit) & 1).astype(bool)[None, :])[0] for bit in range(int(count.max()).bit_length())]
    out = np.zeros(len(first[0]), dtype=np.int64)
    block = max(1, (1 << 20) // tables[0].shape[1])  # (queries, words) bitsets of 8 MB
    for s in range(0, len(out), block):
        inside = np.full((len(out[s : s + block]), tables[0].shape[1]), np.uint64(2**64 - 1))
        for j, below in enumerate(tables):
            inside &= below[after[j][s : s + block]] & ~below[first[j][s : s + block]]
        for bit, plane in enumerate(planes):
            out[s : s + block] += popcount(inside & plane) << bit
    return out


def _distinct_intervals(glo: np.ndarray, ghi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``[lo, hi]`` pairs of one attribute's group boxes: ``(lo, hi, inverse)``, ``inverse[g]`` the
    pair of group g. Dense ranks of both bounds as one integer key: O(groups log groups)."""
    ranks, values = dense_ranks(np.column_stack([glo, ghi]))
    first, inverse, _ = distinct_rank_rows(ranks, values)
    return glo[first], ghi[first], inverse


def _box_fraction(glo: np.ndarray, ghi: np.ndarray, qlo: np.ndarray, qhi: np.ndarray, discrete: bool) -> np.ndarray:
    """c1 of Xiao-Tao §5.2 on one attribute: the fraction of each box ``[glo, ghi]`` inside each query range
    ``[qlo, qhi]`` (``qlo``/``qhi`` columns of shape (queries, 1)): the length ratio (a categorical range counts
    its leaves, ``+ 1``), a point box 1 when inside. (queries, boxes) float64, O(queries * boxes)."""
    ext = ghi - glo + 1 if discrete else ghi - glo
    overlap = np.minimum(ghi, qhi) - np.maximum(glo, qlo)
    if discrete:
        overlap = overlap + 1
    point_in = (glo >= qlo) & (glo <= qhi)
    return np.where(ext > 0, np.clip(overlap, 0, None) / np.where(ext > 0, ext, 1), point_in)


#: Work (queries x groups x attributes) from which ``_estimate_terms``' compiled pass pays for importing numba
#: (about 0.9 s of CPU) in a process that has not: it saves about 3.6 ns per unit (5M units: 25 -> 7 ms).
_COMPILE_WORK = 250_000_000


def _estimate_terms_reference(fracs: np.ndarray, inverse: np.ndarray, weight: np.ndarray, cum: np.ndarray,
                              vlo: np.ndarray, vhi: np.ndarray, size: np.ndarray, terms: np.ndarray) -> None:
    """The numpy reference of ``_estimate_terms``: the (queries, groups) products, one attribute's gather at a time."""
    c1 = np.ones(terms.shape)
    for j in range(inverse.shape[1]):
        c1 *= np.take(fracs, inverse[:, j], axis=1)
    c2 = np.clip(cum[:, vhi] - cum[:, vlo], 0, None).T / size
    terms[:] = weight * c1 * c2


@compiled(_estimate_terms_reference)
def _estimate_terms(fracs: np.ndarray, inverse: np.ndarray, weight: np.ndarray, cum: np.ndarray, vlo: np.ndarray,
                    vhi: np.ndarray, size: np.ndarray, terms: np.ndarray) -> None:
    """Xiao-Tao §5.2's term of every (query i, group g): ``terms[i, g] = (|QI*| - c3) * c1 * c2`` with
    ``weight = |QI*| - c3``, ``c1`` the product over the attributes j of ``fracs[i, inverse[g, j]]`` (the
    fraction of g's interval inside query i's range, in attribute order) and ``c2`` the share of g's rows whose
    sensitive code lies in ``[vlo[i], vhi[i])`` (``cum``: each group's cumulative histogram). The same floating
    point operations in the same order as the reference, so the same bits; one pass, no (queries, groups)
    temporary per attribute. O(queries * groups * d)."""
    for g in range(terms.shape[1]):
        for i in range(terms.shape[0]):
            c1 = 1.0
            for j in range(inverse.shape[1]):
                c1 *= fracs[i, inverse[g, j]]
            c2 = cum[g, vhi[i]] - cum[g, vlo[i]]
            if c2 < 0.0:
                c2 = 0.0
            terms[i, g] = weight[g] * c1 * (c2 / size[g])


def query_estimate(
    table: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec, lo: np.ndarray, hi: np.ndarray,
    attributes: tuple[str, ...] | None = None, classes: Classes | None = None,
) -> np.ndarray:
    """Estimated answers ``est`` from T*(j) and R(j) (Xiao-Tao §5.2): the sum over QI groups of
    ``(|QI*| - c3) * c1 * c2``, with ``c1`` the fraction of the group's box inside the query's QI ranges
    (numeric: length ratio, a point box counting 1 when inside; categorical: the share of its leaves),
    ``c2`` the share of the group's rows whose sensitive value qualifies and ``c3`` its counterfeits (R(j)).
    A non-homogeneous release has one group per row. ``classes``: ``_classes(table, spec, attributes)`` when the
    caller has it.

    Cost: O(rows + groups * values) for the groups' histograms of sensitive codes; per attribute, the fraction
    ``_box_fraction`` is computed once per distinct interval of the groups (Census-KDD: a few hundred, against
    30,000 groups at 120k rows) and gathered per group, so ``c1`` is d gathers and products of (queries, groups)
    in blocks of queries: O(queries * groups * d), with every figure the same as the direct product over the
    (queries, groups, d) array (the same operations per entry, the product in attribute order).
    """
    names = list(attributes or spec.quasi_identifiers)
    row_class, first, size = _classes(table, spec, tuple(names)) if classes is None else classes
    codes = sensitive_codes(table, spec)
    size = size.astype(np.float64)
    c3 = np.zeros(len(size))
    if len(counterfeits) and "group_id" in table.columns and table["group_id"].notna().all():
        gid = table["group_id"].to_numpy()[first]
        c3 = pd.Series(gid).map(counterfeits.groupby("group_id")["count"].sum()).fillna(0).to_numpy(np.float64)
    boxes = [_distinct_intervals(_bounds(table, a)[0][first], _bounds(table, a)[1][first]) for a in names]
    discrete = [not spec.quasi_identifiers[a].numeric for a in names]
    # inverse[g, j]: group g's distinct interval of attribute j, as a column of a block of queries' (queries,
    # distinct intervals of every attribute) fractions (``_estimate_terms``)
    inverse, offset = np.empty((len(size), len(boxes)), dtype=np.int64), 0
    for j, (ulo, _, of_group) in enumerate(boxes):
        inverse[:, j], offset = of_group + offset, offset + len(ulo)
    # c2 from each group's cumulative histogram of sensitive codes: O(rows + groups x values) once, then
    # O(groups) per query (codes outside the domain, -1, never qualify)
    values = max(len(spec.sensitive_values), int(codes.max()) + 1 if len(codes) else 0, 1)
    known = codes >= 0
    hist = np.bincount(row_class[known] * values + codes[known], minlength=len(size) * values)
    cum = np.zeros((len(size), values + 1))
    cum[:, 1:] = np.cumsum(hist.reshape(len(size), values), axis=1)
    out = np.empty(len(lo))
    block = max(1, 500_000 // max(len(size), 1))  # (queries, groups) temporaries of 4 MB: 25% faster than 16 MB
    # compiled when numba is loaded already (m-invariance's and m-Distinct's kernels load it) or the work pays
    # for its import; the numpy reference otherwise (the same bits)
    compiled_pays = kernels_loaded() or len(lo) * len(size) * max(len(boxes), 1) >= _COMPILE_WORK
    terms_of = _estimate_terms if compiled_pays else _estimate_terms.reference
    for s in range(0, len(lo), block):
        fracs = np.concatenate([_box_fraction(ulo, uhi, lo[s : s + block, j, None], hi[s : s + block, j, None],
                                              discrete[j]) for j, (ulo, uhi, _) in enumerate(boxes)]
                               + [np.zeros((len(lo[s : s + block]), 0))], axis=1)
        vlo = np.clip(np.ceil(lo[s : s + block, -1]), 0, values).astype(np.int64)  # codes >= lo
        vhi = np.clip(np.floor(hi[s : s + block, -1]) + 1, 0, values).astype(np.int64)  # codes <= hi
        terms = np.empty((len(fracs), len(size)))
        terms_of(fracs, inverse, size - c3, cum, vlo, vhi, size, terms)
        out[s : s + block] = terms.sum(axis=1)
    return out


def query_error(
    table: pd.DataFrame, snapshot: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec,
    theta: float = 0.1, queries: int = 1000, rng: np.random.Generator | None = None, classes: Classes | None = None,
) -> float:
    """Workload error (Xiao-Tao §5.2; taxonomy Def. 51): the median of ``|act - est| / act`` over a workload of
    ``random_queries``. Deterministic given ``rng``. The snapshot is encoded once for the workload and the exact
    answers.

    Args:
        table: the published release T*(j) (its ``release_id`` column, if any, ignored).
        snapshot: the microdata T(j) the exact answers are counted on.
        counterfeits: R(j), the counterfeits per group (Xiao-Tao's correction of the estimate).
        spec: the spec bound to T(j).
        theta: the expected selectivity of a query (each range ``|A| * theta^(1/(d+1))`` long).
        queries: how many queries the workload has.
        rng: the generator of the workload (default: seed 0).
        classes: ``_classes(table, spec)`` when the caller has it (``summarise`` shares them).

    Returns:
        The median relative error; queries whose exact answer is 0 have no relative error and are left out
        (NaN if all are).

    Cost: O(rows d log rows + queries * (points + groups) * d), ``query_actual`` and ``query_estimate``: about
    0.2 s of CPU for 200 queries on release 2 of 120k Census-KDD rows.
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    names = tuple(released_attributes(table, spec))
    X = encode(snapshot, spec, names)  # once, for the workload and the exact answers
    lo, hi = _workload(X, spec, list(names), theta, queries, rng)
    act = _count_inside(np.column_stack([X, sensitive_codes(snapshot, spec)]), lo, hi)
    est = query_estimate(table, counterfeits, spec, lo, hi, names, classes)
    keep = act > 0
    return float(np.median(np.abs(act[keep] - est[keep]) / act[keep])) if keep.any() else float("nan")


def summarise(
    table: pd.DataFrame, counterfeits: pd.DataFrame, spec: BoundSpec, snapshot: pd.DataFrame | None = None,
) -> dict[str, float]:
    """The utility figures of one release for the manifest and the Dagster UI: ``lm``, ``ncp``,
    ``discernibility``, ``query_error`` (median relative error over the spec's workload, ``spec.utility``:
    selectivity and number of queries, seed 0; NaN without the ``snapshot`` the actual answers come from),
    ``rows``, ``groups``, ``counterfeits``. The release's QI classes are found once, for the discernibility, the
    estimates and the groups. The cost is ``query_error``'s (the metrics before it are O(n log n))."""
    workload = spec.utility
    classes = _classes(table, spec)
    error = float("nan") if snapshot is None else query_error(table, snapshot, counterfeits, spec,
                                                              workload.selectivity, workload.queries,
                                                              classes=classes)
    return {
        "lm": loss_metric(table, spec),
        "ncp": ncp(table, spec),
        "discernibility": discernibility(table, spec, classes=classes),
        "query_error": error,
        "rows": float(len(table)),
        "groups": float(len(classes[1])) if len(table) else 0.0,
        "counterfeits": float(counterfeits["count"].sum()) if len(counterfeits) else 0.0,
    }
