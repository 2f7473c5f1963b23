"""The split phase of Xiao-Tao §4.3: balanced buckets halved recursively into QI groups of exactly s tuples, one
of each value, each cut the least perimeter sum along some QI (or, with ``relative``, Li-Zhou eq. 4's score);
``normalised`` makes its input and ``number_groups`` numbers its groups as Table 3a does.

A bucket's groups depend on its own rows only, never on the buckets split beside it (the ranks are order-preserving
and every extent is read exactly, ``_running_extent``), so the buckets can be split in batches anywhere:
``split_buckets`` is the split as a kernel of the partition seam (``core.partitioned``), one partition per bucket,
its input the ranks of ``rank_codes`` as ``split_columns`` lays them out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...encoding import dense_ranks
from ...partitioned import Seeds
from ...spec import BoundSpec
from .compiled import compiled

__all__ = ["normalised", "number_groups", "rank_codes", "split", "split_buckets", "split_columns"]


@dataclass(frozen=True)
class Ranks:
    """What every cut reads of the QI values, made once a split.

    Attributes:
        dtype: the type of a tuple's per-QI rank codes (``rank_codes``).
        table: (d, K + 2) values by rank (``rank_codes``; a counterfeit never counts in a minimum or a maximum).
    """

    dtype: np.dtype
    table: np.ndarray


@dataclass(frozen=True)
class Level:
    """The nodes of one level of the recursion, as every permutation lays them out: node i holds ``s[i]`` values
    of ``c[i]`` tuples each (an s x c block of positions from ``start[i]``), nodes in non-decreasing ``s``.

    Attributes:
        s: per node, its signature size.
        c: per node, its tuples per value (columns).
        start: per node, its first position.
        node: per position, its node.
    """

    s: np.ndarray
    c: np.ndarray
    start: np.ndarray
    node: np.ndarray

    @classmethod
    def of(cls, s: np.ndarray, c: np.ndarray) -> Level:
        """The level of nodes with signature sizes ``s`` and columns ``c``, laid out one after the other."""
        sizes = s * c
        return cls(s, c, np.concatenate(([0], np.cumsum(sizes)[:-1])), np.repeat(np.arange(len(sizes)), sizes))


@dataclass(frozen=True)
class Cuts:
    """The cut of every node of a level (``_best_cuts``).

    Attributes:
        attr: per node, the QI it is cut along.
        col: per node, the columns k (1 <= k < c) of its left half.
        position_col: per position of a permutation, its column (its rank within its value's list along the
            permutation's QI).
    """

    attr: np.ndarray
    col: np.ndarray
    position_col: np.ndarray


def normalised(X: np.ndarray, spec: BoundSpec, widths: np.ndarray, counterfeits: int = 0) -> np.ndarray:
    """QI matrix mapped to [0, 1] per attribute (§4.3 normalises every domain so that lengths compare): a
    numeric value by the snapshot's range, a categorical leaf rank by the taxonomy's (``widths`` from
    ``kernels.partition.domain_widths``); then ``counterfeits`` rows of NaN (a counterfeit has no QI values), the input
    ``split`` takes. One (n + counterfeits, d) float64 allocation, computed in place: O(n d) time, no temporary
    the size of ``X``."""
    numeric = np.array([q.numeric for q in spec.quasi_identifiers.values()])
    low = np.where(numeric, X.min(axis=0), 0.0)
    out = np.empty((len(X) + counterfeits, X.shape[1]), dtype=np.float64)
    np.subtract(X, low, out=out[: len(X)])
    out[: len(X)] /= np.where(widths > 0, widths, 1.0)
    out[len(X):] = np.nan
    return out


def split(X: np.ndarray, values: np.ndarray, buckets: np.ndarray, relative: bool = False) -> np.ndarray:
    """The split phase (§4.3): QI groups of exactly s tuples, one of each value, from balanced buckets.

    ``X``: (n, d) QI values normalised to [0, 1] (the perimeters of §4.3 compare normalised lengths); a row of
    NaN is a counterfeit (no QI values: sorted first, ignored by every extent). ``values``: sensitive code per
    row; ``buckets``: bucket per row, each bucket balanced (every value it holds has the same count c).
    Returns a group id 0..g-1 per row.

    A bucket of c tuples per value is halved into buckets of k and c - k per value, the cut ``k`` and the QI
    ``i`` chosen among all ``d·(c - 1)`` cuts of the per-value lists sorted along ``i`` for the least perimeter
    sum |B1|·Σ l(B1) + |B2|·Σ l(B2), until c = 1. Per QI the rows are kept in one permutation (by bucket,
    value, then that QI) where every node is an s x c block; a node's cut reads its columns' extremes and their
    running extremes from each end, and its halves are a stable partition of its block in every permutation
    (``_split_levels``, compiled, node by node; its numpy reference cuts every node of a level together). The
    extremes are taken on each tuple's dense ranks (``rank_codes``: one byte per QI on Census-KDD), and every
    permutation carries its tuples' ranks in its own order, moved by the same stable partition (sequential
    writes) instead of gathered at random every level (a cache miss per tuple at 10M rows). The d permutations
    are sorted on a thread per core (numpy releases the GIL); the result does not depend on the threads.
    O(n·d²) per level.

    Memory (10M rows, 7 QIs): ``X`` is freed once ranked (pass it as an expression), the permutations are int32
    below 2^31 rows and cut in place: O(n·d²) bytes of ranks (each permutation's) plus 4·n·d of permutations,
    and O(n) beside them.

    ``relative``: measure each half's extent l along a QI relative to the node's own extent I on that QI
    (Li-Zhou eq. 4, split_score = Σ |B_i|·Σ_j l_ij / I_j) instead of relative to the domain (§4.3, the default);
    a QI on which the node is flat counts 0.
    """
    codes, table = rank_codes(X)
    del X  # the ranks are all the split reads (the caller passes X as an expression, so this frees it)
    return split_ranked(codes, table, values, buckets, relative)


def split_columns(codes: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """``split_buckets``' input columns: ``value``, the sensitive code of each row, and ``rank0`` .. ``rank<d-1>``,
    the columns of ``codes`` (``rank_codes``; views, no copy)."""
    return {"value": values, **{f"rank{j}": codes[:, j] for j in range(codes.shape[1])}}


def split_buckets(columns: Mapping[str, np.ndarray], seeds: Seeds, *, table: np.ndarray,
                  relative: bool = False) -> np.ndarray:
    """The split (§4.3) of the buckets of one batch, as a kernel of ``core.partitioned``: ``columns`` as
    ``split_columns`` makes them plus ``key``, the bucket of each row; ``table`` (bind it with
    ``functools.partial``) the values by rank of ``rank_codes`` over all the buckets. Returns a group label per
    row; a bucket's labels depend on its rows alone (module docstring). Deterministic: ``seeds`` is not read.
    Cost: one (rows, d) copy of the ranks, then ``split``'s."""
    codes = np.column_stack([columns[f"rank{j}"] for j in range(table.shape[0])])
    return split_ranked(codes, table, columns["value"], columns["key"], relative)


def split_ranked(codes: np.ndarray, table: np.ndarray, values: np.ndarray, buckets: np.ndarray,
                 relative: bool = False) -> np.ndarray:
    """``split`` on the ranks of its ``X`` (``codes`` and ``table`` from ``rank_codes``): a group id 0..g-1 per
    row. The d permutations (by bucket, value, then one QI's rank) are sorted on a thread per core, each with its
    tuples' ranks in its order; the levels of the recursion are ``_split_levels`` (compiled)."""
    n, d = codes.shape
    index = np.int32 if n < 2**31 else np.int64  # positions: half the memory of int64 below 2^31 rows
    _, bucket = np.unique(buckets, return_inverse=True)
    bucket = bucket.reshape(-1)
    B = int(bucket.max()) + 1 if n else 0
    S = int(values.max()) + 1 if n else 1
    size = np.bincount(bucket, minlength=B)
    node_s = np.bincount(np.unique(bucket * S + values) // S, minlength=B)
    # buckets in order of signature size: a cut keeps a node's halves in its place, so the nodes of every
    # level stay sorted by s (``_best_cuts`` reduces each run of equal s as one block)
    by_s = np.argsort(node_s, kind="stable")
    relabel = np.empty(B, dtype=np.int64)
    relabel[by_s] = np.arange(B)
    bucket, node_s = relabel[bucket], node_s[by_s]
    node_c = size[by_s] // node_s
    keys = bucket * S + values  # (bucket, value): a uint16 when it fits (``_sorted_by`` radix-sorts it)
    del bucket
    if keys.max(initial=0) < 2**16 and codes.dtype.itemsize <= 2:
        keys = keys.astype(np.uint16)
    else:
        keys *= table.shape[1]  # past every code (at most K, ``rank_codes``)
    perms = np.empty((d, n), dtype=index)
    rows = np.empty((d, n, d), dtype=codes.dtype)
    with ThreadPoolExecutor(max_workers=max(1, min(d, os.cpu_count() or 1))) as pool:
        list(pool.map(partial(_sorted_by, keys, codes, perms, rows), range(d)))
    del keys, codes  # every permutation carries its own ranks from here on
    groups = np.empty(n, dtype=np.int64)
    _split_levels(perms, rows, table, node_s.astype(np.int64), node_c.astype(np.int64), relative, groups)
    return groups


def _split_levels_numpy(perms: np.ndarray, rows: np.ndarray, table: np.ndarray, node_s: np.ndarray,
                        node_c: np.ndarray, relative: bool, groups: np.ndarray) -> None:
    """The reference of ``_split_levels``: all the nodes of a level cut together, the d permutations on a thread
    per core (numpy releases the GIL): the column extremes of all nodes with the same s are one reduction over an
    (s, columns) block, the prefix and suffix extents of every cut are segmented running max/min
    (``_running_extent``), and the halves are a stable partition of every permutation (``_cut``). ``perms`` and
    ``rows`` are read, not changed."""
    d = len(perms)
    item = np.dtype((np.void, rows.dtype.itemsize * d))
    perm_list = list(perms)
    row_list = [r.view(item).reshape(-1) for r in rows]  # a tuple's d ranks as one item
    ranks = Ranks(rows.dtype, table)
    left = np.empty(len(groups), dtype=bool)
    next_group = 0
    with ThreadPoolExecutor(max_workers=max(1, min(d, os.cpu_count() or 1))) as pool:
        while len(node_c):
            level = Level.of(node_s, node_c)
            done = node_c == 1
            if done.any():
                at = done[level.node]
                groups[perm_list[0][at]] = next_group + np.cumsum(done)[level.node[at]] - 1
                next_group += int(done.sum())
                kept = ~at
                _in_place(pool, lambda p, r, kept=kept: (p[kept], r[kept]), perm_list, row_list)
                node_s, node_c = node_s[~done], node_c[~done]
                continue
            cuts = _best_cuts(pool, row_list, ranks, level, relative)
            _cut(pool, perm_list, row_list, level, cuts, left)
            node_c = np.stack([cuts.col, node_c - cuts.col], axis=1).reshape(-1)
            node_s = np.repeat(node_s, 2)


@compiled(_split_levels_numpy)
def _split_levels(perms: np.ndarray, rows: np.ndarray, table: np.ndarray, node_s: np.ndarray,
                  node_c: np.ndarray, relative: bool, groups: np.ndarray) -> None:
    """The recursion of ``split`` (§4.3) from its first level, node by node in the order of its numpy reference
    (a queue: each level's nodes in turn, a node's halves in its place), so that ``groups`` gets the same ids.

    Args:
        perms: (d, n) per QI the tuples, by bucket, value, then that QI's rank; bucket b is the block of
            ``node_s[b] * node_c[b]`` positions after the earlier buckets', value by value. Changed in place.
        rows: (d, n, d) the ranks (``rank_codes``) of every permutation's tuples, in its order. Changed in place.
        table: (d, K + 2) the values by rank (``rank_codes``).
        node_s: per bucket, its signature size s, non-decreasing.
        node_c: per bucket, its tuples per value c.
        relative: extents over the node's own extent per QI (``split``).
        groups: (n,) filled with each tuple's group.

    A node of c >= 2 columns is cut at the QI and column of the least perimeter sum: per permutation, its
    columns' lowest and highest rank per QI, their running extremes from each end, the extents read from
    ``table`` and summed over the QIs in QI order, the same floats as ``_best_cuts``; ties go to the first QI,
    then among costs within 1e-9 (relative) of the least to the most even cut, then the first. Its tuples move
    to their half by a stable partition of every permutation. O(s·c·d²) a node, O(n·d²) a level; memory
    O(n) beside the inputs.
    """
    d = perms.shape[0]
    n = perms.shape[1]
    K = table.shape[1] - 2
    total = 0
    widest, block = 1, 1
    for b in range(len(node_c)):
        total += node_c[b]
        widest = max(widest, node_c[b])
        block = max(block, node_s[b] * node_c[b])
    # the queue: every node in it has a column of its own, so it never holds more than all the columns
    q_s = np.empty(total + 1, dtype=np.int64)
    q_at = np.empty(total + 1, dtype=np.int64)
    q_c = np.empty(total + 1, dtype=np.int64)
    head, tail, at = 0, 0, 0
    for b in range(len(node_c)):
        q_s[tail], q_at[tail], q_c[tail] = node_s[b], at, node_c[b]
        tail += 1
        at += node_s[b] * node_c[b]
    lowest_code = np.empty((widest, d), dtype=np.int64)
    highest_code = np.empty((widest, d), dtype=np.int64)
    ahead, behind = np.empty(widest), np.empty(widest)
    prefix, suffix = np.empty(widest), np.empty(widest)
    best_cost, best_attr = np.empty(widest), np.empty(widest, dtype=np.int64)
    left = np.zeros(n, dtype=np.bool_)
    moved = np.empty(block, dtype=perms.dtype)
    moved_rows = np.empty((block, d), dtype=rows.dtype)
    next_group = 0
    size = total + 1
    while head != tail:
        s, a, c = q_s[head], q_at[head], q_c[head]
        head = (head + 1) % size
        if c == 1:
            for p in range(a, a + s):
                groups[perms[0, p]] = next_group
            next_group += 1
            continue
        best_cost[:c] = np.inf
        best_attr[:c] = 0
        for i in range(d):
            ranks = rows[i]
            for t in range(c):  # each column's lowest and highest rank index per QI (K and -1: none)
                for j in range(d):
                    low, high = K, -1
                    for r in range(s):
                        code = np.int64(ranks[a + r * c + t, j]) - 1  # -1: a counterfeit, in neither extreme
                        high = max(high, code)
                        low = min(low, code if code >= 0 else K)
                    lowest_code[t, j], highest_code[t, j] = low, high
            prefix[:c] = 0.0
            suffix[:c] = 0.0
            for j in range(d):
                top, bottom = -1, K
                for t in range(c):
                    top = max(top, highest_code[t, j])
                    bottom = min(bottom, lowest_code[t, j])
                    x = table[j, top if top >= 0 else K + 1] - table[j, bottom]
                    ahead[t] = x if x > 0.0 else 0.0
                top, bottom = -1, K
                for t in range(c - 1, -1, -1):
                    top = max(top, highest_code[t, j])
                    bottom = min(bottom, lowest_code[t, j])
                    x = table[j, top if top >= 0 else K + 1] - table[j, bottom]
                    behind[t] = x if x > 0.0 else 0.0
                if relative:  # the node's extent on this QI is the prefix extent at its last column
                    full = ahead[c - 1] if ahead[c - 1] > 0 else np.inf
                    for t in range(c):
                        ahead[t] = ahead[t] / full
                        behind[t] = behind[t] / full
                for t in range(c):
                    prefix[t] += ahead[t]
                    suffix[t] += behind[t]
            for k in range(1, c):
                cost = np.float64(s) * (np.float64(k) * prefix[k - 1] + (np.float64(c) - np.float64(k)) * suffix[k])
                if cost < best_cost[k]:
                    best_cost[k], best_attr[k] = cost, i
        lowest = np.inf
        for k in range(1, c):
            lowest = min(lowest, best_cost[k])
        cut, even = 0, 2 * c + 1
        for k in range(1, c):
            if best_cost[k] <= lowest + 1e-9 * (1.0 + lowest) and abs(2 * k - c) < even:
                cut, even = k, abs(2 * k - c)
        attr = best_attr[cut]
        for r in range(s):
            for t in range(c):
                left[perms[attr, a + r * c + t]] = t < cut
        for i in range(d):  # stable partition of the node's block: its left half first
            perm, ranks = perms[i], rows[i]
            to_left, to_right = 0, s * cut
            for p in range(a, a + s * c):
                if left[perm[p]]:
                    to = to_left
                    to_left += 1
                else:
                    to = to_right
                    to_right += 1
                moved[to] = perm[p]
                for j in range(d):
                    moved_rows[to, j] = ranks[p, j]
            for p in range(s * c):
                perm[a + p] = moved[p]
                for j in range(d):
                    ranks[a + p, j] = moved_rows[p, j]
        q_s[tail], q_at[tail], q_c[tail] = s, a, cut
        tail = (tail + 1) % size
        q_s[tail], q_at[tail], q_c[tail] = s, a + s * cut, c - cut
        tail = (tail + 1) % size


def _sorted_by(keys: np.ndarray, codes: np.ndarray, perms: np.ndarray, rows: np.ndarray, i: int) -> None:
    """``perms[i]``: the positions sorted by ``keys`` (bucket and value), then QI ``i``'s rank (a counterfeit's code
    0 first), then position; ``rows[i]``: their ranks in that order. ``keys`` as uint16: two stable radix sorts,
    by the rank then by the key, O(n); else the keys scaled past every rank, one stable argsort of their sum with
    the ranks, O(n log n). Then one gather of the (n, d) ranks."""
    if keys.dtype == np.uint16:
        by_rank = np.argsort(codes[:, i], kind="stable")
        perms[i] = by_rank[np.argsort(keys[by_rank], kind="stable")]
    else:
        perms[i] = np.argsort(keys + codes[:, i], kind="stable")
    np.take(codes, perms[i], axis=0, out=rows[i])


def rank_codes(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per QI the dense rank of every value, plus one, and 0 for a counterfeit (NaN), as an (n, d) array of the
    smallest unsigned type holding the largest code; and the (d, K + 2) table of each QI's values by rank (K the
    most values of a QI), read flat by ``_best_cuts``: a row's entries K and K + 1 are 2 and -1, what a column of
    counterfeits only reads as its minimum (rank K) and maximum (rank -1, the previous row's last entry or the
    last of all). Code 0 minus one wraps to the type's maximum, beyond every rank, so a counterfeit counts in
    neither the minimum of ``code - 1`` nor the maximum of ``code``. The ranks are ``encoding.dense_ranks``'."""
    ranks, values = dense_ranks(X)
    K = max((len(v) for v in values), default=0)
    codes = (ranks + 1).astype(np.min_scalar_type(K))
    table = np.zeros((X.shape[1], K + 2))
    table[:, K], table[:, K + 1] = 2.0, -1.0
    for i, v in enumerate(values):
        table[i, : len(v)] = v
    return codes, table


def _best_cuts(pool: Executor, rows: list[np.ndarray], ranks: Ranks, level: Level, relative: bool = False) -> Cuts:
    """Per node of ``level``, the QI and the column k (1 <= k < c) of the least-perimeter cut (§4.3).

    Args:
        pool: runs the permutations' costs.
        rows: per permutation its tuples' QI ranks in its order, one void item of d ranks of ``ranks.dtype``.
        ranks: the values by rank and by a column's extreme codes.
        level: the nodes, in non-decreasing ``s``.
        relative: extents over the node's own extent per QI (``split``).

    Returns:
        The cut of every node, and the column of every position.
    """
    node_s, node_c, start, pos_node = level.s, level.c, level.start, level.node
    dtype, table = ranks.dtype, ranks.table
    N = len(node_c)
    local = np.arange(len(pos_node)) - start[pos_node]
    row, col = np.divmod(local, node_c[pos_node])
    col_start = np.concatenate(([0], np.cumsum(node_c)[:-1]))
    cnode = np.repeat(np.arange(N), node_c)
    kcol = np.arange(len(cnode)) - col_start[cnode]
    # runs of nodes with the same s; a run is laid out as an (s, its columns) block, so the extremes of all its
    # columns are one reduction over the s rows
    first = np.flatnonzero(np.diff(node_s, prepend=-1))
    run_node = np.repeat(np.arange(len(first)), np.diff(np.append(first, N)))
    run_cols = np.add.reduceat(node_c, first)
    run_col0, run_start = col_start[first], start[first]
    r = run_node[pos_node]
    layout = np.empty(len(pos_node), dtype=np.int64)
    layout[run_start[r] + row * run_cols[r] + col_start[pos_node] - run_col0[r] + col] = np.arange(len(pos_node))
    runs = list(zip(run_start.tolist(), node_s[first].tolist(), run_col0.tolist(), run_cols.tolist(), strict=True))
    c_k, s_k = node_c[cnode].astype(np.float64), node_s[cnode].astype(np.float64)
    valid = kcol >= 1
    best_cost = np.full(len(cnode), np.inf)
    best_attr = np.zeros(len(cnode), dtype=np.int64)
    d, K = table.shape[0], table.shape[1] - 2
    # ``_running_extent``'s node offsets, once a level: node i's rank indices shifted past every earlier node's
    forward, backward = cnode * (K + 2), (N - 1 - cnode)[::-1] * (K + 2)

    def cost_of(ranks: np.ndarray) -> np.ndarray:
        """The perimeter sum of every cut along this permutation's QI."""
        gathered = ranks[layout].view(dtype).reshape(-1, d)
        cmin, cmax = np.empty((len(cnode), d), dtype=dtype), np.empty((len(cnode), d), dtype=dtype)
        for at, s, c0, cols in runs:
            block = gathered[at : at + s * cols].reshape(s, cols, d)
            np.minimum.reduce(block - 1, axis=0, out=cmin[c0 : c0 + cols])
            np.maximum.reduce(block, axis=0, out=cmax[c0 : c0 + cols])
        # per QI (one row of extents at a time: the temporaries are one number per column, not d), the index in
        # ``table[j]`` of the lowest and the highest value of every column (a column of counterfeits only: K and
        # -1, which read 2 and -1), then the extents of every prefix and suffix of columns, summed over the QIs in
        # QI order (as a sum over axis 0 adds its rows)
        prefix, suffix = np.zeros(len(cnode)), np.zeros(len(cnode))
        for j in range(d):
            low = np.minimum(cmin[:, j], K).astype(np.int64)
            high = cmax[:, j].astype(np.int64)
            high -= 1
            ahead = _running_extent(table[j], low, high, forward)
            behind = _running_extent(table[j], low[::-1], high[::-1], backward)[::-1]
            if relative:  # the node's extent on this QI is the prefix extent at its last column
                full = ahead[col_start + node_c - 1][cnode]
                full = np.where(full > 0, full, np.inf)
                ahead, behind = ahead / full, behind / full
            prefix += ahead
            suffix += behind
        before = np.concatenate(([0.0], prefix[:-1]))  # extent of columns 0..k-1, at column k
        return s_k * (kcol * before + (c_k - kcol) * suffix)

    for i, cost in enumerate(pool.map(cost_of, rows)):
        better = valid & (cost < best_cost)
        best_cost[better], best_attr[better] = cost[better], i
    # least cost; among equal costs (up to rounding) the most balanced cut, so that ties (e.g. a node of
    # identical tuples) halve the node instead of peeling one group off, and the recursion stays O(log c) deep
    lowest = np.minimum.reduceat(best_cost, col_start)[cnode]
    tie = best_cost <= lowest + 1e-9 * (1.0 + lowest)
    imbalance = np.where(tie, np.abs(2 * kcol - node_c[cnode]), np.iinfo(np.int64).max)
    hits = np.flatnonzero(imbalance == np.minimum.reduceat(imbalance, col_start)[cnode])
    first_hit = hits[np.unique(cnode[hits], return_index=True)[1]]
    return Cuts(best_attr[first_hit], kcol[first_hit], col)


def _running_extent(values: np.ndarray, low: np.ndarray, high: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Extent of columns 0..k of each node, at column k (segmented running min/max of one QI's column extremes).

    ``values``: the QI's values by rank index (a row of ``rank_codes``' table: index K reads 2 and -1 reads -1,
    what a column of counterfeits only has as its minimum and maximum; a negative extent is clipped to 0).
    ``low``/``high``: (columns,) int64 index of each column's lowest and highest value. ``offset``: each column's
    node index times K + 2 (``_best_cuts`` computes it once a level), which lifts every node's indices above all
    earlier nodes', so one running maximum restarts at every node. The running extremes are taken on the integer
    indices, exactly, and the values read after: a node's extents are the same floats wherever it sits in the
    level (float offsets would round a value by the ulp of its node's offset, so a bucket's cuts could depend on
    the buckets split beside it, which ``core.partitioned`` forbids). Two running maxima (``np.maximum.accumulate``,
    sequential, the reference split's dominant cost), two gathers from the K + 2 values and a few element-wise
    operations: O(columns)."""
    top = high + offset
    np.maximum.accumulate(top, out=top)
    top -= offset
    bottom = offset - low
    np.maximum.accumulate(bottom, out=bottom)
    np.subtract(offset, bottom, out=bottom)
    extent = values.take(top)
    extent -= values.take(bottom)
    return np.maximum(extent, 0.0, out=extent)


def _cut(pool: Executor, perms: list[np.ndarray], rows: list[np.ndarray], level: Level, cuts: Cuts,
         left: np.ndarray) -> None:
    """Cut every node of ``level`` in two, in place: its first ``cuts.col`` columns along QI ``cuts.attr``, and
    the rest. Every permutation and its ``rows`` then hold each node's left half, then its right half, each still
    sorted by value then QI.

    Args:
        pool: moves the permutations.
        perms: per QI, the positions' tuples; replaced in the list.
        rows: per permutation, its tuples' ranks in its order; replaced in the list.
        level: the nodes.
        cuts: their cuts (``_best_cuts``).
        left: a bool buffer, one entry per tuple.
    """
    node_s, node_c, start, pos_node = level.s, level.c, level.start, level.node
    cut_col = cuts.col
    n = len(pos_node)
    attr, inside = cuts.attr[pos_node], cuts.position_col < cut_col[pos_node]
    for i, perm in enumerate(perms):
        mine = attr == i
        left[perm[mine]] = inside[mine]
    base = start[pos_node]
    left_size = cut_col * node_s
    # every left tuple of an earlier node precedes this node in every permutation
    lefts_before = np.repeat(np.cumsum(left_size) - left_size, node_s * node_c)
    to_left = base - lefts_before
    to_right = left_size[pos_node] + np.arange(n) + lefts_before

    def move(perm: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = left[perm]
        before = np.cumsum(f) - f  # left tuples before this position
        to = np.where(f, to_left + before, to_right - before)
        placed, placed_ranks = np.empty_like(perm), np.empty_like(ranks)
        placed[to], placed_ranks[to] = perm, ranks
        return placed, placed_ranks

    _in_place(pool, move, perms, rows)


def _in_place(pool: Executor, step: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
              perms: list[np.ndarray], rows: list[np.ndarray]) -> None:
    """Replace every permutation and its ``rows`` by ``step(perm, ranks) -> (perm, ranks)``, in the lists
    themselves, one permutation per task on ``pool``'s threads. Each old pair is dropped as soon as its
    replacement exists, so the peak is the arrays plus one new pair per thread, not twice the arrays (10M rows,
    7 QIs: about 0.8 GB less)."""

    def run(i: int) -> None:
        perms[i], rows[i] = step(perms[i], rows[i])

    list(pool.map(run, range(len(perms))))


def number_groups(X: np.ndarray, groups: np.ndarray, fake_groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber groups 1..g in lexicographic order of their lower corners (genuine tuples; Table 3a's ids), groups
    with the same corner in the order of their first row: the ids depend on the grouping only, not on how
    ``groups`` numbered it (whichever backend split the buckets, ``core.partitioned``).

    ``groups``: a group 0..g-1 per row of ``X`` (every group holds a row), ``fake_groups``: per counterfeit.
    One stable sort of the groups, then each QI's group minima one column at a time (no copy of ``X``):
    O(n log n + n d), the extra memory O(n + g d)."""
    order = np.argsort(groups, kind="stable")
    g = int(groups.max()) + 1
    starts = np.searchsorted(groups[order], np.arange(g))
    corner = np.empty((g, X.shape[1]), dtype=X.dtype)
    for i in range(X.shape[1]):
        corner[:, i] = np.minimum.reduceat(X[order, i], starts)
    rank = np.empty(g, dtype=np.int64)
    rank[np.lexsort((order[starts], *corner.T[::-1]))] = np.arange(1, g + 1)  # the last key sorts first
    return rank[groups], rank[fake_groups]
