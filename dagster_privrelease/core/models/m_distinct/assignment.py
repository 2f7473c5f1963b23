"""Phase 2 of m-Distinct (Li-Zhou §V-B, Algorithm 3): the (bucket, entry) pairs each record may take, and the greedy
assignment by the score of eq. 3 (counterfeit contribution ε, generalisation growth λ), the records with the fewest
candidate buckets first.

- eq. 3's Z is the product of the bucket's normalised QI extents, each plus ξ = ``XI`` so that λ is defined for a
  bucket that is a point or empty (λ = 1 for the first record of a bucket). ε is read literally: a record that raises
  δ gets ε = -1, also the first record of an empty bucket (δ = 0), which makes the greedy prefer buckets that already
  need it.
- Equal CNT_buc: records with one possible (bucket, entry) come first (their assignment is forced), then those
  choosing among copies of one CUS in one bucket, then the others in snapshot order. Equal scores: the first bucket
  of the queue, then the entry with fewer records (line 11).
"""

from __future__ import annotations

import numpy as np

from ..kernels.compiled import compiled
from .buckets import Buckets

#: eq. 3: the floor added to every normalised extent of a bucket's QI box, so that λ = Z_aft / Z_bef is defined.
XI = 1e-3

#: ``candidate_pairs`` looks at most this many (kind, bucket, entry) cells at once.
PAIR_CELLS = 1 << 22


