"""TDS4SA, Top-Down Specialization for Sequential Anonymization (Wang-Fung §5, Algorithm 1).

Line 1 generalises every generalisation attribute A_j ∈ X1 = X ∩ att(T1) to its top value (the taxonomy root of
a categorical attribute, one interval of a continuous one). Lines 2-6 repeatedly specialise the winner w of
``Score(v) = InfoGain(v) / (PrivLoss(v) + 1)`` (eq. 1) among the *valid* candidates v of ∪Cut_j, a candidate being
valid when the join specialised by v still satisfies the (X, Y)-privacy requirement. By anti-monotonicity
(Corollary 4.1) a violated requirement stays violated under every further specialisation, so the loop stops when
no valid candidate is left, and the result is a maximally specialised T1; by Corollary 4.2 the requirement is
satisfiable at all iff the most generalised T1 satisfies it, which is checked first (``NotPublishable``).

Efficiency as §5.3-5.4: ``Link[v]`` (``Candidate.records``) gives the T1 records generalised to v, the only
records ever read (Line 4, Step 1); the join statistics are kept in the X-tree (``join.JoinStatistics``) of x
values, updated by removing the x values that hold w and adding those of w's specialised partitions (Step 2).
With several earlier releases the X-tree stacks the rows of every join kept valid (``join.Joins``: T1 with each
earlier release alone); each row holds one value of every Cut_j, so the same update and scoring apply to all of
them at once.
Each candidate keeps the X-tree rows its specialisation would produce, recomputed only when the winner's
specialisation touched a record of ``Link[v]``; with those rows ``A_Y(X_v)`` (or ``L_Y(X_v)``) is the extreme
of the specialised rows and of the rows that do not hold v (the other values of v's attribute), so Line 5 never
performs a specialisation to score it.

Choices where the paper leaves room:

- InfoGain (§5.2): ``class``, eq. 2 (reduction of the class entropy of T1[v]); ``distortion``, eq. 3
  (``|T1[v]|`` for a categorical v; for a continuous v, the records' reduction of the §6 interval distortion
  ``(b - a) / (f2 - f1)``, so that specialising a wide interval gains more than a narrow one); ``discernibility``
  ([2]: the penalty Σ|E|² of the classes E), measured like eqs. 2-3 on T1[v]: ``|T1[v]|² - Σ|T1[v_i]|²``. Every
  InfoGain depends on v alone, so it is computed once per candidate.
- A continuous v is split on the fly (§3.2) at the boundary between two consecutive distinct values of T1[v]
  that maximises that InfoGain (first such boundary on ties); the children are ``[lo, u_i]`` and
  ``[u_i+1, hi]``, inclusive like every published bound, and both must be at least the spec's ``min_width``
  wide. An interval therefore always spans exactly the values of its records.
- PrivLoss (§5.2) is ``A_Y(X) - A_Y(X_v)`` or ``L_Y(X_v) - L_Y(X)``, floored at 0 (on population-related
  tables it never is negative, Lemmas 4.1-4.2; a dangling record could make it so).
- A candidate with no record (a taxonomy value absent from T1) is never created: specialising it changes
  nothing. Ties of Score go to the larger InfoGain, then to the first attribute, then to the first value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....errors import NotPublishable
from ...hierarchy import Taxonomy, interval_labels
from .join import ANONYMITY, Columns, Joins, dense_codes

INFO = ("class", "distortion", "discernibility")


def entropy(counts: np.ndarray) -> np.ndarray:
    """Class entropy (bits) of each row of a class-count matrix (Shannon [18], as eq. 2 uses it)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(axis=-1, keepdims=True)
    p = counts / np.where(total > 0, total, 1.0)
    return -(p * np.log2(np.where(p > 0, p, 1.0))).sum(axis=-1)


def class_gain(child: np.ndarray, cls: np.ndarray) -> float:
    """Eq. 2: ``Ent(T1[v]) - Σ_i |T1[v_i]| / |T1[v]| Ent(T1[v_i])`` from each record's child and class codes.
    Cost O(|T1[v]|)."""
    local, inverse = np.unique(child, return_inverse=True)
    classes = int(cls.max()) + 1
    table = np.bincount(inverse * classes + cls, minlength=len(local) * classes).reshape(len(local), classes)
    sizes = table.sum(axis=1)
    return float(entropy(table.sum(axis=0)) - (sizes / sizes.sum()) @ entropy(table))


