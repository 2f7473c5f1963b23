"""m-Distinct: re-publication of a fully dynamic table (Li & Zhou, "Challenging More Updates: Towards Anonymous
Re-publication of Fully Dynamic Datasets", /work/shared/papers/li-zhou-m-distinct.txt).

A fully dynamic table (Def. 5) changes by *external updates* (insertions and deletions, Def. 1) and *internal
updates* (a record's QI and/or sensitive values change, Def. 2). Sensitive values do not change arbitrarily: the
*candidate update set* CUS(v) (Def. 12; spec parameter ``update_sets``) lists the values v may become, v included,
and is public (implicit background knowledge, Def. 7). A QI group's *update set signature* USS(g) is the multiset
of the CUS of its sensitive values (Def. 13, counterfeits included). A set of values is a *legal update instance*
of a USS (Def. 14) when it has |USS| values, each in some CUS of the USS, and every CUS of the USS holds one of them.
Releases are m-Distinct (Def. 15) when every release is m-unique and every record's candidate sensitive set in a
release is a legal update instance of its USS in its previous release: then the adversary's SUG (Defs. 10-11) keeps
at least m nodes in every layer (Lemma 3). m-Distinct' (§IV-B, ``strict: true``) also asks that the CUSs of the
group of a record's first release be pairwise disjoint (re-publication risk at most 1/m, Lemma 4).

Like m-invariance (Xiao-Tao Lemma 4), release n reads only T(n-1), T*(n-1) and the hosting groups (§IV-A: "we only
need the information of most recent versions of the records"). The algorithm is §V (Algorithm 1):

1. **Create buckets** (Algorithm 2, ``create_buckets``): one bucket per distinct USS of the previous groups of the
   records of T(n), then, for every two intersectable buckets, their highest-scored intersection.
2. **Assign records** (Algorithm 3, ``assign_records``): each record goes to the (bucket, entry) of highest score
   (eq. 3), the records with the fewest candidate buckets first. Records no bucket can take (always new ones) are
   grouped on their own into m-unique groups, with counterfeits where they are not m-eligible (``new_buckets``);
   buckets are balanced with counterfeits (every entry δ records).
3. **Generate QI groups** (§V-C, ``generate_groups``): every bucket is split recursively in two with the least
   split score (eq. 4) while both halves stay balanced and m-eligible (``m_invariance.split``, whose cut search is
   that of Xiao-Tao §4.3, with eq. 4's per-node normalisation; ``split_overlapping`` for buckets whose entries
   overlap); each counterfeit gets a value drawn from its entry's CUS, the groups are generalised
   (``release.build_release``) and R(n) counts the counterfeits per group.

The snapshot diff (``diff``) classifies T(n) against T(n-1) by id; an update of a sensitive value outside the CUS
of the old value is refused (``refuse_illegal_updates``): no release could hide it, since the adversary prunes
every path through it.

Where the paper leaves a choice open, this module decides as follows (each function's docstring says more):

- CUS(v) always holds v (Def. 12 calls CUS(a) the values a "has non-zero update probability to", and the paper
  treats "stay the same" as an update, e.g. Occupation "may stay the same" in §VI-A); a value without an entry in
  ``update_sets`` can only stay itself.
- Entries of a bucket are *sets of values* (a CUS, or the intersection of two); "bucket B_new does not exist" means
  no bucket has the same multiset of entries.
- The score of an intersection plan (Algorithm 2 line 9, "the higher proportion of the overlapped elements") is
  the sum of the Jaccard proportions |a ∩ b| / |a ∪ b| of the paired CUSs, maximised over the one-to-one maps by
  the Hungarian method. A plan whose entries admit no system of distinct representatives can never form a group
  of distinct values and is not created.
- A record may take an entry only when some group of the bucket could hold it there (the entry and the record's
  value extend to distinct representatives of all entries). With pairwise disjoint entries (always under
  ``strict``) or copies of the CUSs of a partition that is just "t[S] ∈ e"; with overlapping CUSs it keeps the
  bucket splittable, which the paper's §V-C takes for granted.
- eq. 3's Z is the product of the bucket's normalised QI extents, each plus ξ = 1e-3 so that λ is defined for a
  bucket that is a point or empty (λ = 1 for the first record of a bucket). ε is read literally: a record that
  raises δ gets ε = -1, also the first record of an empty bucket (δ = 0), which makes the greedy prefer buckets
  that already need it.
- Equal CNT_buc: records with one possible (bucket, entry) come first (their assignment is forced), then those
  choosing among copies of one CUS in one bucket, then the others in snapshot order. Equal scores: the first
  bucket of the queue, then the entry with fewer records (line 11).
- The split of §V-C picks, along one QI, the first k records of every entry for one child. With pairwise disjoint
  entries every such cut keeps both children balanced and m-eligible, and all buckets are cut at once by
  ``m_invariance.split`` (the entry in the value's place). With overlapping entries (a CUS repeated in a USS, or
  CUSs that overlap) only the cuts whose children have no value more than k (resp. δ - k) times are kept
  (``split_overlapping``); below ``LEAF`` records per entry, or when no cut is valid, a node is decomposed directly
  (König's edge-colouring theorem: balanced with F_max <= δ suffices). A counterfeit's value is drawn from its
  entry's CUS among the values its group leaves free (§V-C's last paragraph), uniformly for disjoint entries; for
  overlapping ones from the values with room left, so that the group can still take distinct values.
- A group made of counterfeits only is dropped: it hides nobody, and every other group stays a legal instance.
- Under ``strict``, new records are grouped by the connected components of the "CUSs overlap" relation (values in
  different components have disjoint CUSs); this is sufficient, and can ask for more components than a finer
  choice would.

Lifespans are one interval of releases (Def. 1): an id deleted and inserted again is a new record here.

Size: this module is over the ~500 lines a module of this package keeps to, because it holds the three phases
of §V (create buckets, assign records, split) and the refusals in one place while their shared state (entries,
update-set matrix, bucket tables) settles; the next step is a package with one module per phase.

Cost at 200k rows (Census-KDD resampled, m = 4, d = 10, -20k/+20k and 50k updates a release; CPU seconds of
``publish`` on a 2-core machine at load 11): release 2 took 5.05 s, now 3.8 s with the same output (bit for bit):
eq. 4's cut search batches the nodes of a level by entry count and δ (``_level_cuts``) and finds crowded cuts
from each value's occurrences instead of a (cut, value) table (``_crowded_cuts``); records whose choice is
among copies of one CUS are assigned by one sort per class (``_fill_copies``). What is left: the cut search
(about 2 s: the QI extents of every rank of every node), Algorithm 3's greedy for records that choose between
buckets (about 0.5 s, sequential as the paper's), the diff and the generalisation (0.2 s each).
Then (2026-11-24, ``benchmarks/bench_m_distinct.py``'s stream, load 4-9): the cut search sorts small-integer ranks
of the QI values (``sort_ranks``, a radix sort; the same permutation) and ``candidate_pairs`` finds its kinds by a
1-d unique (0.23 -> 0.04 s): release 2 3.0 -> 2.85 s (least of 9 runs each, the same output bit for bit over the
20 releases). Over the 20 releases the model's CPU follows the published rows (counterfeits: 15.6k at release
2, 78k at 14, 61k at 20; 215.6k / 261k rows at releases 2 / 20, 1.21x), not the history: only release n-1 is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, maximum_flow

from ...errors import NotPublishable, SpecError
from ..encoding import dense_ranks, dense_unique, encode, sensitive_codes
from ..judge.history import Bound
from ..judge.verifiers import verify_m_distinct
from ..release import PreviousRelease, Release, build_release
from ..spec import BoundSpec, Spec
from . import m_invariance, mondrian
from .base import ModelDescriptor, Param


def linear_sum_assignment(*args, **kwargs):
    """``scipy.optimize.linear_sum_assignment``, imported on first use: importing scipy.optimize costs about 0.5 s
    of CPU, which loading the package (the CLI, the code location) must not pay for a model it may not run."""
    from scipy.optimize import linear_sum_assignment as solve

    return solve(*args, **kwargs)

#: eq. 3: the floor added to every normalised extent of a bucket's QI box, so that λ = Z_aft / Z_bef is defined.
XI = 1e-3


# ------------------------------------------------------------------------------------------------ the spec


def check_update_sets(key: str, value: Any) -> None:
    """``model.update_sets``: a mapping value -> list of values (CUS, Def. 12) that is closed: b ∈ CUS(a) implies
    CUS(b) ⊆ CUS(a) (the note under Def. 12), each CUS holding its own value. SpecError naming the value."""
    for source, targets in value.items():
        if not isinstance(targets, list | tuple):
            raise SpecError(f"model.{key}.{source}: expected a list of sensitive values (CUS({source})), "
                            f"got {targets!r}")
    cus = closed_sets(value)
    for a in sorted(cus):
        for b in sorted(cus[a] - {a}):
            missing = sorted(cus.get(b, {b}) - cus[a])
            if missing:
                raise SpecError(
                    f"model.{key}.{a}: CUS({a!r}) holds {b!r} but not all of CUS({b!r}) (missing {missing}); "
                    f"Li-Zhou Def. 12: a value that can become {b!r} can become whatever {b!r} can, so add them to "
                    f"CUS({a!r}) or remove them from CUS({b!r})"
                )


def closed_sets(update_sets: Mapping[Any, Any]) -> dict[str, set[str]]:
    """CUS(v) of every value named as a key, as sets of strings, each holding v itself (Def. 12)."""
    return {str(a): {str(a), *(str(b) for b in targets)} for a, targets in update_sets.items()}


def check_spec(spec: Spec) -> None:
    """With a sensitive domain written in the spec, ``update_sets`` names values of that domain only."""
    domain = spec.sensitive_values
    if not spec.sensitive_written or domain is None:
        return
    named = {v for a, targets in closed_sets(spec.model.params["update_sets"]).items() for v in {a, *targets}}
    unknown = sorted(named - set(domain))
    if unknown:
        raise SpecError(f"model.update_sets: value(s) {unknown} are not in the sensitive domain of "
                        f"{spec.sensitive!r} ({list(domain)})")


def cus_matrix(spec: BoundSpec) -> np.ndarray:
    """(V, V) bool: ``C[a, b]`` is b ∈ CUS(a) over ``spec.sensitive_values`` (bound spec); a value without an entry
    can only stay itself. O(V² + size of update_sets)."""
    values = pd.Index(spec.sensitive_values)
    C = np.eye(len(values), dtype=bool)
    for a, targets in closed_sets(spec.model.params["update_sets"]).items():
        if a in values:
            at = values.get_indexer(sorted(targets))
            C[values.get_loc(a), at[at >= 0]] = True
    return C


# ------------------------------------------------------------------------------------------------ the diff


@dataclass(frozen=True)
class Changes:
    """T(n) against T(n-1) by id (Defs. 1-2).

    previous_row:      per row of T(n), the row of T(n-1) with the same id; -1 for an insertion.
    deleted:           how many ids of T(n-1) are not in T(n) (deletions).
    qi_updated:        per row of T(n), some QI value changed (Def. 2 (1)); False for an insertion.
    sensitive_updated: per row of T(n), the sensitive value changed (Def. 2 (2)); False for an insertion.
    """

    previous_row: np.ndarray
    deleted: int
    qi_updated: np.ndarray
    sensitive_updated: np.ndarray

    @property
    def inserted(self) -> np.ndarray:
        """Per row of T(n): an insertion (Def. 1 (2))."""
        return self.previous_row < 0

    @property
    def updated(self) -> np.ndarray:
        """Per row of T(n): an internal update (Def. 2)."""
        return self.qi_updated | self.sensitive_updated


def diff(before: pd.DataFrame, after: pd.DataFrame, spec: BoundSpec) -> Changes:
    """Insertions, deletions and internal updates turning the validated T(n-1) ``before`` into T(n) ``after``.
    One hash look-up of the ids, then one vectorised comparison per QI and the sensitive column. O(n·d)."""
    where = pd.Index(before[spec.id]).get_indexer(after[spec.id])
    old = np.flatnonzero(where >= 0)
    qi = np.zeros(len(after), dtype=bool)
    for name, attribute in spec.quasi_identifiers.items():
        kind = np.float64 if attribute.numeric else str
        was = before[name].to_numpy().astype(kind)[where[old]]
        qi[old] |= was != after[name].to_numpy().astype(kind)[old]
    sensitive = np.zeros(len(after), dtype=bool)
    was = before[spec.sensitive].astype(str).to_numpy()[where[old]]
    sensitive[old] = was != after[spec.sensitive].astype(str).to_numpy()[old]
    return Changes(where, len(before) - len(old), qi, sensitive)


def refuse_illegal_updates(before: pd.DataFrame, after: pd.DataFrame, changes: Changes, spec: BoundSpec,
                           C: np.ndarray) -> None:
    """NotPublishable when a record's sensitive value changed to a value outside CUS(old value) (Def. 12): the
    adversary, who knows the CUS, would prune every path of its SUG through the old value (Def. 11). The message
    names each (old, new) value pair and how many rows made it, never an id (the rows are private)."""
    rows = np.flatnonzero(changes.sensitive_updated)
    if not len(rows):
        return
    old = sensitive_codes(before.iloc[changes.previous_row[rows]], spec)
    new = sensitive_codes(after.iloc[rows], spec)
    bad = (old < 0) | ~C[np.maximum(old, 0), new]
    if not bad.any():
        return
    values = np.asarray(spec.sensitive_values, dtype=object)
    pairs = pd.DataFrame({"old": before[spec.sensitive].astype(str).to_numpy()[changes.previous_row[rows[bad]]],
                          "new": values[new[bad]]}).value_counts(sort=False).sort_index()
    listed = "; ".join(f"{a!r} -> {b!r} in {n} row(s)" for (a, b), n in pairs.items())
    raise NotPublishable(
        f"{int(bad.sum())} record(s) changed {spec.sensitive!r} to a value outside the candidate update set of the "
        f"old value (Li-Zhou Def. 12; model.update_sets): {listed}. No release can hide such an update from an "
        f"adversary who knows the CUS; add the new value to CUS(old value) if the update is possible, or correct "
        f"the source"
    )


# ------------------------------------------------------------------------------------ the previous release


def previous_signatures(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease, C: np.ndarray
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The update set signature (Def. 13) of each record's hosting group in T*(n-1).

    Returns ``(prev_uss, signatures)``: ``prev_uss[i]`` indexes ``signatures`` (-1 for a record not published in
    release n-1), each signature the sorted tuple of the group's rows' values, counterfeits included, each value
    replaced by the first value with the same CUS, so that groups of one USS share one signature. Raises
    NotPublishable when such a group has fewer than m values (m raised on a running history) or T*(n-1) published
    a value the domain no longer has. O(rows of T*(n-1) log + V²·V).
    """
    m = int(spec.model.params["m"])
    where = pd.Index(previous.hosting[spec.id]).get_indexer(snapshot[spec.id])
    old = where >= 0
    hosted = previous.hosting["group_id"].to_numpy()[where[old]]
    group_ids, row_group, hosted, codes = m_invariance.published_groups(previous, hosted, spec)
    needed = np.zeros(len(group_ids), dtype=bool)
    needed[hosted] = True
    keep = needed[row_group]
    codes = (C[:, None, :] == C[None, :, :]).all(axis=2).argmax(axis=1)[codes]  # a value stands for every value of the same CUS (one USS)
    order = np.lexsort((codes[keep], row_group[keep]))
    g, v = row_group[keep][order], codes[keep][order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, len(g)])
    small = np.flatnonzero(sizes < m)
    if len(small):
        raise NotPublishable(
            f"group {int(group_ids[g[starts[small[0]]]])} of release {previous.release_id} has "
            f"{int(sizes[small[0]])} row(s), fewer than m={m}; its records keep its size (Def. 14 (1)), so m cannot "
            f"be raised on a running history: keep m at most the previous release's m"
        )
    per_group = [tuple(part.tolist()) for part in np.split(v, starts[1:])]
    keys, index = {}, np.full(len(group_ids), -1, dtype=np.int64)
    for group, signature in zip(g[starts].tolist(), per_group, strict=True):
        index[group] = keys.setdefault(signature, len(keys))
    prev_uss = np.full(len(snapshot), -1, dtype=np.int64)
    prev_uss[old] = index[hosted]
    return prev_uss, list(keys)


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


