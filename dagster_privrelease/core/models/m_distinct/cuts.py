"""The cut search of m-Distinct's split (Li-Zhou §V-C, eq. 4) for buckets whose entries overlap: for each node, the
records of every entry sorted along one QI, the first k of every entry to one child, keeping the cuts whose children
stay balanced and m-eligible, and the least split score of eq. 4 over all QIs and k (ties: the most even cut).
The nodes of a level are cut node by node by a compiled loop (``_node_cuts``, ``kernels.compiled``); its numpy
reference cuts them in batches padded to one δ (``_best_overlapping_cuts``); each node gets the cut it would get
alone, the same either way.
"""

from __future__ import annotations

import numpy as np

from ..kernels.compiled import compiled

#: ``split.split_overlapping`` cuts a node by eq. 4 while it has more than this many records per entry, then
#: decomposes it.
LEAF = 8

#: ``_node_cuts_numpy`` batches nodes of one entry count whose δ share a power of two, at most this many slots at once.
BATCH_SLOTS = 1 << 18

#: ``_node_cuts`` adds eq. 4's d extents as numpy sums a row of up to this many values (one pairwise block); past
#: it, ``level_cuts`` runs the numpy reference.
MAX_COMPILED_QIS = 128


def level_cuts(X, entry, value, nodes, V):
    """The cut of every node of one level of ``split_overlapping`` (``nodes``: (entry count s, row ids) each), None
    for a node of at most ``LEAF`` records per entry or with no valid cut. The nodes of one s are cut in one call
    of ``_node_cuts`` (compiled: node by node; its numpy reference ``_node_cuts_numpy`` pads them into batches).
    O(n·d² + n·d log n) for the n rows of the nodes cut."""
    cuts: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(nodes)
    by_s: dict[int, list[int]] = {}
    for i, (s, node) in enumerate(nodes):
        if len(node) // s > LEAF:
            by_s.setdefault(s, []).append(i)
    if not by_s:
        return cuts
    columns = np.ascontiguousarray(np.vstack([X, np.full((1, X.shape[1]), np.nan)]).T)  # (d, n + 1): the pad last
    va = np.r_[value, -1].astype(np.int64)
    ent = np.ascontiguousarray(entry, dtype=np.int64)
    for s, members in by_s.items():
        sizes = np.array([len(nodes[i][1]) for i in members], dtype=np.int64)
        starts = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        rows = np.concatenate([nodes[i][1] for i in members]).astype(np.int64)
        out, left = np.empty_like(rows), np.empty(len(members), dtype=np.int64)
        cut = _node_cuts if X.shape[1] <= MAX_COMPILED_QIS else _node_cuts.reference
        cut(columns, ent, va, rows, starts, s, V, out, left)
        for i, a, b, k in zip(members, starts[:-1].tolist(), starts[1:].tolist(), left.tolist(), strict=True):
            if k >= 0:
                cuts[i] = (out[a:a + k], out[a + k:b])
    return cuts


