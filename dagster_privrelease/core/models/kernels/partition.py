"""Mondrian's multidimensional strict partition (LeFevre, DeWitt, Ramakrishnan, "Mondrian multidimensional
k-anonymity", ICDE 2006), the partitioner the papers lean on: Xiao-Tao §5 computes its ℓ-diverse baseline releases
with it (ref. [13]), Shmueli-Tassa §4.2 builds the ℓ-diverse buckets of Algorithm 1 with it (ref. [18]), and
Li-Zhou and Wang-Fung cite it (ref. [9]). Used by the baselines (``models.mondrian``), m-invariance's first
release (``first_release: mondrian``) and the possible worlds of sequential ℓ-diversity.

A region of the quasi-identifier space is cut in two at the median of one attribute, strictly (tuples equal to the
split value all go to the same side, so the two regions do not overlap), and only when both halves still satisfy
the privacy constraint; the regions that cannot be cut are the QI groups. ``partition`` enforces, on every group:

- ``k``: at least ``k`` tuples (k-anonymity);
- ``l`` in ``form`` "distinct": at least ``l`` distinct sensitive values; "frequency": no sensitive value in
  more than 1/l of the group (Shmueli-Tassa Def. 2.3);
- ``unique=True``: m-uniqueness with ``m = k`` (Xiao-Tao Def. 17): at least m tuples, all sensitive values
  pairwise distinct. Mondrian cuts while both halves stay m-eligible (no value in more than 1/m of the half,
  Xiao-Tao §4.1), then every leaf is cut into m-unique groups (``_m_unique_cut``).

The split attribute is the one of widest range normalised by ``scale`` (domain widths), as in Mondrian's
greedy partitioning; a categorical attribute is cut on leaf rank, so each side is a contiguous run of the
taxonomy's depth-first leaf order and its closure (release.group_boxes) stays as low in the taxonomy as the
data allow. When the widest attribute cannot be cut, the next widest is tried, and so on.

Implementation: the recursion is run breadth-first, one level of the tree at a time, all nodes of a level
together in numpy (segment sorts, ``reduceat``, ``bincount``); a per-node numpy call costs tens of
microseconds and a million-row table has hundreds of thousands of nodes, so per-node work would take minutes.
Each level costs O(n log n); the tree has O(log(n / k)) levels on real data.

Below a cut the subtrees run through the partition seam (``core.partitioned``): the top levels are grown here until
a level has about 4 nodes per worker of the current backend (or its largest node is below ``REGION_ROWS``); each
node of that level is a region, a partition whose kernel (``grow_regions``) grows the rest of its subtree. Mondrian
is deterministic and a region's cuts read its own rows only, so the leaves, and their ids (level by level, each level
in tree order), are those of the tree grown all at once, whatever the backend and its batching.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from ....errors import NotPublishable
from ...encoding import dense_ranks
from ...partitioned import Seeds, current, numbered, parallelism
from ...progress import step
from ...spec import BoundSpec

FORMS = ("frequency", "distinct")
#: Regions below the cut per worker of the backend: enough that unequal subtrees even out across the workers.
REGIONS_PER_WORKER = 4
#: The driver stops cutting a level whose largest node has fewer rows: below it a subtree is cheaper than a call.
REGION_ROWS = 2_000
#: A kernel's label is its leaf's level shifted by this many bits, or'ed with the leaf's id in the call.
_LEVEL_BITS = 40


@dataclass(frozen=True)
class Constraint:
    """What every group must satisfy: size >= k and ℓ-diversity of ``form`` (ℓ = 1: none)."""

    k: int
    l: int  # noqa: E741 - the papers' name
    form: str

    @property
    def needs_counts(self) -> bool:
        """Whether the sensitive histogram of a group matters (ℓ > 1)."""
        return self.l > 1

    @property
    def smallest_splittable(self) -> int:
        """Nodes smaller than this cannot have two halves that both satisfy the constraint."""
        return 2 * max(self.k, self.l)

    def holds(self, sizes: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
        """Elementwise over groups: ``sizes`` (g,), ``counts`` (g, S) sensitive histograms (None if not needed)."""
        ok = sizes >= self.k
        if counts is None or not self.needs_counts:
            return ok
        if self.form == "distinct":
            return ok & ((counts > 0).sum(axis=1) >= self.l)
        return ok & (counts.max(axis=1) * self.l <= sizes)


def partition(
    X: np.ndarray,
    sensitive: np.ndarray,
    *,
    k: int = 1,
    l: int = 1,  # noqa: E741 - the papers' name
    form: str = "frequency",
    unique: bool = False,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """Mondrian strict partition of the rows of ``X``: an int64 group id (0..g-1) per row.

    ``X``: (n, d) float matrix of quasi-identifiers (numeric values and categorical leaf ranks, as
    ``encoding.encode`` makes it). ``sensitive``: (n,) sensitive values (any hashable dtype; messages name
    them). ``k``, ``l``, ``form``: the constraint of every group (module docstring). ``unique``: m-unique
    groups with m = ``k`` (Xiao-Tao Def. 17); ``l`` must then not exceed ``k`` (m-uniqueness implies
    ℓ-diversity of both forms for ℓ <= m). ``scale``: (d,) domain widths that normalise ranges when choosing
    the split attribute; default the data's range.

    Raises NotPublishable, naming the sensitive value and the counts, when the whole table violates the
    constraint (then no partition can satisfy it); otherwise always succeeds. Deterministic.
    O(n log n) per tree level.
    """
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    if X.ndim != 2 or len(sensitive) != n:
        raise ValueError(f"partition: X must be (n, d) and sensitive (n,), got {X.shape} and {len(sensitive)}")
    if form not in FORMS:
        raise ValueError(f"partition: form must be one of {FORMS}, got {form!r}")
    if k < 1 or l < 1:
        raise ValueError(f"partition: k and l must be >= 1, got k={k}, l={l}")
    if unique and l > k:
        raise ValueError(f"partition: unique=True makes groups m-unique with m=k={k}, which cannot ensure l={l}")
    codes, values = pd.factorize(np.asarray(sensitive), sort=True)
    constraint = Constraint(k, k, "frequency") if unique else Constraint(k, l, form)
    _check_publishable(codes, values, constraint, unique)
    widths = np.ptp(X, axis=0) if scale is None else np.asarray(scale, dtype=np.float64)
    scale = np.where(widths > 0, widths, 1.0)
    ranks = dense_ranks(X)[0]
    leaves = _leaves(X, scale, ranks, codes, len(values), constraint)
    if unique:
        return _m_unique_cut(X / scale, ranks, codes, len(values), leaves, k)
    return leaves


def _check_publishable(codes: np.ndarray, values, constraint: Constraint, unique: bool) -> None:
    """Raise NotPublishable when the whole table (the root region) violates ``constraint``."""
    n = len(codes)
    if n < constraint.k:
        what = f"m={constraint.k} (m-uniqueness, Xiao-Tao Def. 17)" if unique else f"k={constraint.k}"
        raise NotPublishable(f"the table has {n} rows, fewer than {what}; every group needs at least that many")
    if not constraint.needs_counts:
        return
    counts = np.bincount(codes, minlength=len(values))
    if constraint.form == "distinct" and len(values) < constraint.l:
        raise NotPublishable(
            f"the sensitive column has {len(values)} distinct value(s) {values.tolist()}, fewer than l={constraint.l} "
            f"(distinct l-diversity needs {constraint.l} different values in every group)"
        )
    top = int(counts.argmax())
    if constraint.form == "frequency" and counts[top] * constraint.l > n:
        rule = (
            f"the table is not m-eligible for m={constraint.l} (Xiao-Tao §4.1)"
            if unique
            else f"frequency l-diversity with l={constraint.l} (Shmueli-Tassa Def. 2.3) is impossible"
        )
        value = values[top].item() if isinstance(values[top], np.generic) else values[top]
        raise NotPublishable(
            f"sensitive value {value!r} is in {counts[top]} of the {n} rows, more than 1/{constraint.l} "
            f"(at most {n // constraint.l}); {rule}"
        )


def _leaves(X: np.ndarray, scale: np.ndarray, ranks: np.ndarray, codes: np.ndarray, S: int,
            constraint: Constraint) -> np.ndarray:
    """Mondrian's leaf per row (``_mondrian`` on ``X / scale``), the levels above the cut grown here and each region
    below it by ``grow_regions`` on the current backend (module docstring), reported as the step ``mondrian on
    <backend>``. The regions' leaves are numbered after the driver's, by (level, region, leaf in the region): the
    ids of the tree grown all at once. Cost: ``_mondrian``'s, plus one sort of the rows below the cut."""
    backend = current()
    with step(f"mondrian on {backend.name}"):
        tree = _mondrian(X / scale, ranks, codes, S, constraint,
                         regions=REGIONS_PER_WORKER * parallelism(backend), region_rows=REGION_ROWS)
        if not len(tree.sizes):
            return tree.groups
        region = np.empty(len(X), dtype=np.int64)
        region[tree.rows] = np.repeat(np.arange(len(tree.sizes)), tree.sizes)
        below = np.sort(tree.rows)  # the rows below the cut, in input order
        keys = region[below]
        columns = {"key": keys, "code": codes[below], **{f"x{j}": X[below, j] for j in range(X.shape[1])}}
        kernel = partial(grow_regions, scale=scale, values=S, constraint=constraint)
        labels = backend.run(kernel, columns, Seeds(0, 0))  # Mondrian draws no randomness
        groups = tree.groups
        groups[below] = tree.leaves + numbered((labels >> _LEVEL_BITS) * len(tree.sizes) + keys, labels)
        return groups