# ------------------------------------------------------------------------------- phase 2: assign records


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
    choice changes the next scores).
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
    for t in rest[np.argsort(count[rest], kind="stable")].tolist():
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
    return out_b, out_e, cnt


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


# --------------------------------------------------------------------- records without a bucket, balancing


def classes_of(C: np.ndarray, strict: bool) -> np.ndarray:
    """The key by which new records are grouped (§V-B, §V-D): the value itself; under ``strict`` the connected
    component of the value in the "CUSs overlap" graph, so that a group of distinct components has pairwise
    disjoint CUSs (m-Distinct' condition 2). O(V³) for the overlap matrix."""
    if not strict:
        return np.arange(len(C))
    overlap = (C.astype(np.int64) @ C.T.astype(np.int64)) > 0
    return connected_components(csr_matrix(overlap), directed=False)[1]


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
    assignment (Fig. 3, ``m_invariance.buckets_of``) into balanced buckets of at least m distinct keys.

    Returns ``(bucket per record then per counterfeit, key per counterfeit)``. O(n log n)."""
    fakes = top_up(np.bincount(keys, minlength=K), m)
    every = np.concatenate([keys, fakes])
    buckets, _, _ = m_invariance.buckets_of(every, np.full(len(every), -1, dtype=np.int64),
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


# ------------------------------------------------------------------------------ phase 3: generate QI groups

#: ``split_overlapping`` cuts a node by eq. 4 while it has more than this many records per entry, then decomposes it.
LEAF = 8


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
    cut). A node with at most ``LEAF`` records per entry, or with no such cut, is decomposed: with entries pairwise
    equal or disjoint by ``_columns`` (which gives the open counterfeits their values), else by ``decompose`` in QI
    order (counterfeits last; their values were fixed by ``balance_overlapping``, since open ones could be left
    without a distinct value). Returns ``(group 0.. per row, value per row)``.
    The nodes of a level are cut in batches of one entry count and δ within a power of two, padded (``_level_cuts``,
    ``_best_overlapping_cuts``; each node gets the cut it would get alone): O(n·d² + n·d log n) numpy work per
    level, O(log δ) levels, plus ``_columns`` or ``decompose`` per leaf node.
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
    ranks = sort_ranks(np.vstack([X, np.full((1, X.shape[1]), np.nan)]))  # the QIs never change: once
    done = 0
    while pending:
        by_size: dict[tuple[int, int], list[int]] = {}
        for i, (b, node) in enumerate(pending):
            by_size.setdefault((shape[b][0], len(node)), []).append(i)
        cuts = _level_cuts(X, entry, value, [(shape[b][0], node) for b, node in pending], V, ranks)
        level, pending = pending, []
        for (s, size), members in by_size.items():
            delta = size // s
            for i in members:
                (b, node), cut = level[i], cuts[i]
                if cut is not None:
                    pending += [(b, cut[0]), (b, cut[1])]
                    continue
                known = ~np.isnan(X[node]).any(axis=1)
                qi_order = np.lexsort((*X[node].T[::-1], ~known))
                if shape[b][2]:
                    value[node], part = _columns(entry[node], value[node], qi_order, shape[b][1], entries[b], delta,
                                                 rng)
                else:
                    part = decompose(entry[node], value[node], qi_order, s, V)
                groups[node] = done + part
                done += delta
    return groups, value


def _columns(entry, value, order, block, entries, delta, rng):
    """A node of a bucket whose entries are pairwise equal or disjoint, decomposed into δ groups: each open
    counterfeit (value -1) takes a value of its entry that has fewer than δ records (drawn with ``rng``); then the
    records of each block of equal entries (``block``: per entry, the first equal one), sorted by value and QI
    ``order``, go to groups 0, 1, ..., δ-1 in turn, so that the (at most δ) records of a value land in different
    groups and every group has one record per entry (equal entries are interchangeable). Returns ``(value,
    group)`` per row. O(n log n + V)."""
    value = value.copy()
    V = entries.shape[1]
    open_ = np.flatnonzero(value < 0)
    if len(open_):
        room = delta - np.bincount(value[value >= 0], minlength=V)
        open_ = open_[np.argsort(block[entry[open_]], kind="stable")]
        blocks, first = np.unique(block[entry[open_]], return_index=True)
        for b, at, stop in zip(blocks.tolist(), first.tolist(), [*first[1:].tolist(), len(open_)], strict=True):
            pool = np.repeat(np.flatnonzero(entries[b]), room[entries[b]])
            value[open_[at:stop]] = rng.permutation(pool)[: stop - at]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ordered = np.lexsort((rank, value, block[entry]))
    position = np.empty(len(order), dtype=np.int64)
    position[ordered] = np.arange(len(order))
    start = np.searchsorted(block[entry][ordered], block[entry])
    return value, (position - start) % delta


#: ``_level_cuts`` batches nodes of one entry count whose δ share a power of two, at most this many slots at once.
BATCH_SLOTS = 1 << 18


def _level_cuts(X, entry, value, nodes, V, ranks=None):
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
    for (s, k), members in classes.items():
        per_batch = max(1, BATCH_SLOTS // (s * (1 << k) * max(d, 1) * max(d, 1)))
        for at in range(0, len(members), per_batch):
            batch = members[at:at + per_batch]
            for i, cut in zip(batch, _best_overlapping_cuts(Xa, entry, va, [nodes[i][1] for i in batch], s, V,
                                                                 ranks),
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
    in a difference array. O(n·d log n) for the n rows, not O(n·d·V / s)."""
    N, d, s, D = at.shape
    i, q, _, rank = np.nonzero(at >= 0)
    group = (i * d + q) * V + at[i, q, _, rank]
    order = np.lexsort((rank, group))
    i, q, rank, group = i[order], q[order], rank[order], group[order]
    start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    size = np.diff(np.r_[start, len(group)])
    j = np.arange(len(group)) - np.repeat(start, size) + 1
    top = np.repeat(size, size) - j + 1
    lo = np.maximum(np.concatenate([rank + 1, deltas[i] - top + 1]), 1)  # cuts are k = 1..D-1
    hi = np.minimum(np.concatenate([j - 1, rank]), D - 1)
    keep = lo <= hi
    row = np.concatenate([i * d + q, i * d + q])[keep]
    marks = np.bincount(row * (D + 1) + lo[keep], minlength=N * d * (D + 1))
    marks -= np.bincount(row * (D + 1) + hi[keep] + 1, minlength=N * d * (D + 1))
    return (np.cumsum(marks.reshape(N, d, D + 1), axis=2) > 0)[:, :, 1:D]


