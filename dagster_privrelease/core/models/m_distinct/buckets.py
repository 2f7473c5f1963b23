"""Phase 1 of m-Distinct (Li-Zhou §V-A, Algorithm 2): the update set signatures (Def. 13) of the previous groups,
one bucket per distinct signature, then for every two intersectable buckets their highest-scored intersection.

- Entries of a bucket are *sets of values* (a CUS, or the intersection of two); "bucket B_new does not exist" means
  no bucket has the same multiset of entries.
- The score of an intersection plan (Algorithm 2 line 9, "the higher proportion of the overlapped elements") is the
  sum of the Jaccard proportions |a ∩ b| / |a ∪ b| of the paired CUSs, maximised over the one-to-one maps by the
  Hungarian method. A plan whose entries admit no system of distinct representatives can never form a group of
  distinct values and is not created.
- A record may take an entry only when some group of the bucket could hold it there (the entry and the record's
  value extend to distinct representatives of all entries, ``allowed_pairs``). With pairwise disjoint entries
  (always under ``strict``) or copies of the CUSs of a partition that is just "t[S] ∈ e"; with overlapping CUSs it
  keeps the bucket splittable, which the paper's §V-C takes for granted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import NotPublishable
from ...encoding import rank_keys, unique_keys
from ...spec import BoundSpec
from ..kernels.hosts import LastGroups


def linear_sum_assignment(*args, **kwargs):
    """``scipy.optimize.linear_sum_assignment``, imported on first use: importing scipy.optimize costs about 0.5 s
    of CPU, which loading the package (the CLI, the code location) must not pay for a model it may not run."""
    from scipy.optimize import linear_sum_assignment as solve

    return solve(*args, **kwargs)


def previous_signatures(
    last: LastGroups, spec: BoundSpec, C: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The update set signature (Def. 13) of the group that last hosted each record (``last``: in T*(n-1), or for
    a record coming back after an absence in the release that last published it; Def. 15 binds a record's
    candidate sensitive set to the USS of its previous version, whenever it was published).

    Returns ``(prev_uss, signatures)``: ``prev_uss[i]`` indexes ``signatures`` (-1 for a record never published),
    each signature the sorted tuple of the group's rows' values, counterfeits included, each value
    replaced by the first value with the same CUS, so that groups of one USS share one signature. Raises
    NotPublishable when such a group has fewer than m values (m raised on a running history). The groups'
    signatures are numbered by one unique of their rows (sorted, padded; each row one mixed-radix key,
    ``encoding.rank_keys``): O(rows of the groups log + V³ + groups · size log groups), no Python loop over
    groups.
    """
    m = int(spec.model.params["m"])
    hosted = last.host[last.host >= 0]
    needed = np.zeros(len(last.group_ids), dtype=bool)
    needed[hosted] = True
    keep = needed[last.row_group]
    codes = (C[:, None, :] == C[None, :, :]).all(axis=2).argmax(axis=1)[last.codes]  # a value stands for every value of the same CUS (one USS)
    order = np.lexsort((codes[keep], last.row_group[keep]))
    g, v = last.row_group[keep][order], codes[keep][order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, len(g)])
    small = np.flatnonzero(sizes < m)
    if len(small):
        first = g[starts[small[0]]]
        raise NotPublishable(
            f"group {int(last.group_ids[first])} of release {int(last.release_ids[first])} has "
            f"{int(sizes[small[0]])} row(s), fewer than m={m}; its records keep its size (Def. 14 (1)), so m cannot "
            f"be raised on a running history: keep m at most the previous release's m"
        )
    rows = np.full((len(starts), int(sizes.max(initial=0))), -1, dtype=np.int64)  # one padded row per group
    rows[np.repeat(np.arange(len(starts)), sizes), np.arange(len(g)) - np.repeat(starts, sizes)] = v
    V = C.shape[0]  # a row as one int64 key: mixed radix V + 1, the pad -1 as digit 0 (re-ranked past 62 bits)
    _, first, inverse, _ = unique_keys(rank_keys(rows + 1, [V + 1] * rows.shape[1]))
    distinct = rows[first]
    rank = np.empty(len(first), dtype=np.int64)  # the signatures numbered in the order of their first group
    rank[np.argsort(first)] = np.arange(len(first))
    index = np.full(len(last.group_ids), -1, dtype=np.int64)
    index[g[starts]] = rank[inverse.reshape(-1)]
    prev_uss = np.full(len(last.host), -1, dtype=np.int64)
    prev_uss[last.host >= 0] = index[hosted]
    return prev_uss, [tuple(row[row >= 0].tolist()) for row in distinct[np.argsort(first)]]


# ------------------------------------------------------------------------------- phase 1: create buckets


@dataclass
class Buckets:
    """The bucket queue Q_buc of Algorithm 2: each bucket is identified by its USS, a multiset of entries.

    entries:  per bucket, an (s, V) bool matrix, row k the value set of entry k (a CUS or an intersection).
    allowed:  per bucket, an (s, V) bool matrix: a record of value v may take entry k (``allowed_pairs``).
    implied:  per signature of ``previous_signatures`` (row), the buckets it implies (§V-B: USS(t_pre) ⊇ USS(B)).
    disjoint: per bucket, its entries are pairwise disjoint.
    copy_of:  per bucket, (s,) the first entry with the same value set as each entry (a CUS repeated in the USS).
    """

    entries: list[np.ndarray]
    allowed: list[np.ndarray]
    implied: np.ndarray
    disjoint: np.ndarray
    copy_of: list[np.ndarray]


