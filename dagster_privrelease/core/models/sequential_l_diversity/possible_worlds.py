"""Algorithm 1 of Shmueli & Tassa (§4.2): the ℓ - 1 fake possible worlds, and their life under insertions (§5.2).

A possible world (Def. 3.1) has T's identifiers and quasi-identifiers; fake world i ties every individual t to the
*suffix* (non-identifiers and sensitive value) of the tuple σ_i(t) of its bucket (eq. (5)). It is stored compactly
as that permutation, one row per fake world and individual, ``(world, <id>, source_<id>)`` with ``world`` in
1..ℓ-1; the true world (σ_ℓ the identity, world 0) is implied. Materialising a world from the current snapshot
reads the individual's own quasi-identifiers and the source's suffix, which is eq. (8): attributes revealed for
the first time after the worlds were made (§4.3) fill them without recomputing anything, and the worlds seen by
any release agree with the clairvoyant ones on its attributes (Claim 1 of Theorem 4.4).

Per bucket B (Steps 3-8):

- Step 2 ``buckets``: Mondrian (``kernels.partition.partition``, as the paper's experiments do, ref. [18]) into buckets of
  diversity at least ℓ in the frequency form of Def. 2.3, over every quasi-identifier of the spec (the attributes
  known upfront), ranges normalised by the domain widths; a large leaf (equal quasi-identifiers) dealt into
  buckets of ℓ..2ℓ-1 tuples of pairwise different values (``buckets``).
- Step 4 ``cyclic_order``: the sensitive values in a cycle where every ℓ consecutive are distinct (Appendix 8.2,
  Lemma 8.1).
- Step 5 ``greedy_order``: B's tuples placed on that cycle greedily by eq. (7).
- Step 6 ``range_limited_permutations``: ℓ - 1 permutations with range limitation and diversity, constructed
  (not searched, docstring's proof) as a random 1-factorisation of a circulant graph.
- Step 7: the rows of the compact frame.

Insertions (§5.2, ``extend_worlds``): a batch of new tuples must itself be ℓ-diverse; it gets its own worlds,
made by the same steps on the batch alone, and world i of the table becomes old world i ∪ new world i (the
pairing of old and new fake worlds is immaterial, the true worlds pair with each other). Deletions and updates are
left open by the paper (§5.3, critical absence) and refused.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.sparse import csr_array
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from ....errors import NotPublishable
from ...encoding import encode, sensitive_codes
from ...judge.verifiers.shmueli_tassa import source_column
from ...partitioned import lookup
from ...release import PreviousRelease
from ...spec import BoundSpec, rows_text
from ..kernels.buckets import eligible_cap
from ..kernels.partition import domain_widths, partition
from .information_loss import InformationLoss

#: Mondrian leaves larger than this (and than 4ℓ) are dealt into buckets of ℓ..2ℓ-1 tuples (``buckets``).
LARGEST_BUCKET = 100


# ------------------------------------------------------------------------------------------------ Steps 2-7


def buckets(snapshot: pd.DataFrame, rows: np.ndarray, spec: BoundSpec, l: int) -> np.ndarray:  # noqa: E741
    """Step 2: a bucket id (0..b-1) for each of ``rows`` (positions in ``snapshot``), every bucket ℓ-diverse in
    the frequency form of Def. 2.3, with a low closure cost.

    Mondrian in the frequency form (``kernels.partition.partition(l=ℓ, form="frequency")``) over every quasi-identifier of
    ``spec``, ranges normalised by the domain widths of the whole snapshot T. A leaf of more than
    max(``LARGEST_BUCKET``, 4ℓ) tuples is then dealt into buckets of ℓ..2ℓ-1 tuples with pairwise different
    values (``kernels.partition.partition(unique=True)``, m-uniqueness with m = ℓ: ordered slices of the leaf along its
    widest attribute), ℓ-diverse in that form too. Why: a Mondrian leaf of equal quasi-identifiers cannot be
    cut, real tables have leaves of thousands of equal tuples, and such a bucket makes Step 5 a loop of thousands
    of steps and Step 6 a matching of thousands of positions (minutes at 100k rows), while its slices cost no
    more closure than the leaf. NotPublishable (naming the value) when the rows themselves are not ℓ-diverse.
    O(n log n) per Mondrian level."""
    X = encode(snapshot, spec)
    widths = domain_widths(X, spec)
    X, codes = X[rows], sensitive_codes(snapshot, spec)[rows]
    leaves = partition(X, codes, l=l, form="frequency", scale=widths)
    large = np.bincount(leaves)[leaves] > max(LARGEST_BUCKET, 4 * l)
    if large.any():  # every large leaf is ℓ-diverse, so their union is: the cut cannot fail
        cut = partition(X[large], codes[large], k=l, unique=True, scale=widths)
        leaves[large] = leaves.max() + 1 + cut
    return np.unique(leaves, return_inverse=True)[1].reshape(-1)


def cyclic_order(bucket: np.ndarray, values: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """Step 4 (Appendix 8.2): every bucket's sensitive values on a cycle where every ℓ consecutive ones differ.

    ``bucket``: bucket id per tuple, ``values``: sensitive code per tuple, each bucket ℓ-diverse (Def. 2.3: no
    value in more than n/ℓ of its n tuples). Returns ``(start, cycle)``: the buckets laid out one after the other,
    ``start[b]`` the first position of bucket b and ``cycle[start[b] + h]`` the value at position h of its cycle.

    Construction of Lemma 8.1, per bucket of n = qℓ + r tuples: the values sorted from the most to the least
    frequent (ties by code), z_0..z_{n-1}, fill a q x ⌈n/q⌉ array by columns, A(i, j) = z_{i + qj} (the paper's
    "z_{i+rj}" is a typo: a column has q rows), and are read by rows skipping the empty cells of the last column.
    The position of z_k, k = i + qj, in that reading is i(p - 1) + min(i, f) + j, with p = ⌈n/q⌉ columns and f the
    number of filled cells of the last column, so all buckets are laid out at once. The paper's proof assumes
    p <= ℓ + 1; when r > q (then p > ℓ + 1) the same argument holds since a value's run of at most q cells that
    crosses into the next column has fewer than q cells (a value of q copies starts a column: the values before
    it have q copies each), so its two parts are at least two rows apart; the property test checks every bucket
    shape of up to 7 values x 6 copies for ℓ <= 6. O(n log n).
    """
    B = int(bucket.max()) + 1 if len(bucket) else 0
    S = int(values.max()) + 1 if len(values) else 1
    size = np.bincount(bucket, minlength=B)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    count = np.bincount(bucket * S + values, minlength=B * S)[bucket * S + values]
    z = np.lexsort((values, -count, bucket))  # by bucket, most frequent value first, ties by code
    n = size[bucket[z]]
    k = np.arange(len(z)) - start[bucket[z]]
    q = n // l
    p = -(-n // q)
    f = n - q * (p - 1)
    i, j = k % q, k // q
    cycle = np.empty(len(z), dtype=np.int64)
    cycle[start[bucket[z]] + i * (p - 1) + np.minimum(i, f) + j] = values[z]
    return start, cycle


def greedy_order(
    bucket: np.ndarray, values: np.ndarray, start: np.ndarray, cycle: np.ndarray, ranks: np.ndarray,
    loss: InformationLoss, l: int, rng: np.random.Generator,  # noqa: E741
) -> np.ndarray:
    """Step 5 (eq. (7)): the tuple at every position of every bucket's cycle.

    ``bucket``/``values``: per tuple; ``start``/``cycle``: from ``cyclic_order``; ``ranks``: (n, d) the tuples'
    quasi-identifiers in ``loss``'s rank space. Position h of a bucket takes, among its tuples with the sensitive
    value ``cycle[h]`` not placed yet, the one minimising Σ_{j=1}^{min(h, ℓ-1)} IL(closure{t, t_{h-1}, ..., t_{h-j}})
    (its share of the cost (6) of making the fake worlds possible). "Ties are broken evenly": by a uniformly
    random priority drawn once per tuple with ``rng``. The wrap-around terms of (6) for the first ℓ - 1 positions
    are left out, as (7) does. Returns ``order``: ``order[start[b] + h]`` is the tuple (index into ``bucket``) at
    position h of bucket b.

    The cost depends on a candidate's quasi-identifiers only, so candidates are *cells*: the tuples of one bucket,
    value and QI point, best priority first; a step costs each cell of the run once and takes the first unplaced
    tuple of the cheapest (the same choice as tuple by tuple: a cell's first tuple has its best priority). All
    buckets advance together, one position per step: O(max |B|) numpy steps, O(Σ_B Σ_s c_{B,s} n_{B,s} ℓ d) work
    (c_{B,s} the cells, n_{B,s} the tuples of value s in bucket B; Mondrian's large buckets are of equal points).
    """
    n, d = ranks.shape
    B = len(start)
    S = int(values.max()) + 1 if n else 1
    size = np.diff(np.append(start, n))
    priority = rng.permutation(n)
    _, point = np.unique(ranks, axis=0, return_inverse=True)
    slots = np.lexsort((priority, point.reshape(-1), values, bucket))  # cells in runs of (bucket, value)
    run_key = bucket[slots] * S + values[slots]
    cell_start = np.flatnonzero(np.diff(run_key, prepend=-1) | np.diff(point.reshape(-1)[slots], prepend=-1))
    cell_end = np.append(cell_start[1:], n)
    cell_first = cell_start.copy()  # first unplaced slot of each cell
    run_of_cell = run_key[cell_start]
    run_keys, run_cells = np.unique(run_of_cell, return_index=True)
    run_cells_end = np.append(run_cells[1:], len(cell_start))
    hist_lo = np.zeros((B, max(l - 1, 1), d), dtype=np.int64)  # last ℓ-1 placed tuples, most recent first
    hist_hi = np.zeros_like(hist_lo)
    order = np.empty(n, dtype=np.int64)
    for h in range(int(size.max()) if B else 0):
        active = np.flatnonzero(size > h)
        runs = np.searchsorted(run_keys, active * S + cycle[start[active] + h])
        first, length = run_cells[runs], run_cells_end[runs] - run_cells[runs]
        seg = np.repeat(np.arange(len(active)), length)
        cells = np.repeat(first, length) + np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        left = cell_first[cells] < cell_end[cells]
        cells, seg = cells[left], seg[left]
        cand = ranks[slots[cell_first[cells]]]  # (c, d)
        terms = min(h, l - 1)
        cost = np.zeros(len(cells))
        if terms:
            back_lo = np.minimum.accumulate(hist_lo[active, :terms], axis=1)[seg]  # closures of t_{h-1..h-j}
            back_hi = np.maximum.accumulate(hist_hi[active, :terms], axis=1)[seg]
            cost = loss.joined_loss(cand[:, None, :], cand[:, None, :], back_lo, back_hi).sum(axis=1)
        best = np.lexsort((priority[slots[cell_first[cells]]], cost, seg))
        chosen_cell = cells[best[np.flatnonzero(np.diff(seg[best], prepend=-1))]]
        chosen = slots[cell_first[chosen_cell]]
        cell_first[chosen_cell] += 1
        order[start[active] + h] = chosen
        hist_lo[active, 1:], hist_hi[active, 1:] = hist_lo[active, :-1], hist_hi[active, :-1]
        hist_lo[active, 0], hist_hi[active, 0] = ranks[chosen], ranks[chosen]
    return order


def range_limited_permutations(start: np.ndarray, n: int, l: int, rng: np.random.Generator) -> np.ndarray:  # noqa: E741
    """Step 6: ℓ - 1 random permutations σ_1..σ_{ℓ-1} of every bucket's positions with range limitation and
    diversity. Returns (ℓ - 1, n) int64: ``sigma[i - 1, start[b] + h]`` is the position of σ_i(t_h) (global).

    Conditions, for a bucket of n >= ℓ positions (indices mod n): (1) σ_i(h) ∈ {h+1, ..., h+ℓ-1}; (2) for every h
    the ℓ images σ_1(h), ..., σ_{ℓ-1}(h), σ_ℓ(h) = h are distinct.

    Construction instead of the random walk with backtracking of [36, §5.2]. Let G be the bipartite graph with
    the positions on both sides and an edge h -> h + δ for δ = 1..ℓ-1: (ℓ-1)-regular, and simple because
    ℓ - 1 < n. (1) and (2) say exactly that σ_1..σ_{ℓ-1} are perfect matchings of G that are pairwise disjoint
    (each h has ℓ - 1 distinct images among its ℓ - 1 neighbours, none equal to h since δ >= 1): a 1-factorisation
    of G. One is drawn colour by colour: a k-regular bipartite graph (k >= 1) has a perfect matching (Hall's
    theorem: any set X of one side sends k|X| edges to its neighbourhood, which receives at most k per vertex,
    so |N(X)| >= |X|), and removing it leaves a (k-1)-regular bipartite graph. So the loop cannot fail: σ_i is
    a minimum-weight perfect matching of the edges left, under weights drawn uniformly with ``rng``
    (``scipy.sparse.csgraph.min_weight_full_bipartite_matching``), and every perfect matching has a positive
    probability of being chosen. All buckets are one block-diagonal graph. O(ℓ) sparse matchings of
    n(ℓ - 1) edges.

    ``start``: first position of every bucket (``cyclic_order``), ``n`` the number of positions.
    """
    size = np.diff(np.append(start, n))
    bucket = np.repeat(np.arange(len(start)), size)
    local = np.arange(n) - start[bucket]
    tail = np.repeat(np.arange(n), l - 1)
    head = start[bucket[tail]] + (local[tail] + np.tile(np.arange(1, l), n)) % size[bucket[tail]]
    left = np.ones(len(tail), dtype=bool)
    sigma = np.empty((l - 1, n), dtype=np.int64)
    for i in range(l - 1):
        keep = np.flatnonzero(left)
        weights = rng.random(len(keep)) + 1.0  # positive: an explicit weight, never an absent edge
        graph = csr_array((weights, (tail[keep], head[keep])), shape=(n, n))
        rows, cols = min_weight_full_bipartite_matching(graph)
        sigma[i, rows] = cols
        delta = (cols - start[bucket[rows]] - local[rows]) % size[bucket[rows]]  # edge rows -> rows + delta
        left[rows * (l - 1) + delta - 1] = False
    return sigma


def possible_worlds(
    snapshot: pd.DataFrame, rows: np.ndarray, spec: BoundSpec, l: int, loss: str,  # noqa: E741
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Algorithm 1 on the tuples ``rows`` (positions in the validated ``snapshot`` T; all of T for the first
    release, an inserted batch later): the ℓ - 1 fake worlds of those tuples in compact form,
    ``(world, <id>, source_<id>)``, one row per fake world and tuple (module docstring).

    ``loss``: "LM" or "EM", the IL of eqs. (6)-(7), over every quasi-identifier of ``spec``, normalised by T.
    NotPublishable when the rows are not ℓ-diverse (Def. 2.3). Deterministic given ``rng``. Cost: Mondrian's
    O(n log n) per level, then on buckets of at most max(``LARGEST_BUCKET``, 4ℓ) tuples Step 5's
    O(n · max|B| · ℓ d) and Step 6's ℓ - 1 sparse matchings of n(ℓ - 1) edges (100k rows, ℓ = 5: under 1 s).
    """
    rows = np.asarray(rows, dtype=np.int64)
    source = source_column(spec)
    if len(rows) == 0:
        return pd.DataFrame({"world": pd.Series(dtype=np.int64), spec.id: snapshot[spec.id].iloc[:0],
                             source: snapshot[spec.id].iloc[:0].rename(source)})
    bucket = buckets(snapshot, rows, spec, l)
    values = sensitive_codes(snapshot, spec)[rows]
    start, cycle = cyclic_order(bucket, values, l)
    il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), loss)
    order = greedy_order(bucket, values, start, cycle, il.ranks[rows], il, l, rng)
    sigma = range_limited_permutations(start, len(rows), l, rng)
    ids = snapshot[spec.id].to_numpy()[rows[order]]
    return pd.DataFrame({
        "world": np.repeat(np.arange(1, l, dtype=np.int64), len(rows)),
        spec.id: np.tile(ids, l - 1),
        source: ids[sigma.reshape(-1)],
    })