class CategoricalCut:
    """Cut_j of a categorical attribute (§3.2): each record's value is a taxonomy node (an index into
    ``taxonomy.nodes``); ``v -> {v_1, ..., v_c}`` replaces v by the child holding the record's leaf."""

    def __init__(self, name: str, taxonomy: Taxonomy, ranks: np.ndarray) -> None:
        self.name, self.taxonomy, self.ranks = name, taxonomy, np.asarray(ranks, dtype=np.int64)
        self.lo, self.hi, self.names = taxonomy.node_arrays()
        self.depth = np.array([node.depth for node in taxonomy.nodes], dtype=np.int64)
        self.inner = np.append(self.depth[1:] > self.depth[:-1], False)  # the next node in pre-order is a child

    def bounds(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Leaf-rank range of each cut value."""
        return self.lo[ids].astype(np.float64), self.hi[ids].astype(np.float64)

    def labels(self, ids: np.ndarray) -> np.ndarray:
        """The taxonomy value of each cut id."""
        return self.names[ids]

    def specialise(self, v: int, records: np.ndarray) -> np.ndarray | None:
        """The child of v of every record of Link[v], or None when v is a leaf. Cost O(|Link[v]|)."""
        if not self.inner[v]:
            return None
        return self.taxonomy.ancestors[self.ranks[records], self.depth[v] + 1]

    def gain(self, info: str, v: int, records: np.ndarray, child: np.ndarray, cls: np.ndarray | None) -> float:
        """InfoGain(v) (§5.2, module docstring) of the specialisation giving ``child``."""
        if info == "class":
            assert cls is not None, "info: class needs the class attribute's codes"
            return class_gain(child, cls[records])
        if info == "distortion":
            return float(len(records))  # eq. 3
        return float(len(child) ** 2 - np.sum(np.unique(child, return_counts=True)[1].astype(np.float64) ** 2))


class IntervalCut:
    """Cut_j of a continuous attribute: closed intervals ``[lo, hi]`` (ids into ``lo``/``hi``), split in two on
    the fly (§3.2) where InfoGain is highest; ``min_width`` is the least width of a published interval."""

    def __init__(self, name: str, values: np.ndarray, min_width: float) -> None:
        self.name, self.values, self.min_width = name, np.asarray(values, dtype=np.float64), float(min_width)
        self.lo, self.hi = [float(self.values.min())], [float(self.values.max())]
        self.span = (self.hi[0] - self.lo[0]) or 1.0  # f2 - f1 of §6's distortion
        self.gains: dict[int, float] = {}

    def bounds(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The closed interval of each cut id."""
        return np.asarray(self.lo)[ids], np.asarray(self.hi)[ids]

    def labels(self, ids: np.ndarray) -> np.ndarray:
        """``"[lo, hi]"`` of each cut id."""
        return interval_labels(*self.bounds(ids))

    def specialise(self, v: int, records: np.ndarray, info: str, cls: np.ndarray | None) -> np.ndarray | None:
        """Split ``[lo, hi]`` of v at the boundary of highest InfoGain; the new intervals get the next ids and
        every record of Link[v] its child. None when no boundary leaves both sides ``min_width`` wide.
        Cost O(|Link[v]| log |Link[v]|)."""
        values = self.values[records]
        distinct, inverse = np.unique(values, return_inverse=True)
        lo, hi = self.lo[v], self.hi[v]
        left_hi, right_lo = distinct[:-1], distinct[1:]
        feasible = (left_hi - lo >= self.min_width) & (hi - right_lo >= self.min_width)
        if not feasible.any():
            return None
        per_value = np.bincount(inverse, minlength=len(distinct)).astype(np.float64)
        n_left = np.cumsum(per_value)[:-1]
        n_right = len(values) - n_left
        if info == "class":
            assert cls is not None, "info: class needs the class attribute's codes"
            classes = int(cls.max()) + 1
            table = np.bincount(inverse * classes + cls[records], minlength=len(distinct) * classes)
            table = table.reshape(len(distinct), classes)
            left = np.cumsum(table, axis=0)[:-1]
            right = table.sum(axis=0) - left
            whole = entropy(table.sum(axis=0))
            gain = whole - (n_left * entropy(left) + n_right * entropy(right)) / len(values)
        elif info == "distortion":
            gain = (n_left * (hi - left_hi) + n_right * (right_lo - lo)) / self.span
        else:
            gain = float(len(values)) ** 2 - n_left ** 2 - n_right ** 2
        best = int(np.argmax(np.where(feasible, gain, -np.inf)))
        left_id = len(self.lo)
        self.lo += [lo, float(right_lo[best])]
        self.hi += [float(left_hi[best]), hi]
        self.gains[v] = float(gain[best])
        return np.where(values <= left_hi[best], left_id, left_id + 1)

    def gain(self, info: str, v: int, records: np.ndarray, child: np.ndarray, cls: np.ndarray | None) -> float:
        """InfoGain(v) of the split ``specialise`` chose (same signature as ``CategoricalCut.gain``)."""
        return self.gains[v]


Cut = CategoricalCut | IntervalCut


@dataclass
class Candidate:
    """A value v of Cut_j: ``records`` is Link[v]; ``child`` each record's value after v -> {v_1, ...};
    ``table`` the X-tree rows of the specialised x values (None when a winner touched Link[v] since)."""

    j: int
    v: int
    records: np.ndarray
    child: np.ndarray
    infogain: float
    table: pd.DataFrame | None = None


def partitions(ids: np.ndarray, static: np.ndarray, y: np.ndarray) -> Columns:
    """Tree1's partitions of the given records: columns ``g<j>`` (cut ids), ``s`` (static code), ``y`` (Y1 value)
    and ``n`` (records), in the sorted order of their keys (``join.dense_codes``). Cost O(records) when the key
    range is small, else O(records log records)."""
    columns = [ids[:, j] for j in range(ids.shape[1])] + [static, y]
    names = [f"g{j}" for j in range(ids.shape[1])] + ["s", "y"]
    codes, first = dense_codes(columns)
    return {name: c[first] for name, c in zip(names, columns, strict=True)} | {
        "n": np.bincount(codes, minlength=len(first)).astype(np.int64)}


def _worst(table: pd.DataFrame, kind: str) -> tuple[float, float]:
    """``(A_Y, +inf)`` or ``(L_Y, max excess)`` over X-tree rows (+inf / -inf over none)."""
    if kind == ANONYMITY:
        return (float(table["a"].min()) if len(table) else np.inf), np.inf
    if not len(table):
        return -np.inf, -np.inf
    return float(table["L"].max()), float(table["E"].max())


def _valid(kind: str, k: float, worst: tuple[float, float]) -> bool:
    return worst[0] >= k if kind == ANONYMITY else worst[1] <= 0


def _without(table: pd.DataFrame, column: str, kind: str) -> Callable[[int], tuple[float, float]]:
    """``rest(v)``: the extremes of the X-tree rows whose ``column`` (a cut id) is not v, from the extremes per
    cut value: the best one unless it is v's, then the second best. Cost O(|X-tree|) once."""
    stats = ["a"] if kind == ANONYMITY else ["L", "E"]
    extreme = table.groupby(column, sort=False)[stats].agg("min" if kind == ANONYMITY else "max")
    best = {}
    for stat in stats:
        ordered = extreme[stat].sort_values(ascending=kind == ANONYMITY, kind="stable")
        best[stat] = (ordered.index.to_numpy()[:2], ordered.to_numpy()[:2])
    fill = np.inf if kind == ANONYMITY else -np.inf

    def rest(v: int) -> tuple[float, float]:
        out = []
        for stat in stats:
            keys, values = best[stat]
            pick = values[1:] if len(keys) and keys[0] == v else values[:1]
            out.append(float(pick[0]) if len(pick) else fill)
        return (out[0], np.inf) if kind == ANONYMITY else (out[0], out[1])

    return rest


def tds4sa(cuts: Sequence[Cut], static: np.ndarray, y: np.ndarray, cls: np.ndarray | None, stats: Joins,
           k: float, info: str, describe: Callable[[pd.Series], str]) -> np.ndarray:
    """Algorithm 1 on T1. Returns the final cut id of every record on every generalisation attribute (n x |X1|).

    ``cuts``: Cut_j of each generalisation attribute (records in T1's order); ``static``: each record's code of
    its raw X and raw join values; ``y``: its Y1 value id; ``cls``: its class code (``info == "class"``);
    ``stats``: the joins with the earlier releases whose requirement every valid specialisation keeps
    (``join.Joins``) and the requirement's kind; ``k``: the threshold of
    (X, Y)-anonymity (Def. 3.1; per-value thresholds of linkability live in ``stats``); ``describe``: the
    readable x of an X-tree row, for the refusal. Raises NotPublishable (Corollary 4.2) when the most generalised
    T1 violates the requirement. Deterministic.

    Cost: each record is read at most |X1| x h times (§5.3 Analysis (4)), when a winner's Link holds it; each
    iteration re-scores the candidates whose Link the winner touched from partition counts, each rescoring
    computing one X-tree per join of ``stats`` (``join.Joins``: one per earlier release, each over the matching
    partitions of that release), and the extremes over the stacked X-tree rows (O(rows)).
    """
    kind = stats.kind
    n, m = len(static), len(cuts)
    y = y if stats.partitions_need_y else np.zeros_like(y)
    ids = np.zeros((n, m), dtype=np.int64)  # Line 1: every A_j at its top value (node 0, interval 0)
    xtree = stats.xtree(partitions(ids, static, y))
    if not _valid(kind, k, _worst(xtree, kind)):
        raise NotPublishable(_refusal(xtree, kind, k, describe))
    candidates: dict[tuple[int, int], Candidate] = {}

    def create(j: int, v: int, records: np.ndarray) -> None:
        cut = cuts[j]
        if not len(records):
            return
        if isinstance(cut, IntervalCut):
            child = cut.specialise(v, records, info, cls)
        else:
            child = cut.specialise(v, records)
        if child is not None:
            candidates[(j, v)] = Candidate(j, v, records, child, cut.gain(info, v, records, child, cls))

    for j in range(m):
        create(j, 0, np.arange(n))
    while True:
        for candidate in candidates.values():  # Line 5: score only what the last winner changed
            if candidate.table is None:
                specialised = ids[candidate.records]
                specialised[:, candidate.j] = candidate.child
                parts = partitions(specialised, static[candidate.records], y[candidate.records])
                candidate.table = stats.xtree(parts)
        now = _worst(xtree, kind)
        rests = {j: _without(xtree, f"g{j}", kind) for j in sorted({j for j, _ in candidates})}
        winner, best = None, None
        for key, candidate in sorted(candidates.items()):
            rest, new = rests[candidate.j](candidate.v), _worst(candidate.table, kind)
            if kind == ANONYMITY:
                after = (min(rest[0], new[0]), np.inf)
                loss = now[0] - after[0]
            else:
                after = (max(rest[0], new[0]), max(rest[1], new[1]))
                loss = after[0] - now[0]
            if not _valid(kind, k, after):
                continue
            score = candidate.infogain / (max(loss, 0.0) + 1.0)  # eq. 1
            if best is None or (score, candidate.infogain) > best:
                winner, best = key, (score, candidate.infogain)
        if winner is None:  # Line 2: no valid candidate left (Corollary 4.1)
            return ids
        w = candidates.pop(winner)  # Line 4: specialise w on T1 through Link[w]
        ids[w.records, w.j] = w.child
        xtree = pd.concat([xtree[xtree[f"g{w.j}"] != w.v], w.table], ignore_index=True)
        for other in range(m):
            if other != w.j:
                for v in np.flatnonzero(np.bincount(ids[w.records, other])):
                    if (other, int(v)) in candidates:
                        candidates[(other, int(v))].table = None
        order = np.argsort(w.child, kind="stable")
        children, starts = np.unique(w.child[order], return_index=True)
        for child, records in zip(children, np.split(w.records[order], starts[1:]), strict=True):
            create(w.j, int(child), records)


def _refusal(xtree: pd.DataFrame, kind: str, k: float, describe: Callable[[pd.Series], str]) -> str:
    """Why even the most generalised T1 fails (Corollary 4.2), naming the worst x."""
    if kind == ANONYMITY:
        row = xtree.loc[xtree["a"].idxmin()]
        what = f"x = {describe(row)} co-occurs with only {int(row['a'])} distinct Y value(s) in the join, below k={k:g}"
    else:
        row = xtree.loc[xtree["E"].idxmax()]
        what = f"x = {describe(row)} infers a Y value with confidence {row['L']:.0%}, above its threshold"
    return (f"(X, Y)-{kind} fails even for the most generalised T1 (every generalisation attribute at its top "
            f"value): {what}. By Wang-Fung Corollary 4.2 no generalisation of T1 satisfies it; the earlier releases "
            "alone link X to Y. Drop from X the attributes of the earlier releases that pin Y (e.g. name T1.A "
            "instead of A), lower k, or widen Y")
