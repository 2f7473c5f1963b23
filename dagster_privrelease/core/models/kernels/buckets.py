"""Division, balancing and assignment (Xiao-Tao §4.1, Fig. 3): a balanced bucket for every tuple of T(n),
counterfeits filling what S− cannot; and m-eligibility of the new tuples S− (``eligible_cap``,
``refuse_unless_eligible``, ``hold_back_mask``).
"""

from __future__ import annotations

import numpy as np

from ....errors import NotPublishable
from ...partitioned import dense_counts
from ...spec import BoundSpec

__all__ = ["assign", "balance", "buckets_of", "eligible_cap", "hold_back_mask", "refuse_unless_eligible"]


def eligible_cap(counts: np.ndarray, m: int) -> int:
    """The largest cap C such that S− with every value's count cut to C is m-eligible: m·C <= Σ min(n_v, C).

    Cutting every count above C to C holds back the fewest tuples that make S− m-eligible (§4.1): any
    m-eligible subset whose largest count is C' holds back at least Σ max(0, n_v - C'), and a larger feasible
    C' holds back fewer. 0 when no cap works (fewer than m values present).
    """
    top = int(counts.max()) if len(counts) else 0
    caps = np.arange(top + 1)
    ordered = np.sort(counts)
    below = np.searchsorted(ordered, caps, side="left")  # values with n_v < C count fully
    total = np.concatenate(([0], np.cumsum(ordered)))[below] + caps * (len(ordered) - below)
    return int(np.flatnonzero(m * caps <= total).max())


def refuse_unless_eligible(new_codes: np.ndarray, m: int, spec: BoundSpec) -> None:
    """Raise NotPublishable unless S− (the sensitive codes of the new tuples) is m-eligible (§4.1).

    The message names every over-represented value with its count and the bound, and two fixes: hold back the
    surplus (``eligible_cap``) or insert enough tuples of other values.
    """
    V = len(spec.sensitive_values)
    counts = np.bincount(new_codes, minlength=V)
    gamma = int(counts.sum())
    if m * int(counts.max(initial=0)) <= gamma:
        return
    cap = eligible_cap(counts, m)
    over = np.flatnonzero(m * counts > gamma)
    over = over[np.argsort(-counts[over], kind="stable")]
    bound = gamma // m
    listed = ", ".join(
        f"{spec.sensitive_values[v]!r} in {counts[v]} (over by {counts[v] - bound})" for v in over
    )
    surplus = np.maximum(counts - cap, 0)
    held = ", ".join(f"{surplus[v]} of {spec.sensitive_values[v]!r}" for v in np.flatnonzero(surplus))
    inserts = m * int(counts.max()) - gamma
    raise NotPublishable(
        f"the {gamma} new tuple(s) of this snapshot are not {m}-eligible (Xiao-Tao §4.1: no sensitive value may be "
        f"in more than 1/{m} of them, i.e. at most {bound}): {listed}. To publish, hold back {int(surplus.sum())} "
        f"new tuple(s) ({held}) until later releases (set model.hold_back: true to do it automatically), or "
        f"add at least {inserts} new tuple(s) with other {spec.sensitive!r} values"
    )


def hold_back_mask(codes: np.ndarray, new: np.ndarray, m: int, spec: BoundSpec, rng: np.random.Generator) -> np.ndarray:
    """Rows to hold back so that the published S− is m-eligible: the surplus over ``eligible_cap`` of each
    over-represented value, drawn uniformly at random among that value's new tuples with ``rng``.
    Returns a bool mask over all rows (False for S∩ and for an already m-eligible S−)."""
    held = np.zeros(len(codes), dtype=bool)
    rows = np.flatnonzero(new)
    counts = np.bincount(codes[rows], minlength=len(spec.sensitive_values))
    if m * int(counts.max(initial=0)) <= len(rows):
        return held
    surplus = np.maximum(counts - eligible_cap(counts, m), 0)
    shuffled = rows[rng.permutation(len(rows))]
    shuffled = shuffled[np.argsort(codes[shuffled], kind="stable")]  # by value, random within a value
    value = codes[shuffled]
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    held[shuffled[np.arange(len(shuffled)) - first[value] < surplus[value]]] = True
    return held


