"""Balancing and phase 3 of m-Distinct (Li-Zhou §V-B's last paragraph, §V-C): records no bucket can take grouped as a
static table, counterfeits that balance every bucket, the recursive split by eq. 4 (``cuts``) and the counterfeits'
values drawn from their entries' CUS.

- The split of §V-C picks, along one QI, the first k records of every entry for one child. With pairwise disjoint
  entries every such cut keeps both children balanced and m-eligible, and all buckets are cut at once by
  ``kernels.split.split`` (the entry in the value's place). With overlapping entries (a CUS repeated in a USS, or CUSs
  that overlap) only the cuts whose children have no value more than k (resp. δ - k) times are kept
  (``split_overlapping``); below ``LEAF`` records per entry, or when no cut is valid, a node is decomposed directly
  (König's edge-colouring theorem: balanced with F_max <= δ suffices). A counterfeit's value is drawn from its
  entry's CUS among the values its group leaves free (§V-C's last paragraph), uniformly for disjoint entries; for
  overlapping ones from the values with room left, so that the group can still take distinct values.
- Under ``strict``, new records are grouped by the connected components of the "CUSs overlap" relation
  (``update_sets.classes_of``); this is sufficient, and can ask for more components than a finer choice would.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from ....errors import NotPublishable
from ..kernels.buckets import buckets_of
from ..kernels.split import split
from .buckets import Buckets, linear_sum_assignment
from .cuts import level_cuts
from .update_sets import classes_of


def top_up(counts: np.ndarray, m: int) -> np.ndarray:
    """The keys of the fewest counterfeits that make ``counts`` m-eligible (no key in more than 1/m of the
    records, m-invariance §4.1, as Li-Zhou footnote 9 asks of new records): m·max - total of them, given to the
    least frequent keys first, none above the maximum. Needs at least m keys. O(K log K)."""
    top, total = int(counts.max(initial=0)), int(counts.sum())
    missing = m * top - total
    if missing <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(counts, kind="stable")
    room = top - counts[order]
    give = np.minimum(room, np.maximum(missing - (np.cumsum(room) - room), 0))
    return np.repeat(order, give)


def new_buckets(keys: np.ndarray, K: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Records no bucket can take (CNT_buc = 0), partitioned as a static table (§V-B: "exploiting existing
    anonymization algorithms"): counterfeits where the keys are not m-eligible (``top_up``), then Xiao-Tao's
    assignment (Fig. 3, ``kernels.buckets.buckets_of``) into balanced buckets of at least m distinct keys.

    Returns ``(bucket per record then per counterfeit, key per counterfeit)``. O(n log n)."""
    fakes = top_up(np.bincount(keys, minlength=K), m)
    every = np.concatenate([keys, fakes])
    buckets, _, _ = buckets_of(every, np.full(len(every), -1, dtype=np.int64),
                                            np.zeros((0, K), dtype=bool), m, K, rng)
    return buckets, fakes