def _node_cuts_numpy(columns, entry, va, rows, starts, s, V, out, left) -> None:
    """The reference of ``_node_cuts``: nodes whose δ lie in one interval (2^k, 2^(k+1)] padded to the largest δ
    and cut together by ``_best_overlapping_cuts``, in batches of at most ``BATCH_SLOTS`` (row, QI) slots."""
    Xa, d = columns.T, len(columns)
    nodes = [rows[a:b] for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True)]
    classes: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        classes.setdefault((len(node) // s - 1).bit_length(), []).append(i)
    for k, members in classes.items():
        per_batch = max(1, BATCH_SLOTS // (s * (1 << k) * max(d, 1) * max(d, 1)))
        for at in range(0, len(members), per_batch):
            batch = members[at:at + per_batch]
            for i, cut in zip(batch, _best_overlapping_cuts(Xa, entry, va, [nodes[i] for i in batch], s, V,
                                                            columns), strict=True):
                left[i] = -1 if cut is None else len(cut[0])
                if cut is not None:
                    out[starts[i]:starts[i + 1]] = np.concatenate(cut)


@compiled(_node_cuts_numpy)
def _node_cuts(columns, entry, va, rows, starts, s, V, out, left) -> None:
    """Eq. 4's cut of each node ``rows[starts[i]:starts[i + 1]]`` (s entries of δ_i rows), node by node, in place:
    ``out`` holds the node's rows, its left child (the first k of every entry along the chosen QI, entry by entry)
    then its right one, ``left[i]`` the left child's size, or -1 (``out`` untouched) when no cut is valid.
    ``columns``: (d, n) QIs (NaN: an open counterfeit), d <= 128; ``va``: each row's value, -1 for none. The same
    choice as ``_best_overlapping_cuts``, from the same floats: per QI q, the stable sort of every entry (NaN
    first), the cuts k whose children hold no value more than k (left) or δ - k (right) times, each child's
    extents (``np.nan_to_num``) over the node's, summed over the d QIs as numpy sums a row (one after another
    below 8 values, else 8 running sums paired), the score s·(k·l + (δ - k)·r); the least score, then within
    1e-9 of it (relative) the most even cut, then the first (q, k). The node's QIs and values are gathered once
    into a block of its own (its rows are scattered over the table). O(d·(s·δ·d + s·δ log δ + V)) per node,
    memory O(d·s·δ + V) per node."""
    d = columns.shape[0]
    big = np.finfo(np.float64).max
    for i in range(len(starts) - 1):
        a = starts[i]
        delta = (starts[i + 1] - a) // s
        left[i] = -1
        if delta < 2:
            continue
        node = np.empty((s, delta), dtype=np.int64)  # each entry's rows, in node order
        fill = np.zeros(s, dtype=np.int64)
        for p in range(a, a + s * delta):
            e = entry[rows[p]]
            node[e, fill[e]] = rows[p]
            fill[e] += 1
        local = np.empty((d, s, delta))  # the node's QIs and values, gathered once (rows are scattered)
        value = np.empty((s, delta), dtype=np.int64)
        for e in range(s):
            for t in range(delta):
                value[e, t] = va[node[e, t]]
                for q2 in range(d):
                    local[q2, e, t] = columns[q2, node[e, t]]
        full = np.empty(d)
        for q2 in range(d):
            high, low = np.nan, np.nan
            for e in range(s):
                for t in range(delta):
                    x = local[q2, e, t]
                    if x == x:
                        high = x if high != high or x > high else high
                        low = x if low != low or x < low else low
            x = high - low
            x = 0.0 if x != x else (big if x == np.inf else (-big if x == -np.inf else x))
            full[q2] = x if x > 0 else np.inf
        ranked = np.empty((d, s, delta), dtype=np.int64)  # per QI, each entry's positions in sorted order
        keys = np.empty(delta)
        score = np.full((d, delta - 1), np.inf)
        count = np.zeros(V, dtype=np.int64)
        crowded = np.zeros(delta, dtype=np.bool_)
        high, low = np.empty((d, delta)), np.empty((d, delta))
        run_hi, run_lo = np.empty((d, delta)), np.empty((d, delta))
        parts, lsum, r8 = np.empty(d), np.empty(delta), np.empty(8)
        for q in range(d):
            for e in range(s):  # stably sorted along q, NaN first
                for t in range(delta):
                    x = local[q, e, t]
                    keys[t] = -np.inf if x != x else x
                ranked[q, e] = np.argsort(keys, kind="mergesort")
            crowded[:] = False
            count[:] = 0
            most = 0
            for k in range(1, delta):  # the left child: ranks < k
                for e in range(s):
                    v = value[e, ranked[q, e, k - 1]]
                    if v >= 0:
                        count[v] += 1
                        most = max(most, count[v])
                crowded[k] = most > k
            count[:] = 0
            most = 0
            for k in range(delta - 1, 0, -1):  # the right child: ranks >= k
                for e in range(s):
                    v = value[e, ranked[q, e, k]]
                    if v >= 0:
                        count[v] += 1
                        most = max(most, count[v])
                crowded[k] = crowded[k] or most > delta - k
            for q2 in range(d):  # each rank's extremes over the entries (fmax, fmin: NaN ignored)
                for r in range(delta):
                    h, lw = np.nan, np.nan
                    for e in range(s):
                        x = local[q2, e, ranked[q, e, r]]
                        if x == x:
                            h = x if h != h or x > h else h
                            lw = x if lw != lw or x < lw else lw
                    high[q2, r], low[q2, r] = h, lw
            for side in range(2):  # 0: the left child, running over ranks 0..k-1; 1: the right, ranks k..δ-1
                for t in range(delta - 1):
                    r = t if side == 0 else delta - 1 - t
                    k = t + 1 if side == 0 else r
                    for q2 in range(d):
                        h, lw = high[q2, r], low[q2, r]
                        if t > 0:
                            before = r - 1 if side == 0 else r + 1
                            ph, pl = run_hi[q2, before], run_lo[q2, before]
                            h = ph if h != h or (ph == ph and ph > h) else h
                            lw = pl if lw != lw or (pl == pl and pl < lw) else lw
                        run_hi[q2, r], run_lo[q2, r] = h, lw
                        x = h - lw
                        x = 0.0 if x != x else (big if x == np.inf else (-big if x == -np.inf else x))
                        parts[q2] = x / full[q2]
                    if d < 8:
                        total = parts[0]
                        for j in range(1, d):
                            total += parts[j]
                    else:
                        r8[:] = parts[:8]
                        j = 8
                        while j < d - d % 8:
                            for u in range(8):
                                r8[u] += parts[j + u]
                            j += 8
                        total = ((r8[0] + r8[1]) + (r8[2] + r8[3])) + ((r8[4] + r8[5]) + (r8[6] + r8[7]))
                        while j < d:
                            total += parts[j]
                            j += 1
                    if side == 0:
                        lsum[k] = total
                    elif not crowded[k]:
                        score[q, k - 1] = s * (k * lsum[k] + (delta - k) * total)
        lowest = np.inf
        for q in range(d):
            for k in range(delta - 1):
                lowest = min(lowest, score[q, k])
        if lowest == np.inf:
            continue
        best_q, best_k, best_even = 0, 0, 2 * delta + 1
        for q in range(d):
            for k in range(1, delta):
                even = abs(2 * k - delta)
                if score[q, k - 1] <= lowest + 1e-9 * (1 + lowest) and even < best_even:
                    best_q, best_k, best_even = q, k, even
        p = a
        for e in range(s):
            for r in range(best_k):
                out[p] = node[e, ranked[best_q, e, r]]
                p += 1
        for e in range(s):
            for r in range(best_k, delta):
                out[p] = node[e, ranked[best_q, e, r]]
                p += 1
        left[i] = s * best_k


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


def _best_overlapping_cuts(Xa, entry, va, nodes, s, V, columns=None):
    """For each node (row ids, s entries of δ_i rows each), the (left rows, right rows) of the least eq. 4 score
    among the valid cuts of ``split_overlapping``, or None. ``Xa``, ``va``: the QIs and values of the rows, then of
    the pad row (NaN, -1); ``va`` -1 marks an open counterfeit, which counts in no value. The nodes are padded to the largest δ with a row of no value and NaN QIs, sorted last along every
    QI, and every cut at or past a node's own δ is invalid; so each node's cut is the one it gets alone. ``columns``
    (optional): ``Xa.T`` contiguous. The QI extents are gathered QI by QI, (d, N, d, δ_max), so that the
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