def buckets_of(
    codes: np.ndarray, prev_group: np.ndarray, signatures: np.ndarray, m: int, V: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Division, balancing and assignment (§4.1, Fig. 3): a balanced bucket for every tuple of T(n).

    ``codes``: sensitive code per tuple; ``prev_group``: row of ``signatures`` of the tuple's group in T*(n-1),
    -1 for S−; S− must be m-eligible. Returns ``(bucket per tuple, bucket per counterfeit, value per
    counterfeit)``; in every bucket each value of its signature has the same number of tuples and
    counterfeits, and no other value occurs. Tuples of S− are picked at random (``rng``) where the paper does.
    """
    old = prev_group >= 0
    packed = np.packbits(signatures, axis=1)
    keys = np.ascontiguousarray(packed[prev_group[old]]).view(np.dtype((np.void, packed.shape[1])))
    bucket_keys, bucket_old = np.unique(keys.reshape(-1), return_inverse=True)
    bucket_bytes = bucket_keys.view(np.uint8).reshape(len(bucket_keys), packed.shape[1])
    bucket_sig = np.unpackbits(bucket_bytes, axis=1, count=V).astype(bool)
    B = len(bucket_keys)
    counts = dense_counts({"bucket": bucket_old.reshape(-1), "value": codes[old]}, (B, V), "counts per signature")
    new_rows = np.flatnonzero(~old)
    new_counts = dense_counts({"value": codes[new_rows]}, (V,), "counts of the new tuples")
    shortage = (counts.max(axis=1, initial=0)[:, None] - counts) * bucket_sig
    moved = balance(shortage, bucket_sig.sum(axis=1), new_counts, m)
    fakes = shortage - moved
    # every move of S− tuples, as (bucket, value, count): balancing first, then the assignment rounds
    mb, mv = np.nonzero(moved)
    move_bucket, move_value, move_count = [mb], [mv], [moved[mb, mv]]
    index = {bytes(k): b for b, k in enumerate(bucket_keys.tolist())}
    for values, alpha in assign(new_counts - moved.sum(axis=0), m):
        row = np.zeros(V, dtype=bool)
        row[values] = True
        key = np.packbits(row).tobytes()
        b = index.setdefault(key, len(index))
        move_bucket.append(np.full(len(values), b))
        move_value.append(values)
        move_count.append(np.full(len(values), alpha))
    move_bucket, move_value, move_count = map(np.concatenate, (move_bucket, move_value, move_count))
    # the tuples of each value, in random order, are dealt to that value's moves in turn
    shuffled = new_rows[rng.permutation(len(new_rows))]
    shuffled = shuffled[np.argsort(codes[shuffled], kind="stable")]
    by_value = np.argsort(move_value, kind="stable")
    buckets = np.empty(len(codes), dtype=np.int64)
    buckets[old] = bucket_old.reshape(-1)
    buckets[shuffled] = np.repeat(move_bucket[by_value], move_count[by_value])
    fb, fv = np.nonzero(fakes)
    return buckets, np.repeat(fb, fakes[fb, fv]), np.repeat(fv, fakes[fb, fv])


def balance(shortage: np.ndarray, sizes: np.ndarray, new_counts: np.ndarray, m: int) -> np.ndarray:
    """Balancing (§4.1): how many tuples of each value S− gives each bucket; the rest of each shortage is filled
    with counterfeits.

    ``shortage``: (B, V) tuples each bucket lacks per value to be balanced; ``sizes``: signature size per
    bucket; ``new_counts``: (V,) tuples of S− per value, m-eligible. The paper fills shortages from S− "as long as
    the resulting S− is still m-eligible", inspecting buckets in turn without fixing the order. The order
    matters: taking a tuple of S−'s most frequent value *raises* the slack |S−| - m·max n_v, any other value
    lowers it. We fill the most shortages any order can: first every shortage S− has tuples for (buckets
    smallest signature first, the order of Fig. 2), then, if S− is left not m-eligible, the fewest fills are
    undone, latest first, so that what remains has its largest count C at the least feasible C with
    m·C <= |S−| (the least C >= max r_v with m·C <= Σ_v min(n_v, max(r_v, C)), r_v the count left by the
    first step). On §4.1's example this gives Table 3a: Ray fills Steve's bucket, Jane's lacks a flu (c2).
    Returns the (B, V) counts of S− tuples moved. O(B·V + shortages).
    """
    moved = np.zeros_like(shortage)
    order = np.argsort(sizes, kind="stable")
    rows, values = np.nonzero(shortage[order])
    buckets = order[rows]
    need = shortage[buckets, values]
    # every value's tuples go to its shortages in bucket order while they last
    by_value = np.argsort(values, kind="stable")
    total = np.cumsum(need[by_value])
    first = np.searchsorted(values[by_value], values[by_value], side="left")
    before = total - need[by_value] - np.concatenate(([0], total))[first]
    fill = np.empty_like(need)
    fill[by_value] = np.clip(new_counts[values[by_value]] - before, 0, need[by_value])
    left = new_counts - np.bincount(values, weights=fill, minlength=len(new_counts)).astype(np.int64)
    if m * left.max(initial=0) > left.sum():
        caps = np.arange(left.max(), new_counts.max() + 1)
        room = np.minimum(new_counts[:, None], np.maximum(left[:, None], caps[None, :])).sum(axis=0)
        cap = int(caps[np.flatnonzero(m * caps <= room)[0]])
        back = m * cap - int(left.sum())
        for e in range(len(need) - 1, -1, -1):  # undo the latest fills first
            v = values[e]
            undo = min(int(fill[e]), cap - int(left[v]), back)
            if undo > 0:
                fill[e] -= undo
                left[v] += undo
                back -= undo
                if back == 0:
                    break
    moved[buckets, values] = fill
    return moved


def assign(counts: np.ndarray, m: int) -> list[tuple[np.ndarray, int]]:
    """Algorithm Assign (Fig. 3) on the per-value counts of an m-eligible S−: the rounds ``(signature, α)``.

    Each round takes α tuples of each of the β most frequent values (ties by value code) into the bucket whose
    signature is those β values; β is the least value from m up for which some α >= 1 satisfies inequalities
    5-7, α the largest: α <= n_β, α·(β - m) <= γ - m·n_1 (Ineq. 6), α·β <= γ - m·n_{β+1} (Ineq. 7). Lemma 5:
    a round always exists while S− is non-empty. The rounds are pure counting; which tuples go is drawn by the
    caller.
    """
    counts = np.asarray(counts, dtype=np.int64).copy()
    rounds: list[tuple[np.ndarray, int]] = []
    while counts.sum() > 0:
        order = np.lexsort((np.arange(len(counts)), -counts))
        n = counts[order]
        gamma = int(n.sum())
        lam = int((n > 0).sum())
        for beta in range(m, lam + 1):
            alpha = int(n[beta - 1])
            if beta > m:
                alpha = min(alpha, (gamma - m * int(n[0])) // (beta - m))
            following = int(n[beta]) if beta < len(n) else 0
            alpha = min(alpha, (gamma - m * following) // beta)
            if alpha >= 1:
                break
        else:
            raise NotPublishable(f"the new tuples {dict(enumerate(counts.tolist()))} are not {m}-eligible (Lemma 5)")
        rounds.append((order[:beta], alpha))
        counts[order[:beta]] -= alpha
    return rounds