# ------------------------------------------------------------------------------------------ §5.2 insertions


def _inserted(snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease) -> np.ndarray:
    """Positions in ``snapshot`` of the tuples new since ``previous``; NotPublishable for a deletion or an
    update (§5.3) naming how many, the rows of the snapshot (never an id or a value) and the models that handle
    them. The join by id of T(n) with T(n-1) (§5.2: T(n-1)'s tuples all in T(n), unchanged) is one
    ``partitioned.lookup`` on the table's backend; an id is once in a snapshot, so the tuples of T(n-1) it does not
    find are ``|T(n-1)|`` less those it finds. O(N d)."""
    before = previous.snapshot
    where = lookup(snapshot[spec.id], before[spec.id], "insertions by individual")
    kept = where >= 0
    gone = len(before) - int(kept.sum())
    if gone:
        raise NotPublishable(
            f"{gone} tuple(s) of release {previous.release_id} are not in the snapshot (deleted); "
            f"sequential_l_diversity supports insertions only (Shmueli-Tassa §5.2; deletions are left open in §5.3: "
            f"critical absence). To publish now, release a snapshot that still holds them (without the deletions); a "
            f"history with deletions needs a new store, under m_invariance (deletions) or m_distinct (deletions and "
            f"updates)"
        )
    shared = [c for c in snapshot.columns if c in before.columns and c != spec.id]
    now = snapshot.loc[kept, shared].reset_index(drop=True)
    was = before.iloc[where[kept]][shared].reset_index(drop=True)
    differs = now.ne(was).fillna(True) & ~(now.isna() & was.isna())
    changed = differs.any(axis=1).to_numpy()
    if changed.any():
        first = int(np.flatnonzero(changed)[0])
        column = differs.columns[differs.iloc[first].to_numpy()][0]
        rows = np.zeros(len(snapshot), dtype=bool)
        rows[np.flatnonzero(kept)[changed]] = True
        raise NotPublishable(
            f"{int(changed.sum())} tuple(s) of release {previous.release_id} were updated ({rows_text(rows)} of "
            f"the snapshot; the first in column {column!r}); sequential_l_diversity "
            f"supports insertions only (Shmueli-Tassa §5.2; updates are left open in §5.3). To publish now, release "
            f"the snapshot with their earlier values (without the updates); a history with updates needs a new "
            f"store, under m_distinct"
        )
    return np.flatnonzero(~kept)