def grow_regions(columns: Mapping[str, np.ndarray], seeds: Seeds, *, scale: np.ndarray, values: int,
                 constraint: Constraint) -> np.ndarray:
    """Mondrian's subtree of every region of one batch, as a kernel of ``core.partitioned``: ``columns`` ``key``
    (the region), ``code`` (the sensitive code, below ``values``) and ``x0`` .. ``x<d-1>`` (the quasi-identifiers as
    ``partition`` takes them; ``scale`` their widths, bound with ``functools.partial``). Returns per row its leaf's
    level in the subtree shifted by ``_LEVEL_BITS``, or'ed with the leaf's id in the call (ids rise level by level,
    each level in tree order): in one region, the labels sort as the leaves of the region grown alone. The ranks
    are made again over the batch (order-preserving: the same cuts). Deterministic: ``seeds`` is not read.
    Cost: ``_mondrian``'s on the batch."""
    keys = columns["key"]
    order = np.argsort(keys, kind="stable")  # each region's rows together: the nodes of the first level
    X = np.column_stack([columns[f"x{j}"][order] for j in range(len(scale))])
    sizes = np.unique(keys[order], return_counts=True)[1]
    tree = _mondrian(X / scale, dense_ranks(X)[0], columns["code"][order], values, constraint, sizes=sizes)
    labels = np.empty(len(keys), dtype=np.int64)
    labels[order] = (tree.depth.astype(np.int64) << _LEVEL_BITS) | tree.groups
    return labels


