"""Point-in-box and box-overlap joins: the one home of the interval joins the judge and the utility metrics share.

- ``overlapping_pairs``: every pair of boxes that intersect on every column (the lossy join of vertical releases,
  Wang-Fung §1.1; the class overlaps of the backward attack, taxonomy Def. 16).
- ``contained_pairs``: every (point, box) pair with the point inside the box (Xiao-Tao Def. 15's "contains";
  Shmueli-Tassa Def. 3.1's "generalises"; the cells of KL(T, T*), taxonomy Def. 55).
- ``contained_union``: per point, the OR of the bitsets of the boxes containing it, without the pairs (the
  candidate sensitive sets, Xiao-Tao Def. 15);
- ``expand_runs``: the run expansion every join ends with (runs of sorted candidates, each a ``(start, length)``
  pair, expanded into one row per candidate with ``np.repeat``).

Boxes are (n, d) float arrays of inclusive bounds (a point is a box with ``lo == hi``); categorical bounds are
leaf ranks (``encoding.qi_values``). No join loops over boxes x boxes in Python: a sorted search finds runs of
candidates on one or two columns, the runs are expanded, and an exact filter on every column keeps the pairs.
"""

from __future__ import annotations

import numpy as np

from .grouping import pack_bits, unpack_bits

#: Pairs of an interval join materialised at once (memory bound of ``overlapping_pairs``).
_PAIRS_PER_BLOCK = 4_000_000


def expand_runs(start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs ``start[r] .. start[r] + length[r] - 1`` expanded: ``(run, position)`` with one entry per member of
    every run, runs in order. O(runs + members)."""
    length = np.asarray(length, dtype=np.int64)
    run = np.repeat(np.arange(len(length)), length)
    offset = np.arange(len(run)) - np.repeat(np.cumsum(length) - length, length)
    return run, np.repeat(np.asarray(start, dtype=np.int64), length) + offset


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
    """Candidate runs ``(members, start, stop)`` (a-box i may meet ``members[start[i]:stop[i]]``) expanded
    (``expand_runs``) in blocks of at most ``_PAIRS_PER_BLOCK`` pairs, and filtered exactly, column by column."""
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
            run, at = expand_runs(start[rows], cnt)
            i, j = rows[run], members[at]
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
    Cost O(d (n + g) log g + candidates * d); a block id as one more column (``lo = hi = block``) makes it a
    per-block join (Shmueli-Tassa's ``admits_world``).
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


#: Boxes per block of ``contained_union`` (a block's containment is a (points x block / 64) word table).
_BOX_BLOCK = 512


def contained_union(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """For each point, the union of the sets of the boxes that contain it (Xiao-Tao Def. 15's candidate sensitive
    set: the OR of the signatures of every group whose box contains the tuple), without a (point, box) pair.

    ``points``: (n, d); ``lo, hi``: (g, d) inclusive bounds; ``sets``: (g, words) uint64 bitsets
    (``grouping.pack_bits``). Returns (n, words) uint64: row i = OR of ``sets[g]`` over ``lo[g] <= points[i] <=
    hi[g]`` (NaN is inside nothing).

    Method. Equal points share one union (``encoding.unique_rows``; a table has far fewer distinct QI points than
    rows), and so do equal boxes (their sets OR-ed). Boxes are swept in blocks of ``_BOX_BLOCK``, sorted by their
    lower bound on the most selective column (narrowest relative to the points' spread), then the next ones, so a
    block is a compact region: only points inside the block's bounding box (a ``searchsorted`` range of the points
    sorted on that column, then a test on every column) meet it. For them, containment in the block's boxes is a
    word table: per column, each distinct value of those points against every box of the block, packed into
    uint64 words, gathered per point and AND-ed over the columns; a point then gains bit s when its word row meets
    the mask of the boxes whose set holds s. A point whose union already holds every bit any box has (``full``)
    leaves the sweep: no box can add to it, so the answer is unchanged (an exact shortcut, not an estimate).
    Cost O(n d log n + g d log g) for the sorts, plus, per block, O(p (d log p + d + s) block / 64) for the p
    points in its bounding box (s: bits); no pair is materialised and memory is O(n words + p block / 64).
    """
    n, d = points.shape
    words = sets.shape[1]
    out = np.zeros((n, words), dtype=np.uint64)
    if n == 0 or len(lo) == 0:
        return out
    flags = unpack_bits(sets)
    bits = np.flatnonzero(flags.any(axis=0))
    if not len(bits):
        return out
    if d == 0:  # every box contains every point
        out[:] = np.bitwise_or.reduce(sets, axis=0)
        return out
    distinct, inverse = _distinct_rows(points)
    box_rows, box_of = _distinct_rows(np.hstack([lo, hi]))
    order_g = np.argsort(box_of, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(box_of[order_g]) != 0])
    box_sets = np.bitwise_or.reduceat(flags[order_g][:, bits], starts, axis=0)  # (boxes, bits) bool
    blo, bhi = box_rows[:, :d], box_rows[:, d:]
    spread = distinct.max(axis=0) - distinct.min(axis=0)
    relative = np.divide((bhi - blo).mean(axis=0), spread, out=np.full(d, np.inf), where=spread > 0)
    columns = np.argsort(relative, kind="stable")
    k = columns[0]
    sweep = np.lexsort(tuple(bhi[:, c] for c in columns[::-1]) + tuple(blo[:, c] for c in columns[::-1]))
    blo, bhi, box_sets = blo[sweep], bhi[sweep], box_sets[sweep]
    by_k = np.argsort(distinct[:, k], kind="stable")
    xk = distinct[by_k, k]
    found = np.zeros((len(distinct), len(bits)), dtype=bool)
    alive = np.ones(len(distinct), dtype=bool)
    for start in range(0, len(blo), _BOX_BLOCK):
        glo, ghi, gset = blo[start:start + _BOX_BLOCK], bhi[start:start + _BOX_BLOCK], box_sets[start:start + _BOX_BLOCK]
        low, high = glo.min(axis=0), ghi.max(axis=0)
        near = by_k[np.searchsorted(xk, low[k], "left"):np.searchsorted(xk, high[k], "right")]
        near = near[alive[near]]
        x = distinct[near]
        inside = ((x >= low) & (x <= high)).all(axis=1)
        near, x = near[inside], x[inside]
        if not len(near):
            continue
        hit = np.full((len(near), -(-len(glo) // 64)), ~np.uint64(0), dtype=np.uint64)
        for c in columns:
            values, which = np.unique(x[:, c], return_inverse=True)
            hit &= pack_bits((values[:, None] >= glo[:, c]) & (values[:, None] <= ghi[:, c]))[which.reshape(-1)]
        masks = pack_bits(gset.T)  # (bits, words of the block): the boxes holding each bit
        gained = np.column_stack([(hit & masks[b]).any(axis=1) for b in range(len(bits))])
        found[near] |= gained
        alive[near] = ~found[near].all(axis=1)
    union = np.zeros((len(distinct), words * 64), dtype=bool)
    union[:, bits] = found
    return pack_bits(union)[inverse]



def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, inverse)`` of the rows of a 2-D float array (``np.unique`` on rows). O(n d log n)."""
    distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1)