def refuse_unless_diverse(snapshot: pd.DataFrame, rows: np.ndarray, spec: BoundSpec, l: int) -> None:  # noqa: E741
    """NotPublishable unless the batch ``rows`` is ℓ-diverse (Def. 2.3; the assumption of §5.2, "inevitable":
    otherwise comparing releases before and after the batch links its tuples to its values). The message names
    the over-represented values and two fixes: insert more tuples of other values, or hold some back."""
    values = np.asarray(spec.sensitive_values, dtype=object)
    codes = sensitive_codes(snapshot, spec)[rows]
    counts = np.bincount(codes, minlength=len(values))
    n = len(rows)
    if l * int(counts.max(initial=0)) <= n:
        return
    over = np.flatnonzero(l * counts > n)
    listed = ", ".join(f"{values[v]!r} in {counts[v]}" for v in over[np.argsort(-counts[over], kind="stable")])
    cap = eligible_cap(counts, l)
    held = int(np.maximum(counts - cap, 0).sum())
    what = "first release's table" if n == len(snapshot) else f"batch of {n} inserted tuple(s)"
    raise NotPublishable(
        f"the {what} is not {l}-diverse (Shmueli-Tassa Def. 2.3 and §5.2: no sensitive value in more than 1/{l} "
        f"of it, at most {n // l}): {listed}. To publish, add at least {l * int(counts.max()) - n} tuple(s) with "
        f"other {spec.sensitive!r} values to the batch, or hold back {held} of the over-represented ones until a "
        f"later batch"
    )


