"""The cut search of m-Distinct's split (Li-Zhou §V-C, eq. 4) for buckets whose entries overlap: for each node, the
records of every entry sorted along one QI, the first k of every entry to one child, keeping the cuts whose children
stay balanced and m-eligible, and the least split score of eq. 4 over all QIs and k (ties: the most even cut).
The nodes of a level are cut in batches padded to one δ (``level_cuts``); each node gets the cut it would get alone.
"""

from __future__ import annotations

import numpy as np

from ...encoding import dense_ranks

#: ``split.split_overlapping`` cuts a node by eq. 4 while it has more than this many records per entry, then
#: decomposes it.
LEAF = 8

#: ``level_cuts`` batches nodes of one entry count whose δ share a power of two, at most this many slots at once.
BATCH_SLOTS = 1 << 18


def level_cuts(X, entry, value, nodes, V, ranks=None):
    """The cut of every node of one level of ``split_overlapping`` (``nodes``: (entry count s, row ids) each), None
    for a node of at most ``LEAF`` records per entry or with no valid cut. Nodes of one s whose δ lie in one
    interval (2^k, 2^(k+1)] are cut together by ``_best_overlapping_cuts``, padded to the largest δ, in batches of
    at most ``BATCH_SLOTS`` (row, QI) slots: O(log δ) batches per entry count instead of one per node size.
    ``ranks``: ``sort_ranks`` of ``X`` and the pad row, made once per ``split_overlapping``."""
    cuts: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(nodes)
    classes: dict[tuple[int, int], list[int]] = {}
    for i, (s, node) in enumerate(nodes):
        delta = len(node) // s
        if delta > LEAF:
            classes.setdefault((s, (delta - 1).bit_length()), []).append(i)
    d = X.shape[1]
    Xa = np.vstack([X, np.full((1, d), np.nan)])  # row len(X): the pad (NaN QIs, no value)
    va = np.r_[value, -1]
    columns = np.ascontiguousarray(Xa.T)  # (d, n + 1): QI q of every row, contiguous
    for (s, k), members in classes.items():
        per_batch = max(1, BATCH_SLOTS // (s * (1 << k) * max(d, 1) * max(d, 1)))
        for at in range(0, len(members), per_batch):
            batch = members[at:at + per_batch]
            for i, cut in zip(batch, _best_overlapping_cuts(Xa, entry, va, [nodes[i][1] for i in batch], s, V,
                                                                 ranks, columns),
                              strict=True):
                cuts[i] = cut
    return cuts


#: ``_best_overlapping_cuts`` sorts small-integer ranks (a radix sort) from this δ_max on; below, the float keys
#: (an insertion sort of a few elements is faster than a radix pass).
RADIX_FROM = 16


def sort_ranks(Xa: np.ndarray) -> np.ndarray | None:
    """Per QI, each row's rank among the sort keys of ``_best_overlapping_cuts`` (NaN as -inf, ties equal), the
    last row (the pad) one past every other, as the smallest unsigned type that holds them; None when a QI has
    more than 65,534 distinct keys (the float keys are sorted instead). A stable sort of these ranks is the
    permutation of a stable sort of the keys, and numpy sorts 8- and 16-bit keys by radix (``encoding.dense_ranks``
    of the keys). O(n·d log n), once per ``split_overlapping``."""
    ranks, values = dense_ranks(np.nan_to_num(Xa[:-1], nan=-np.inf, posinf=np.inf))
    top = max((len(v) for v in values), default=0)
    if top >= np.iinfo(np.uint16).max:
        return None
    out = np.empty(Xa.shape, dtype=np.uint8 if top < np.iinfo(np.uint8).max else np.uint16)
    out[:-1] = ranks
    out[-1] = [len(v) for v in values]  # the pad sorts after every row (after +inf too: pads follow the rows)
    return out


def _crowded_cuts(at: np.ndarray, deltas: np.ndarray, V: int) -> np.ndarray:
    """(N, d, D-1) bool: cut k = 1..D-1 of node i along QI q leaves some value more than k times in the left child
    (ranks < k of every entry) or more than δ_i - k times in the right one (read for k < δ_i only). ``at``: (N, d, s, D) the value at each
    rank of each entry (-1: none). Without a (cut, value) table: sorted by rank, the j-th occurrence (1-based) of a
    value, at rank r, crowds the left child exactly for k in [r + 1, j - 1] (then the left holds >= j > k of
    them), and the j'-th from the top crowds the right one for k in [δ_i - j' + 1, r]; the intervals are summed
    in a difference array. The occurrences are read in (node, QI, rank) order and sorted by (node, QI, value) with
    a stable sort, by radix while (node, QI, value) fits in 16 bits. O(n·d) for the n rows (O(n·d log n) past 16
    bits), not O(n·d·V / s)."""
    N, d, s, D = at.shape
    flat = at.transpose(0, 1, 3, 2).reshape(-1)  # (node, QI, rank, entry) order: ranks ascend within a (node, QI)
    where = np.flatnonzero(flat >= 0)
    block, rank = np.divmod(where // s, D)  # block: node * d + QI
    group = block * V + flat[where]
    key = group.astype(np.uint16) if N * d * V <= np.iinfo(np.uint16).max else group
    order = np.argsort(key, kind="stable")  # by (node, QI, value), then rank (then entry: the same rank)
    block, rank, group = block[order], rank[order], group[order]
    start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    size = np.diff(np.r_[start, len(group)])
    j = np.arange(len(group)) - np.repeat(start, size) + 1
    top = np.repeat(size, size) - j + 1
    lo = np.maximum(np.concatenate([rank + 1, deltas[block // d] - top + 1]), 1)  # cuts are k = 1..D-1
    hi = np.minimum(np.concatenate([j - 1, rank]), D - 1)
    keep = lo <= hi
    row = np.concatenate([block, block])[keep]
    marks = np.bincount(row * (D + 1) + lo[keep], minlength=N * d * (D + 1))
    marks -= np.bincount(row * (D + 1) + hi[keep] + 1, minlength=N * d * (D + 1))
    return (np.cumsum(marks.reshape(N, d, D + 1), axis=2) > 0)[:, :, 1:D]


def _sum_extents(parts: np.ndarray) -> np.ndarray:
    """Eq. 4's sum of a half's normalised extents over the QIs: ``parts`` (d, ...) summed over its first axis, as
    numpy sums a contiguous row of d values: one after another for d < 8, pairwise (on a copy laid out by rows)
    otherwise, so that the scores are the same floats either way. O(size of parts)."""
    if len(parts) >= 8:
        return np.ascontiguousarray(np.moveaxis(parts, 0, -1)).sum(axis=-1)
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def _best_overlapping_cuts(Xa, entry, va, nodes, s, V, ranks=None, columns=None):
    """For each node (row ids, s entries of δ_i rows each), the (left rows, right rows) of the least eq. 4 score
    among the valid cuts of ``split_overlapping``, or None. ``Xa``, ``va``: the QIs and values of the rows, then of
    the pad row (NaN, -1); ``va`` -1 marks an open counterfeit, which counts in no value. The nodes are padded to the largest δ with a row of no value and NaN QIs, sorted last along every
    QI, and every cut at or past a node's own δ is invalid; so each node's cut is the one it gets alone. ``ranks``
    (``sort_ranks(Xa)``, optional): the same order as small integers, sorted by radix where δ_max >= ``RADIX_FROM``
    (the same permutation: a stable sort of order-equivalent keys). ``columns`` (optional): ``Xa.T`` contiguous,
    made once per level by ``level_cuts``. The QI extents are gathered QI by QI, (d, N, d, δ_max), so that the
    running extremes run along contiguous ranks; eq. 4's sum over the d extents adds them in numpy's order for a
    row of d < 8 (one after another), else on the row layout as numpy's pairwise sum. All nodes and QIs at once:
    O(N·δ_max·s·d² + N·d·δ_max·V) numpy work for N nodes."""
    N, d, n = len(nodes), Xa.shape[1], len(Xa) - 1
    columns = np.ascontiguousarray(Xa.T) if columns is None else columns
    deltas = np.array([len(node) // s for node in nodes], dtype=np.int64)
    D = int(deltas.max())
    ks = np.arange(1, D)
    flat = np.concatenate(nodes)
    owner = np.repeat(np.arange(N), deltas * s)
    key = owner * s + entry[flat]  # stable: each node's rows by entry, in the node's order (radix for 16 bits)
    order = np.argsort(key.astype(np.uint16) if N * s <= np.iinfo(np.uint16).max else key, kind="stable")
    flat, owner = flat[order], owner[order]
    ent = entry[flat]
    pos = np.arange(len(flat)) - (np.cumsum(deltas * s) - deltas * s)[owner] - ent * deltas[owner]
    slots = np.full((N, s, D), n, dtype=np.int64)  # pad: the row n of Xa (NaN QIs, no value)
    slots[owner, ent, pos] = flat
    pad = slots == n
    R = np.empty((N, d, s, D), dtype=np.int64)
    for q in range(d):  # along QI q within each entry: open counterfeits (NaN) first, pads last, ties stable
        if ranks is not None and D >= RADIX_FROM:
            key = ranks[:, q][slots]
        else:
            key = np.where(pad, np.inf, np.nan_to_num(columns[q][slots], nan=-np.inf, posinf=np.inf))
        R[:, q] = np.take_along_axis(slots, np.argsort(key, axis=2, kind="stable"), axis=2)
    own = deltas[:, None, None]
    valid = ~_crowded_cuts(va[R], deltas, V) & (ks < own)
    # (d, N, d, D): QI q' of each rank's extreme over the entries (sorted along QI q), one entry at a time (the
    # order of fmax.reduce over them); a half's extreme is then the running extreme over the ranks
    high = columns[:, R[:, :, 0]]
    low = high.copy()
    for e in range(1, s):
        at = columns[:, R[:, :, e]]
        np.fmax(high, at, out=high)
        np.fmin(low, at, out=low)
    full = np.nan_to_num(np.fmax.reduce(high[:, :, 0], axis=2) - np.fmin.reduce(low[:, :, 0], axis=2))
    full = np.where(full > 0, full, np.inf)[:, :, None, None]  # (d, N): each QI's extent in the node
    left = np.fmax.accumulate(high, axis=3) - np.fmin.accumulate(low, axis=3)
    right = (np.fmax.accumulate(high[..., ::-1], axis=3) - np.fmin.accumulate(low[..., ::-1], axis=3))[..., ::-1]
    l_ext = _sum_extents(np.nan_to_num(left[..., :-1]) / full)
    r_ext = _sum_extents(np.nan_to_num(right[..., 1:]) / full)
    score = np.where(valid, s * (ks * l_ext + (own - ks) * r_ext), np.inf).reshape(N, -1)
    lowest = score.min(axis=1, keepdims=True)
    tie = score <= lowest + 1e-9 * (1 + lowest)
    even = np.tile(np.abs(2 * ks[None, :] - deltas[:, None]), (1, d))
    q, k = np.divmod(np.argmin(np.where(tie, even, 2 * D + 1), axis=1), max(D - 1, 1))
    return [(R[i, q[i], :, : k[i] + 1].ravel(), R[i, q[i], :, k[i] + 1: deltas[i]].ravel())
            if np.isfinite(lowest[i, 0]) else None for i in range(N)]