def _best_overlapping_cuts(Xa, entry, va, nodes, s, V, ranks=None):
    """For each node (row ids, s entries of δ_i rows each), the (left rows, right rows) of the least eq. 4 score
    among the valid cuts of ``split_overlapping``, or None. ``Xa``, ``va``: the QIs and values of the rows, then of
    the pad row (NaN, -1); ``va`` -1 marks an open counterfeit, which counts in no value. The nodes are padded to the largest δ with a row of no value and NaN QIs, sorted last along every
    QI, and every cut at or past a node's own δ is invalid; so each node's cut is the one it gets alone. ``ranks``
    (``sort_ranks(Xa)``, optional): the same order as small integers, sorted by radix where δ_max >= ``RADIX_FROM``
    (the same permutation: a stable sort of order-equivalent keys). All nodes and QIs at once:
    O(N·δ_max·s·d² + N·d·δ_max·V) numpy work for N nodes."""
    N, d, n = len(nodes), Xa.shape[1], len(Xa) - 1
    deltas = np.array([len(node) // s for node in nodes], dtype=np.int64)
    D = int(deltas.max())
    ks = np.arange(1, D)
    flat = np.concatenate(nodes)
    owner = np.repeat(np.arange(N), deltas * s)
    order = np.lexsort((entry[flat], owner))  # stable: each node's rows by entry, in the node's order
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
            key = np.where(pad, np.inf, np.nan_to_num(Xa[slots, q], nan=-np.inf, posinf=np.inf))
        R[:, q] = np.take_along_axis(slots, np.argsort(key, axis=2, kind="stable"), axis=2)
    own = deltas[:, None, None]
    valid = ~_crowded_cuts(va[R], deltas, V) & (ks < own)
    XR = Xa[R]  # (N, d, s, D, d); a half's extreme is the running extreme over ranks of each rank's extreme
    high, low = np.fmax.reduce(XR, axis=2), np.fmin.reduce(XR, axis=2)
    full = np.nan_to_num(np.fmax.reduce(high[:, 0], axis=1) - np.fmin.reduce(low[:, 0], axis=1))
    full = np.where(full > 0, full, np.inf)[:, None, None, :]
    left = np.fmax.accumulate(high, axis=2) - np.fmin.accumulate(low, axis=2)
    right = (np.fmax.accumulate(high[:, :, ::-1], axis=2) - np.fmin.accumulate(low[:, :, ::-1], axis=2))[:, :, ::-1]
    l_ext = (np.nan_to_num(left[:, :, :-1]) / full).sum(axis=3)
    r_ext = (np.nan_to_num(right[:, :, 1:]) / full).sum(axis=3)
    score = np.where(valid, s * (ks * l_ext + (own - ks) * r_ext), np.inf).reshape(N, -1)
    lowest = score.min(axis=1, keepdims=True)
    tie = score <= lowest + 1e-9 * (1 + lowest)
    even = np.tile(np.abs(2 * ks[None, :] - deltas[:, None]), (1, d))
    q, k = np.divmod(np.argmin(np.where(tie, even, 2 * D + 1), axis=1), max(D - 1, 1))
    return [(R[i, q[i], :, : k[i] + 1].ravel(), R[i, q[i], :, k[i] + 1: deltas[i]].ravel())
            if np.isfinite(lowest[i, 0]) else None for i in range(N)]


def generate_groups(
    Xn: np.ndarray, codes: np.ndarray, assigned: tuple[np.ndarray, np.ndarray, np.ndarray], buckets: Buckets,
    C: np.ndarray, strict: bool, m: int, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Balancing and §V-C: the QI group of every record and of every counterfeit, and each counterfeit's values.

    ``assigned``: ``assign_records``'s result. A bucket of pairwise disjoint entries gets δ - |e| counterfeits in
    each entry e (δ its largest entry; F_max <= δ holds by disjointness) and is split, with the records of no
    bucket (``new_buckets``), by ``m_invariance.split`` with eq. 4's score: the entry plays the value's part, so
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
    labels = m_invariance.split(np.vstack(parts_x), np.concatenate(parts_value), np.concatenate(parts_bucket),
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


def publish(snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator) -> Release:
    """Model ``m_distinct``: T*(n) and R(n) of the validated ``snapshot`` T(n) under the bound ``spec`` (§V,
    Algorithm 1).

    ``previous``: release n-1 (T(n-1), T*(n-1), hosting; §IV-A), None for the first release, which is the same
    algorithm with no bucket (every record new). Raises NotPublishable for an update outside the CUS of the old
    value (``refuse_illegal_updates``), for a previous group of fewer than m rows (m raised on a running history),
    and under ``strict`` when the update sets leave fewer than m disjoint classes. Deterministic given ``rng``.
    Cost: O(n·d) diff, Algorithm 2's O(B²·s²·V) over the B distinct previous signatures, Algorithm 3's sequential
    loop over the records with a choice of bucket or entry (O(their candidate pairs · d) each), then ``split``'s
    O(n·d²) per level; independent of n's release number (only release n-1 is read).
    """
    m = int(spec.model.params["m"])
    strict = bool(spec.model.params.get("strict", False))
    C = cus_matrix(spec)
    codes = sensitive_codes(snapshot, spec)
    if previous is None:
        prev_uss, signatures = np.full(len(snapshot), -1, dtype=np.int64), []
    else:
        changes = diff(previous.snapshot, snapshot, spec)
        refuse_illegal_updates(previous.snapshot, snapshot, changes, spec, C)
        prev_uss, signatures = previous_signatures(snapshot, spec, previous, C)
    X = encode(snapshot, spec)
    Xn = m_invariance.normalised(X, spec, mondrian.domain_widths(X, spec))
    buckets = create_buckets(signatures, C)
    assigned = assign_records(buckets, candidate_pairs(buckets, prev_uss, codes, strict), codes, Xn)
    groups, fake_groups, fake_sets = generate_groups(Xn, codes, assigned, buckets, C, strict, m, rng)
    kept = np.isin(fake_groups, groups)  # a group of counterfeits only hides nobody (module docstring)
    fake_groups, fake_sets = fake_groups[kept], fake_sets[kept]
    _, dense = dense_unique(np.concatenate([groups, fake_groups]))
    groups, fake_groups = m_invariance.number_groups(X, dense[: len(groups)], dense[len(groups):])
    drawn = np.argmax(fake_sets * (1.0 + rng.random(fake_sets.shape)), axis=1)
    values = np.asarray(spec.sensitive_values, dtype=object)
    counterfeits = pd.DataFrame({"group_id": fake_groups, spec.sensitive: values[drawn]})
    return build_release(snapshot, groups, spec, rng, counterfeits=counterfeits, categorical="interval", X=X)


MODEL = ModelDescriptor(
    name="m_distinct",
    paper="Li & Zhou, m-Distinct (§IV Defs. 12-15, §V Algorithms 1-3: create buckets, assign records, split)",
    params={
        "m": Param(int, 2, help="every group has m records with pairwise different sensitive values"),
        "update_sets": Param(dict, default={}, check=check_update_sets,
                             help="candidate update set of every sensitive value: {value: [values it may become]}; "
                                  "a value not listed can only stay itself"),
        "strict": Param(bool, default=False),
    },
    publish=publish,
    verify=verify_m_distinct,
    bound=lambda params: Bound(values=int(params["m"]), tuples=int(params["m"])),
    diversity_param="m",
    reads="previous",
    check_spec=check_spec,
    skipped_attacks={
        name: "it assumes a sensitive value never changes across releases; m_distinct publishes internal updates "
              "(Li-Zhou Defs. 1-2), whose adversary is the SUG attack (§III), run instead"
        for name in ("intersection", "equivalence")
    },
)