def balance_overlapping(entries: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Balancing (§V-B, last paragraph) of a bucket whose entries overlap, counterfeit values chosen jointly: the
    counterfeits per (entry, value), (s, V), such that every entry has δ records, every value at most δ (then the
    records split into δ groups of distinct values, König's theorem), each counterfeit's value in its entry
    (``entries``, (s, V)). ``counts``: the genuine records per (entry, value). δ is the least from max(F_max,
    |e_i|) up for which a maximum flow (entry -> value, capacities δ - |e_i| and δ - F(v)) places them all; one
    exists because every record holds an allowed pair (``allowed_pairs``). The value nodes are numbered in an order
    drawn from ``rng``, so that the flow's choice of values is not biased to the first values of the domain.
    O(δ increments · max-flow of s + V nodes).
    """
    s, V = counts.shape
    n_e, F = counts.sum(axis=1), counts.sum(axis=0)
    es, vs = np.nonzero(entries)
    node = 1 + s + rng.permutation(V)  # value v is node node[v]
    source, sink = 0, s + V + 1
    start = int(max(n_e.max(), F.max()))
    for delta in range(start, start + int(counts.sum()) + 1):
        rows = np.concatenate([np.zeros(s, dtype=np.int64), 1 + es, node])
        cols = np.concatenate([1 + np.arange(s), node[vs], np.full(V, sink)])
        caps = np.concatenate([delta - n_e, np.full(len(es), delta * s), delta - F]).astype(np.int32)
        graph = csr_matrix((caps, (rows, cols)), shape=(sink + 1, sink + 1))
        result = maximum_flow(graph, source, sink)
        if result.flow_value == int((delta - n_e).sum()):
            flow = result.flow.tocsr()[1: s + 1][:, node].toarray()
            return np.asarray(flow).clip(min=0).astype(np.int64)
    raise RuntimeError("balance_overlapping: no δ balances the bucket; a record holds a pair allowed_pairs refuses")


def decompose(entry: np.ndarray, value: np.ndarray, order: np.ndarray, s: int, V: int) -> np.ndarray:
    """QI groups of a balanced bucket with overlapping entries (§V-C's goal by König's edge-colouring theorem):
    rows are edges entry -> value, every entry has δ of them and no value more than δ; δ times, a matching
    covering every entry and every value of the most rows (the Hungarian method, weight 1000 per edge plus 1 per
    such value) is one group, each of its (entry, value) pairs taking its first row in ``order`` (QI order).

    Returns the group (0..δ-1) of every row. O(δ · s·V matching)."""
    pools: dict[tuple[int, int], list[int]] = {}
    for row in order[::-1].tolist():
        pools.setdefault((int(entry[row]), int(value[row])), []).append(row)
    left = np.zeros((s, V), dtype=np.int64)
    np.add.at(left, (entry, value), 1)
    degree = left.sum(axis=0)
    delta = len(entry) // s
    group = np.empty(len(entry), dtype=np.int64)
    for r in range(delta):
        present = left > 0
        weight = present * (1000 + (degree == delta - r))[None, :]
        cols = np.flatnonzero(present.any(axis=0))
        es, at = linear_sum_assignment(weight[:, cols], maximize=True)
        vs = cols[at]
        for e, v in zip(es.tolist(), vs.tolist(), strict=True):
            group[pools[(e, v)].pop()] = r
        left[es, vs] -= 1
        degree[vs] -= 1
    return group


def split_overlapping(
    X: np.ndarray, entry: np.ndarray, value: np.ndarray, bucket: np.ndarray, entries: list[np.ndarray],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """§V-C for balanced buckets with overlapping entries: QI groups of one record per entry and distinct values.

    ``X``: (n, d) normalised QIs, NaN for a counterfeit; per row its ``bucket`` (an index into ``entries``, the
    (s, V) value sets of each bucket's entries), ``entry`` (0..s-1) and ``value``, -1 for a counterfeit whose value
    is still open (it takes a value of its entry when its group is made); in every bucket each entry has δ rows and
    no value more than δ. A node is cut in two as the paper says: the records of each entry sorted along one QI,
    the first k of every entry to one child, the others to the other, keeping only the cuts whose children are both
    balanced and m-eligible (no value more than k, resp. δ - k, times: by König's theorem such a child splits into
    groups of distinct values, when its open counterfeits can take values, which holds for entries that are
    pairwise equal or disjoint), and taking the least split score of eq. 4 over all QIs and k (ties: the most even
    cut). A node with at most ``LEAF`` records per entry, or with no such cut, is decomposed (``_leaf_groups``):
    with entries pairwise equal or disjoint by ``_columns`` (after ``_open_values`` gives the open counterfeits
    their values), else by ``decompose`` in QI order (counterfeits last; their values were fixed by
    ``balance_overlapping``, since open ones could be left without a distinct value). Returns ``(group 0.. per
    row, value per row)``.
    The nodes of a level are cut by ``level_cuts`` (a compiled loop node by node; its numpy reference pads them
    into batches; each node gets the cut it would get alone): O(n·d² + n·d log n) per level, O(log δ) levels, plus
    ``_columns``'s O(n log n) per level and ``decompose`` per other leaf node.
    """
    V = entries[0].shape[1] if entries else 0
    value = value.copy()
    groups = np.empty(len(X), dtype=np.int64)
    shape = {}
    for b in np.unique(bucket).tolist():
        e = entries[b]
        same = (e[:, None, :] == e[None, :, :]).all(axis=2)  # block: the first entry with the same values
        shape[b] = (len(e), same.argmax(axis=1), (same | ~(e[:, None, :] & e[None, :, :]).any(axis=2)).all())
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.unique(bucket))
    pending = list(zip(np.unique(bucket).tolist(), np.split(order, bounds[1:]), strict=True))
    done = 0
    while pending:
        by_size: dict[tuple[int, int], list[int]] = {}
        for i, (b, node) in enumerate(pending):
            by_size.setdefault((shape[b][0], len(node)), []).append(i)
        cuts = level_cuts(X, entry, value, [(shape[b][0], node) for b, node in pending], V)
        level, pending, leaves = pending, [], []
        for (s, size), members in by_size.items():
            for i in members:
                (b, node), cut = level[i], cuts[i]
                if cut is not None:
                    pending += [(b, cut[0]), (b, cut[1])]
                else:
                    leaves.append((b, node, size // s))
        done = _leaf_groups(leaves, X, entry, value, shape, entries, rng, groups, done)
    return groups, value


def _leaf_groups(leaves, X, entry, value, shape, entries, rng, groups, done):
    """The QI groups of the leaf nodes of one level of ``split_overlapping`` (``leaves``: (bucket, row ids, δ)
    each, in the order they are numbered), written to ``groups`` from label ``done`` on, δ labels per node; open
    counterfeits get their values in ``value``. Nodes of a bucket of pairwise equal or disjoint entries
    (``shape[b][2]``) take their open counterfeits' values first, node by node in order, all nodes in one call
    (``_open_values``, the only use of ``rng`` here), then are decomposed all at once (``_columns``); the others
    one by one by ``decompose`` in QI order (counterfeits last). Returns the next free label. O(n log n) for the
    n rows of the leaves plus ``decompose``'s per other node."""
    if not leaves:
        return done
    V = entries[0].shape[1]
    deltas = np.array([delta for _, _, delta in leaves], dtype=np.int64)
    first = done + np.cumsum(deltas) - deltas
    blocky = [bool(shape[b][2]) for b, _, _ in leaves]
    for (b, node, _), mine, start in zip(leaves, blocky, first.tolist(), strict=True):
        if not mine:
            known = ~np.isnan(X[node]).any(axis=1)
            part = decompose(entry[node], value[node], np.lexsort((*X[node].T[::-1], ~known)), shape[b][0], V)
            groups[node] = start + part
    chosen = np.flatnonzero(blocky)
    if len(chosen):
        nodes = [leaves[i][1] for i in chosen.tolist()]
        rows = np.concatenate(nodes)
        leaf = np.repeat(np.arange(len(nodes)), [len(node) for node in nodes])
        kinds, which = np.unique([leaves[i][0] for i in chosen.tolist()], return_inverse=True)
        sizes = np.array([shape[b][0] for b in kinds.tolist()], dtype=np.int64)
        offset = (np.cumsum(sizes) - sizes)[which.reshape(-1)][leaf] + entry[rows]  # per row: (bucket, entry)
        block = np.concatenate([shape[b][1] for b in kinds.tolist()])[offset]  # its entry's first equal entry
        sets = np.concatenate([entries[b] for b in kinds.tolist()])  # (bucket, entry) -> its values
        value[rows] = _open_values(leaf, value[rows], offset - entry[rows] + block, sets, deltas[chosen], rng)
        groups[rows] = first[chosen][leaf] + _columns(X[rows], value[rows], block, leaf, deltas[chosen])
    return done + int(deltas.sum())


def _open_values(leaf, value, block, sets, deltas, rng):
    """Leaf nodes of δ groups (``leaf``: per row its node 0.., rows grouped by node in the order the nodes are
    numbered; ``deltas``: δ per node) of buckets whose entries are pairwise equal or disjoint: each open
    counterfeit (``value`` -1) takes a value of its entry that has fewer than δ records in its node, so that every
    value stays at most δ times (§V-C's last paragraph). ``block``: per row its entry's first equal entry, as a row
    of ``sets`` (the value sets, (entries, V) bool). Node by node in order, block by block (ascending), the open
    counterfeits of the block (in row order) take the first of a permutation drawn with ``rng`` of the pool of
    free values (each value of the block, ascending, repeated as often as it has room in the node): the draws of
    one node at a time (``rng.permutation(pool)`` is ``pool[rng.permutation(len(pool))]``, the same draws), here
    one ``rng.permutation`` call per (node, block) with open counterfeits and every pool built at once (blocks of
    one node hold disjoint values, so one block's draws leave another's room as it was). Returns the values.
    O(n + nodes·V) numpy work plus one Python step per (node, block) with open counterfeits."""
    value = value.copy()
    open_ = np.flatnonzero(value < 0)
    if not len(open_):
        return value
    V, E = sets.shape[1], len(sets)
    known = np.flatnonzero(value >= 0)
    counts = np.bincount(leaf[known] * V + value[known], minlength=len(deltas) * V).reshape(len(deltas), V)
    key = leaf[open_] * E + block[open_]
    order = np.argsort(key, kind="stable")  # by node, then block, then row
    open_, key = open_[order], key[order]
    pairs, start, need = np.unique(key, return_index=True, return_counts=True)
    node, kind = np.divmod(pairs, E)
    room = sets[kind] * (deltas[node][:, None] - counts[node])  # (pairs, V): free places of each value
    length = room.sum(axis=1)
    pool = np.repeat(np.tile(np.arange(V), len(pairs)), room.reshape(-1))  # per pair its values, ascending
    base = np.cumsum(length) - length
    picks = np.empty(len(open_), dtype=np.int64)
    for p, (at, k, n, b) in enumerate(zip(start.tolist(), need.tolist(), length.tolist(), base.tolist(),
                                           strict=True)):
        drawn = rng.permutation(n)[:k]
        if len(drawn) < k:
            raise RuntimeError(f"_open_values: {k} open counterfeits but {n} free places in pool {p}")
        picks[at: at + k] = b + drawn
    value[open_] = pool[picks]
    return value


def _columns(X, value, block, leaf, deltas):
    """Leaf nodes (``leaf``: per row its node, 0..; ``deltas``: δ per node) of buckets whose entries are pairwise
    equal or disjoint, with every value known, each decomposed into δ groups: the records of each block of equal
    entries (``block``: per row, its entry's first equal entry) of a node, sorted by value, then QI order (rows
    with a NaN QI, counterfeits, last; then by QI 0, 1, ...; then row order), go to groups 0, 1, ..., δ-1 in turn,
    so that the (at most δ) records of a value land in different groups and every group has one record per
    entry (equal entries are interchangeable). Returns the group (0..δ-1 of its node) per row. All nodes at once:
    two sorts, O(n log n)."""
    known = ~np.isnan(X).any(axis=1)
    order = np.lexsort((*X.T[::-1], ~known, leaf))  # each node's QI order
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ordered = np.lexsort((rank, value, block, leaf))
    position = np.empty(len(order), dtype=np.int64)
    position[ordered] = np.arange(len(order))
    key = leaf * (int(block.max(initial=0)) + 1) + block
    start = np.searchsorted(key[ordered], key)
    return (position - start) % deltas[leaf]


def generate_groups(
    Xn: np.ndarray, codes: np.ndarray, assigned: tuple[np.ndarray, np.ndarray, np.ndarray], buckets: Buckets,
    C: np.ndarray, strict: bool, m: int, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Balancing and §V-C: the QI group of every record and of every counterfeit, and each counterfeit's values.

    ``assigned``: ``assign_records``'s result. A bucket of pairwise disjoint entries gets δ - |e| counterfeits in
    each entry e (δ its largest entry; F_max <= δ holds by disjointness) and is split, with the records of no
    bucket (``new_buckets``), by ``kernels.split.split`` with eq. 4's score: the entry plays the value's part, so
    every cut keeps both halves balanced, and a half's F_max never exceeds its entries' size. A bucket of
    overlapping entries gets δ = max(F_max, |e_i|) and is cut by ``split_overlapping``: when its entries are
    pairwise equal or disjoint (the CUSs of a partition, some repeated) its δ - |e| counterfeits per entry stay
    open until their group is made, otherwise ``balance_overlapping`` gives them values first.

    Returns ``(group per record, group per counterfeit, (counterfeits, V) bool: the values each may take)``; group
    labels are arbitrary integers. Raises NotPublishable when new records need m keys and ``strict`` leaves
    fewer. Cost: ``split``'s O(n·d²) per level plus ``split_overlapping``'s on the buckets of overlapping entries.
    """
    bucket, entry, cnt = assigned
    n, V = len(codes), C.shape[0]
    B = len(buckets.entries)
    sizes = np.array([len(e) for e in buckets.entries], dtype=np.int64)
    used = cnt.sum(axis=1) > 0
    plain = used & buckets.disjoint
    rows = np.flatnonzero(bucket >= 0)
    rows = rows[plain[bucket[rows]]]
    short = (cnt.max(axis=1, initial=0)[:, None] - cnt) * (np.arange(cnt.shape[1])[None, :] < sizes[:, None])
    short *= plain[:, None]
    fb, fe = np.nonzero(short)
    fb, fe = np.repeat(fb, short[fb, fe]), np.repeat(fe, short[fb, fe])
    parts_x, parts_value, parts_bucket = [Xn[rows], np.full((len(fb), Xn.shape[1]), np.nan)], [entry[rows], fe], [
        bucket[rows], fb]
    fake_sets = [np.stack([buckets.entries[b][e] for b, e in zip(fb.tolist(), fe.tolist(), strict=True)])
                 if len(fb) else np.zeros((0, V), dtype=bool)]
    lone = np.flatnonzero(bucket < 0)
    if len(lone):
        classes = classes_of(C, strict)
        K = int(classes.max()) + 1
        if K < m:
            raise NotPublishable(
                f"m-Distinct' (strict) groups new records by values of pairwise disjoint CUSs, but the update sets "
                f"leave {K} disjoint classes of the {V} sensitive values for m={m}; lower m, or set strict: false"
            )
        nb, fkeys = new_buckets(classes[codes[lone]], K, m, rng)
        parts_x += [Xn[lone], np.full((len(fkeys), Xn.shape[1]), np.nan)]
        parts_value += [classes[codes[lone]], fkeys]
        parts_bucket += [B + nb[: len(lone)], B + nb[len(lone):]]
        fake_sets.append(classes[None, :] == fkeys[:, None])
    labels = split(np.vstack(parts_x), np.concatenate(parts_value), np.concatenate(parts_bucket),
                                relative=True)
    # the rows were: plain buckets' records, their counterfeits, then the lone records and theirs
    genuine = np.zeros(len(labels), dtype=bool)
    genuine[: len(rows)] = True
    genuine[len(rows) + len(fb): len(rows) + len(fb) + len(lone)] = True
    groups = np.full(n, -1, dtype=np.int64)
    groups[np.concatenate([rows, lone])] = labels[genuine]
    fake_groups, sets = [labels[~genuine]], [np.concatenate(fake_sets)]
    offset = int(labels.max(initial=-1)) + 1
    members = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[members], np.arange(B + 1))
    blocky = [((e[:, None, :] == e[None, :, :]).all(axis=2) | ~(e[:, None, :] & e[None, :, :]).any(axis=2)).all()
              for e in buckets.entries]  # entries pairwise equal or disjoint: CUSs of a partition, repeated
    parts: dict[str, list[np.ndarray]] = {"x": [], "entry": [], "value": [], "bucket": [], "record": []}
    for b in np.flatnonzero(used & ~buckets.disjoint).tolist():
        mine = members[bounds[b]: bounds[b + 1]]
        counts = np.zeros((sizes[b], V), dtype=np.int64)
        np.add.at(counts, (entry[mine], codes[mine]), 1)
        if blocky[b]:  # counterfeits stay open until their group is made (§V-C's last paragraph)
            short = int(max(counts.sum(axis=1).max(), counts.sum(axis=0).max())) - counts.sum(axis=1)
            xe = np.repeat(np.arange(sizes[b]), short)
            xv = np.full(len(xe), -1, dtype=np.int64)
        else:
            extra = balance_overlapping(buckets.entries[b], counts, rng)
            xe, xv = np.nonzero(extra)
            xe, xv = np.repeat(xe, extra[xe, xv]), np.repeat(xv, extra[xe, xv])
        parts["x"] += [Xn[mine], np.full((len(xe), Xn.shape[1]), np.nan)]
        parts["entry"] += [entry[mine], xe]
        parts["value"] += [codes[mine], xv]
        parts["bucket"].append(np.full(len(mine) + len(xe), b))
        parts["record"] += [mine, np.full(len(xe), -1)]
    if parts["x"]:
        record = np.concatenate(parts["record"])
        cut, final = split_overlapping(np.vstack(parts["x"]), np.concatenate(parts["entry"]),
                                       np.concatenate(parts["value"]), np.concatenate(parts["bucket"]),
                                       buckets.entries, rng)
        groups[record[record >= 0]] = offset + cut[record >= 0]
        fake_groups.append(offset + cut[record < 0])
        sets.append(np.eye(V, dtype=bool)[final[record < 0]])
    return groups, np.concatenate(fake_groups), np.concatenate(sets)