def candidate_pairs(
    buckets: Buckets, prev_uss: np.ndarray, codes: np.ndarray, strict: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (record, bucket, entry) a record may take (§V-B): an old record those of the buckets its previous USS
    implies, a new record those of every bucket (under ``strict`` only buckets of pairwise disjoint entries, so
    that its first group has disjoint CUSs); in both cases the entry must allow the record's value.

    Returns ``(record, bucket, entry, count)``: the pairs sorted by record, and per record CNT_buc (the number of
    distinct buckets it can take). Computed once per distinct (previous USS, value), all kinds at once (the pairs of
    a kind in bucket, then entry order). O(kinds · B · s + pairs) numpy work.
    """
    B = len(buckets.entries)
    open_to_new = buckets.disjoint if strict else np.ones(B, dtype=bool)
    width = int(codes.max(initial=0)) + 1  # one integer per (previous USS, value): a 1-d unique, not a row unique
    distinct, inverse = np.unique((prev_uss + 1) * width + codes, return_inverse=True)
    kinds = np.stack([distinct // width - 1, distinct % width], axis=1)
    inverse = inverse.reshape(-1)
    s_max = max((len(e) for e in buckets.entries), default=0)
    V = buckets.entries[0].shape[1] if B else 0
    allowed = np.zeros((B, s_max, V), dtype=bool)  # allowed[b, k, v]: entry k of bucket b may hold value v
    for b, rows in enumerate(buckets.allowed):
        allowed[b, : len(rows)] = rows
    implied = np.vstack([buckets.implied, open_to_new[None, :]])  # the last row (u = -1): a new record's
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    counts = np.zeros(len(kinds), dtype=np.int64)
    step = max(1, PAIR_CELLS // max(B * s_max, 1))
    for at in range(0, len(kinds) if B else 0, step):  # (kinds, B, s_max) cells, a bounded number at once
        chunk = kinds[at: at + step]
        pairs = implied[chunk[:, 0]][:, :, None] & allowed[:, :, chunk[:, 1]].transpose(2, 0, 1)
        of, cells = np.nonzero(pairs.reshape(len(chunk), -1))
        parts.append((of + at, cells))
        counts[at: at + step] = pairs.any(axis=2).sum(axis=1)
    of_kind = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    cell = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    flat_b, flat_e = np.divmod(cell, max(s_max, 1))
    lengths = np.bincount(of_kind, minlength=len(kinds)).astype(np.int64)
    rep = lengths[inverse]
    at = np.repeat(np.cumsum(lengths)[inverse] - rep - (np.cumsum(rep) - rep), rep) + np.arange(int(rep.sum()))
    record = np.repeat(np.arange(len(codes)), rep)
    return record, flat_b.astype(np.int64)[at], flat_e.astype(np.int64)[at], counts[inverse]


def assign_records(
    buckets: Buckets, pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], codes: np.ndarray, Xn: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 3: the (bucket, entry) of every record that has one, by the score of eq. 3.

    ``pairs``: ``candidate_pairs``; ``codes``: sensitive code per record; ``Xn``: QIs normalised to [0, 1]. Records
    with one possible (bucket, entry) are assigned first, at once (their choice is forced); then those whose
    possible entries are copies of one CUS in one bucket (each to the copy with the fewest records, which is what
    eq. 3 picks there); the others one by one, fewest candidate buckets (CNT_buc) first, in snapshot order, each
    to the pair of highest score: with δ = max(F_max, |e_1|, ..., |e_s|) of the bucket, ε = -1 when the record's
    value already has δ records in the bucket or the entry has δ records (the record will cost counterfeits), else
    1; λ = Z_aft / Z_bef the growth of the bucket's QI box (extents plus ``XI``); score 1/λ when ε = 1, else -λ.
    Ties: the first bucket, then the entry with fewer records, then the first entry.

    Returns ``(bucket, entry, counts)``: per record its bucket and entry (-1 when CNT_buc = 0), and the (B, s_max)
    records per entry. Cost O(pairs) for the forced records, a few microseconds of Python per copy record, then
    O(candidate pairs · d) numpy work per other record: these loops are sequential as the paper's greedy is (each
    choice changes the next scores). Measured at 200k rows (20k records with 11-17 candidate buckets): rounds of
    speculative choices, each record scored against the state its predecessors' guessed choices leave and the
    longest correct prefix kept (exact), confirm about 2 records a round, the choice of bucket (not only of
    entry) changing in 4 mismatches of 5; the loop stays sequential, compiled (``_greedy``: O(candidate pairs · d)
    machine work per record instead of a dozen numpy calls).
    """
    record, bucket, entry, count = pairs
    n, d = Xn.shape
    B = len(buckets.entries)
    V = buckets.entries[0].shape[1] if B else 0
    out_b, out_e = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    cnt = np.zeros((B, max((len(e) for e in buckets.entries), default=0)), dtype=np.int64)
    freq = np.zeros((B, V), dtype=np.int64)
    lo, hi = np.full((B, d), np.inf), np.full((B, d), -np.inf)
    lengths = np.bincount(record, minlength=n)
    starts = np.cumsum(lengths) - lengths
    forced = np.flatnonzero(lengths == 1)
    out_b[forced], out_e[forced] = bucket[starts[forced]], entry[starts[forced]]
    np.add.at(cnt, (out_b[forced], out_e[forced]), 1)
    # records whose pairs are copies of one entry of one bucket (a CUS repeated in the USS): eq. 3 is the same for
    # every copy but ε, and the highest score is then always the copy with the fewest records (ties: the first)
    sizes = np.array([len(e) for e in buckets.entries], dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes
    copy_id = offsets[bucket] + np.concatenate(buckets.copy_of or [np.zeros(0, np.int64)])[offsets[bucket] + entry]
    low, high = np.full(n, np.iinfo(np.int64).max), np.full(n, -1)
    np.minimum.at(low, record, copy_id)
    np.maximum.at(high, record, copy_id)
    copies = np.flatnonzero((lengths > 1) & (low == high))
    _fill_copies(copies, low[copies], bucket, entry, starts, lengths, cnt, out_b, out_e)
    settled = np.concatenate([forced, copies])
    np.add.at(freq, (out_b[settled], codes[settled]), 1)
    np.minimum.at(lo, out_b[settled], Xn[settled])
    np.maximum.at(hi, out_b[settled], Xn[settled])
    most_e, most_f = cnt.max(axis=1, initial=0), freq.max(axis=1, initial=0)
    volume = np.prod(np.maximum(hi - lo, 0.0) + XI, axis=1)  # Z of every bucket (XI^d when empty)
    rest = np.flatnonzero((lengths > 1) & (low != high))
    _greedy(rest[np.argsort(count[rest], kind="stable")], bucket, entry, starts, lengths, codes.astype(np.int64),
            np.ascontiguousarray(Xn, dtype=np.float64), cnt, freq, most_e, most_f, lo, hi, volume, out_b, out_e)
    return out_b, out_e, cnt


def _greedy_numpy(order, bucket, entry, starts, lengths, codes, Xn, cnt, freq, most_e, most_f, lo, hi, volume, out_b,
                  out_e) -> None:
    """The reference of ``_greedy``, each record's candidate pairs scored by numpy at once."""
    for t in order.tolist():
        cb, ce = bucket[starts[t]: starts[t] + lengths[t]], entry[starts[t]: starts[t] + lengths[t]]
        v, x = codes[t], Xn[t]
        delta = np.maximum(most_f[cb], most_e[cb])
        in_entry = cnt[cb, ce]
        costly = (freq[cb, v] == delta) | (in_entry == delta)
        lam = (np.maximum(hi[cb], x) - np.minimum(lo[cb], x) + XI).prod(axis=1) / volume[cb]
        score = np.where(costly, -lam, 1.0 / lam)
        top = np.flatnonzero(score == score.max())
        k = top[0] if len(top) == 1 else top[np.lexsort((ce[top], in_entry[top], cb[top]))[0]]
        b, e = cb[k], ce[k]
        out_b[t], out_e[t] = b, e
        cnt[b, e] += 1
        freq[b, v] += 1
        most_e[b], most_f[b] = max(most_e[b], cnt[b, e]), max(most_f[b], freq[b, v])
        lo[b], hi[b] = np.minimum(lo[b], x), np.maximum(hi[b], x)
        volume[b] = (hi[b] - lo[b] + XI).prod()


@compiled(_greedy_numpy)
def _greedy(order, bucket, entry, starts, lengths, codes, Xn, cnt, freq, most_e, most_f, lo, hi, volume, out_b,
            out_e) -> None:
    """Algorithm 3's loop (``assign_records``) over the records of ``order``, in place: each to the candidate pair
    (``bucket``/``entry`` from ``starts[t]``, ``lengths[t]`` of them) of highest eq. 3 score, then the bucket's
    entry counts ``cnt``, value counts ``freq``, their maxima ``most_e``/``most_f``, QI box ``lo``/``hi`` and its
    volume Z updated. The same floating-point operations in the same order as ``_greedy_numpy`` (a product over the
    d extents left to right), the same ties (the highest score, then the first bucket, the fewest records, the
    first entry, the first pair): the same choices. O(candidate pairs · d) per record."""
    d = Xn.shape[1]
    for t in order:
        v = codes[t]
        best, best_score, best_b, best_in, best_e = -1, 0.0, 0, 0, 0
        for p in range(starts[t], starts[t] + lengths[t]):
            b, e = bucket[p], entry[p]
            delta = max(most_f[b], most_e[b])
            in_entry = cnt[b, e]
            z = 1.0
            for j in range(d):
                z *= max(hi[b, j], Xn[t, j]) - min(lo[b, j], Xn[t, j]) + XI
            lam = z / volume[b]
            score = -lam if freq[b, v] == delta or in_entry == delta else 1.0 / lam
            if best < 0 or score > best_score or (score == best_score and (
                    b < best_b or (b == best_b and (in_entry < best_in or (in_entry == best_in and e < best_e))))):
                best, best_score, best_b, best_in, best_e = p, score, b, in_entry, e
        b, e = bucket[best], entry[best]
        out_b[t], out_e[t] = b, e
        cnt[b, e] += 1
        freq[b, v] += 1
        most_e[b] = max(most_e[b], cnt[b, e])
        most_f[b] = max(most_f[b], freq[b, v])
        z = 1.0
        for j in range(d):
            lo[b, j] = min(lo[b, j], Xn[t, j])
            hi[b, j] = max(hi[b, j], Xn[t, j])
            z *= hi[b, j] - lo[b, j] + XI
        volume[b] = z


def _fill_copies(records, kind, bucket, entry, starts, lengths, cnt, out_b, out_e) -> None:
    """Assign ``records`` (ascending), each of whose pairs are the copies of one CUS in one bucket (``kind``: that
    class), one after another to the copy with the fewest records, the first on ties (``assign_records``), in
    place in ``cnt``, ``out_b``, ``out_e``. The picks among copies c_1..c_r of current sizes n_1..n_r are the
    pairs (n_i + t, i), t >= 0, in increasing order (water-filling), so a class of q records is one sort of r·q
    pairs instead of q steps. A class whose records list different copies (never for copies of one CUS) is
    assigned step by step. O(records · r log)."""
    if not len(records):
        return
    order = np.argsort(kind, kind="stable")
    records, kind = records[order], kind[order]
    bounds = np.flatnonzero(np.r_[True, kind[1:] != kind[:-1], True])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        mine = np.sort(records[lo:hi])
        b = int(bucket[starts[mine[0]]])
        ce = entry[starts[mine[0]]: starts[mine[0]] + lengths[mine[0]]]
        lists = entry[starts[mine][:, None] + np.arange(len(ce))] if (lengths[mine] == len(ce)).all() else None
        if lists is None or (lists != ce).any():
            for t in mine.tolist():
                cands = entry[starts[t]: starts[t] + lengths[t]]
                e = cands[np.argmin(cnt[bucket[starts[t]], cands])]
                out_b[t], out_e[t] = bucket[starts[t]], e
                cnt[bucket[starts[t]], e] += 1
            continue
        q, r = len(mine), len(ce)
        level = (cnt[b, ce][:, None] + np.arange(q)[None, :]).ravel()
        copy = np.repeat(np.arange(r), q)
        picks = copy[np.lexsort((copy, level))[:q]]
        out_b[mine], out_e[mine] = b, ce[picks]
        cnt[b] += np.bincount(ce[picks], minlength=cnt.shape[1])