def _key(entries: np.ndarray) -> tuple[bytes, ...]:
    """A bucket's identity: its multiset of entries."""
    return tuple(sorted(np.packbits(row).tobytes() for row in entries))


def _perfect(mask: np.ndarray) -> bool:
    """Whether the bipartite graph ``mask`` (rows x columns, rows <= columns) matches every row."""
    if not mask.any(axis=1).all():
        return False
    rows, cols = linear_sum_assignment(mask, maximize=True)
    return bool(mask[rows, cols].all()) and len(rows) == mask.shape[0]


def allowed_pairs(entries: np.ndarray) -> np.ndarray:
    """(s, V) bool: entry k may hold value v when v ∈ entry k and the other entries have distinct representatives
    other than v (v on entry k extends to a group of distinct values, Def. 14 with m-uniqueness). For pairwise
    disjoint entries this is ``entries``. O(s·V) matchings of s x V for overlapping entries."""
    if (entries.sum(axis=0) <= 1).all():
        return entries.copy()
    out = np.zeros_like(entries)
    for k, v in zip(*np.nonzero(entries), strict=True):
        rest = np.delete(entries, k, axis=0)
        rest[:, v] = False
        out[k, v] = _perfect(rest) if len(rest) else True
    return out


def create_buckets(signatures: list[tuple[int, ...]], C: np.ndarray) -> Buckets:
    """Algorithm 2: one bucket per distinct USS of the previous groups (lines 2-6; ``signatures`` in the order of
    their first record), then for every two buckets i < j with intersectable USS (same size, a one-to-one map of
    their CUSs with non-empty intersections) a bucket of their highest-scored intersection plan, unless a bucket of
    that USS exists (lines 7-13). Score: the sum of |a ∩ b| / |a ∪ b| over the paired CUSs (module docstring).

    Also computes which buckets each signature implies (USS(t_pre) ⊇ USS(B): a one-to-one map with every entry
    of B inside its image, §V-B) and the allowed (entry, value) pairs. Cost O(B²·s²·V) for the pairs of the B
    phase-1 buckets of size s (the paper's lines 7-12), plus one s x s Hungarian matching per intersectable pair.
    """
    entries = [C[list(sig)] for sig in signatures]
    known = {_key(e): b for b, e in enumerate(entries)}
    source = len(entries)
    sizes = np.array([len(sig) for sig in signatures], dtype=np.int64)
    for s in np.unique(sizes):
        members = np.flatnonzero(sizes == s)
        if len(members) < 2:
            continue
        stack = np.stack([entries[b] for b in members]).astype(np.int32)  # (n, s, V)
        for at, i in enumerate(members[:-1]):
            others = members[at + 1:]
            inter = np.einsum("av,jbv->jab", stack[at], stack[at + 1:])
            meet = inter > 0
            possible = meet.any(axis=2).all(axis=1) & meet.any(axis=1).all(axis=1)
            for j, overlap in zip(others[possible], inter[possible], strict=True):
                union = entries[i].sum(axis=1)[:, None] + entries[j].sum(axis=1)[None, :] - overlap
                score = np.where(overlap > 0, overlap / union, -np.inf)
                rows, cols = linear_sum_assignment(np.where(np.isfinite(score), score, -1e9), maximize=True)
                if not np.isfinite(score[rows, cols]).all():
                    continue
                plan = entries[i][rows] & entries[j][cols]
                key = _key(plan)
                if key in known or not _perfect(plan):
                    continue
                known[key] = len(entries)
                entries.append(plan)
    implied = np.zeros((source, len(entries)), dtype=bool)
    implied[np.arange(source), np.arange(source)] = True
    every = np.array([len(e) for e in entries], dtype=np.int64)
    for s in np.unique(sizes):
        olds, alls = np.flatnonzero(sizes == s), np.flatnonzero(every == s)
        outside = (~np.stack([entries[b] for b in olds])).astype(np.int32)  # (B1, s, V): values not in a CUS
        mine = np.stack([entries[b] for b in alls]).astype(np.int32)  # (B, s, V)
        # inside[i, j, a, k]: entry k of bucket alls[j] lies in CUS a of signature olds[i]
        inside = np.einsum("iav,jkv->ijak", outside, mine) == 0
        maybe = inside.any(axis=2).all(axis=2) & inside.any(axis=3).all(axis=2)
        for i, j in zip(*np.nonzero(maybe), strict=True):
            if olds[i] != alls[j]:
                implied[olds[i], alls[j]] = _perfect(inside[i, j].T)
    disjoint = np.array([(e.sum(axis=0) <= 1).all() for e in entries], dtype=bool)
    copy_of = [(e[:, None, :] == e[None, :, :]).all(axis=2).argmax(axis=1) for e in entries]
    return Buckets(entries, [allowed_pairs(e) for e in entries], implied, disjoint, copy_of)