def extend_worlds(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator
) -> pd.DataFrame:
    """The compact worlds of T(n) (``snapshot``): those of release n-1 (``previous.state["possible_worlds"]``)
    unioned with Algorithm 1 on the tuples inserted since (§5.2); Algorithm 1 on all of T for the first release.

    NotPublishable for a deletion or an update (§5.3: saying what can be released now, and the models of a new
    store), for a batch that is not ℓ-diverse, and for a previous release without a possible-world set. An insertion-free release reuses
    the worlds as they are. Cost: Algorithm 1 on the batch, plus O(|T(n)|) to compare and concatenate.
    """
    params = spec.model.params
    l, loss = int(params["l"]), str(params.get("loss", "LM"))  # noqa: E741
    columns = ["world", spec.id, source_column(spec)]
    if previous is None:
        new, old = np.arange(len(snapshot)), None
    else:
        old = previous.state.get("possible_worlds")
        if old is None:
            raise NotPublishable(
                f"release {previous.release_id} has no possible-world set: it was not published by "
                f"sequential_l_diversity, and the worlds of a running history cannot be made afresh (the earlier "
                f"releases were generalised for other worlds). Start a new store for this model"
            )
        new = _inserted(snapshot, spec, previous)
        old = old[columns]
    if len(new):
        refuse_unless_diverse(snapshot, new, spec, l)
    made = possible_worlds(snapshot, new, spec, l, loss, rng)
    if old is None or not len(made):
        return made if old is None else old.reset_index(drop=True)
    return pd.concat([old, made], ignore_index=True)