@dataclass(frozen=True)
class _Tree:
    """What ``_mondrian`` grew.

    Attributes:
        groups: per row, its leaf 0..leaves-1 (numbered level by level, each level in tree order); -1 for a row of
            a node left unfinished.
        depth: per row of a leaf, the level of its leaf (0: the first level grown).
        leaves: how many leaves.
        rows: the rows of the unfinished nodes, in tree order.
        sizes: the rows of each unfinished node, in tree order.
    """

    groups: np.ndarray
    depth: np.ndarray
    leaves: int
    rows: np.ndarray
    sizes: np.ndarray


@dataclass(frozen=True)
class _Level:
    """The nodes of one level of the tree (``_mondrian``), each a contiguous segment of positions in tree order.

    Attributes:
        sizes: per node, its rows.
        node_of_pos: per position, its node.
        rank_of: (d, positions) each attribute's dense rank at every position; below ``ranks``.
        ranks: one more than the largest rank of any attribute.
        code_of: per position, its sensitive code; below ``values``.
        values: the number of sensitive values.
        hist: (nodes, values) sensitive histogram per node; None when the constraint needs none.
    """

    sizes: np.ndarray
    node_of_pos: np.ndarray
    rank_of: np.ndarray
    ranks: int
    code_of: np.ndarray
    values: int
    hist: np.ndarray | None


def _histograms(nodes: np.ndarray, codes: np.ndarray, count: int, S: int) -> np.ndarray:
    """(count, S) sensitive histogram per node, from the node id and sensitive code of each row."""
    return np.bincount(nodes * S + codes, minlength=count * S).reshape(count, S)


def _mondrian(Xn: np.ndarray, ranks: np.ndarray, codes: np.ndarray, S: int, constraint: Constraint,
              sizes: np.ndarray | None = None, regions: int = 0, region_rows: int = 0) -> _Tree:
    """The Mondrian tree of the rows, built level by level (module docstring): its leaves and, when it stopped at a
    cut, the nodes left unfinished.

    ``sizes``: the rows of each node of the first level, consecutive in row order (default: one node of every
    row). ``regions`` > 0: stop before a level of at least that many nodes or whose largest node is below
    ``region_rows`` rows; its nodes are left unfinished.

    The rows of the active nodes of a level are kept in tree order, each node a contiguous segment (``sizes``
    in node order); their ranks and codes are carried in that order, so that the per-level reordering, which
    only moves rows inside their segment, is a cache-friendly gather, and a node's range on an attribute is
    read from its smallest and largest rank. Each node tries its attributes widest first (``Xn`` is
    normalised); on an attribute its rows are sorted, the median value found, and the strict cut ``< median``
    or ``<= median`` (the more balanced first) taken when both sides satisfy ``constraint``. A node no
    attribute can cut is a leaf.
    """
    n, d = Xn.shape
    R = int(ranks.max()) + 1
    groups = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    rows = np.arange(n)  # original row at each position
    level = np.zeros((d, R))  # level[j, r]: the normalised value of rank r of attribute j
    level[np.arange(d), ranks] = Xn
    rank_of = np.ascontiguousarray(ranks.T)  # (d, n) in tree order
    code_of = codes.copy()
    sizes = np.array([n]) if sizes is None else np.asarray(sizes)
    next_leaf = height = 0
    while len(sizes):
        if regions and (len(sizes) >= regions or sizes.max() < region_rows):
            break
        P = len(sizes)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        node_of_pos = np.repeat(np.arange(P), sizes)
        cut = np.zeros(P, dtype=np.int64)  # left size of each node that splits; 0: a leaf
        step = np.arange(len(rows))  # new position p takes the row at old position step[p]
        splittable = sizes >= constraint.smallest_splittable
        if splittable.any():
            top = np.maximum.reduceat(rank_of, starts, axis=1)
            bottom = np.minimum.reduceat(rank_of, starts, axis=1)
            width = (np.take_along_axis(level, top, axis=1) - np.take_along_axis(level, bottom, axis=1)).T
            by_width = np.argsort(-width, axis=1, kind="stable")
            hist = _histograms(node_of_pos, code_of, P, S) if constraint.needs_counts else None
            nodes = _Level(sizes, node_of_pos, rank_of, R, code_of, S, hist)
            for t in range(d):
                dims = by_width[:, t]
                pending = splittable & (cut == 0) & (width[np.arange(P), dims] > 0)
                if not pending.any():
                    break
                _try_cuts(nodes, pending, dims, constraint, cut, step)
        leaf = cut == 0
        leaf_pos = leaf[node_of_pos]
        groups[rows[leaf_pos]] = next_leaf + np.cumsum(leaf)[node_of_pos[leaf_pos]] - 1
        depth[rows[leaf_pos]] = height
        next_leaf += int(leaf.sum())
        height += 1
        keep = step[~leaf_pos]
        rows, code_of = rows.take(keep), code_of.take(keep)
        rank_of = np.stack([r.take(keep) for r in rank_of])
        split = ~leaf
        sizes = np.stack([cut[split], sizes[split] - cut[split]], axis=1).reshape(-1)
    return _Tree(groups, depth, next_leaf, rows, sizes)


def _try_cuts(level: _Level, pending: np.ndarray, dims: np.ndarray, constraint: Constraint, cut: np.ndarray,
              step: np.ndarray) -> None:
    """Try the median cut of every ``pending`` node of ``level`` on its attribute ``dims[node]``; record those
    that work.

    Writes ``cut[node]`` (left size) and, in ``step``, the node's positions sorted on that attribute, so that
    after reordering the two children are contiguous: the left ``cut[node]`` rows, then the rest.
    """
    node_of_pos, sizes, rank_of, R = level.node_of_pos, level.sizes, level.rank_of, level.ranks
    code_of, S, hist = level.code_of, level.values, level.hist
    pos = np.flatnonzero(pending[node_of_pos])
    nodes = node_of_pos[pos]
    key = nodes * R + rank_of.take(dims.take(nodes) * rank_of.shape[1] + pos)  # rank_of[dims[nodes], pos]
    perm = np.argsort(key)
    key, moved = key.take(perm), pos.take(perm)
    ids = np.flatnonzero(pending)
    z = sizes[ids]
    local = np.repeat(np.arange(len(ids)), z)
    cs = np.concatenate(([0], np.cumsum(z)[:-1]))
    median = key[cs + (z - 1) // 2]
    below = np.searchsorted(key, median, "left") - cs  # strict cut: values < median on the left
    upto = np.searchsorted(key, median, "right") - cs  # strict cut: values <= median on the left
    first_below = np.abs(2 * below - z) <= np.abs(2 * upto - z)
    offset = np.arange(len(pos)) - cs[local]
    for left in (np.where(first_below, below, upto), np.where(first_below, upto, below)):
        if constraint.needs_counts:
            on_left = offset < left[local]
            lh = _histograms(local[on_left], code_of.take(moved[on_left]), len(ids), S)
            rh = None if hist is None else hist[ids] - lh
        else:
            lh = rh = None
        ok = (left > 0) & (left < z) & (cut[ids] == 0)
        ok &= constraint.holds(left, lh) & constraint.holds(z - left, rh)
        cut[ids[ok]] = left[ok]
        take = ok[local]
        step[pos[take]] = moved[take]


def _m_unique_cut(Xn: np.ndarray, ranks: np.ndarray, codes: np.ndarray, S: int, leaves: np.ndarray, m: int):
    """Cut every m-eligible Mondrian leaf into m-unique groups (Xiao-Tao Def. 17); group id per row.

    A leaf of n tuples becomes g = floor(n / m) groups. Its tuples are ordered by sensitive value, and within
    a value along the leaf's widest normalised attribute; position p goes to group p mod g. Why it always
    works: m-eligibility gives every value c_v <= n / m, hence c_v <= g, so a value's c_v consecutive
    positions land in c_v different groups (values pairwise distinct in a group), and n positions dealt
    round-robin into g <= n / m groups give every group floor(n / g) >= m tuples or one more.
    Locality: a value's tuples are then dealt to its c_v groups in ascending group order along the widest
    attribute, so group j holds, of every value, a tuple no further along that attribute than group j + 1
    does: the groups are ordered slices of the leaf. Deterministic; O(n log n).
    """
    n = len(leaves)
    L = int(leaves.max()) + 1
    by_leaf = np.argsort(leaves, kind="stable")
    size = np.bincount(leaves, minlength=L)
    starts = np.concatenate(([0], np.cumsum(size)[:-1]))
    Xo = Xn[by_leaf]
    widest = np.argmax(np.maximum.reduceat(Xo, starts, axis=0) - np.minimum.reduceat(Xo, starts, axis=0), axis=1)
    along = ranks[np.arange(n), widest[leaves]]
    order = np.lexsort((along, codes, leaves))  # by leaf, then value, then along the widest attribute
    g = size // m
    offset = np.arange(n) - starts[leaves[order]]
    dealt = offset % g[leaves[order]]
    run = leaves[order] * S + codes[order]
    dealt = dealt[np.lexsort((dealt, run))]  # each value's groups in ascending order, matched to its rows
    first = np.concatenate(([0], np.cumsum(g)[:-1]))
    groups = np.empty(n, dtype=np.int64)
    groups[order] = first[leaves[order]] + dealt
    return groups


def domain_widths(X: np.ndarray, spec: BoundSpec, attributes: tuple[str, ...] | None = None) -> np.ndarray:
    """Per-attribute domain width for ``partition``'s ``scale``: a numeric attribute's range in ``X``, a
    categorical attribute's number of taxonomy leaves minus one (its domain in leaf ranks)."""
    names = attributes or tuple(spec.quasi_identifiers)
    widths = np.ptp(X, axis=0) if len(X) else np.zeros(len(names))
    for j, name in enumerate(names):
        qi = spec.quasi_identifiers[name]
        if not qi.numeric:
            widths[j] = len(spec.taxonomy(name).leaves) - 1
    return widths
