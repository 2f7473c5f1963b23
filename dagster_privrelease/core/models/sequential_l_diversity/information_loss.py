"""Closures and their information loss in rank space (Shmueli-Tassa Def. 2.2 and §2.2: LM, eq. (1), and EM).

Both algorithms of the model compare candidate generalisations millions of times (Alg. 1 eq. (7), Alg. 2's edge
weights and the sub-component distances of eq. (10)), so a generalised quasi-identifier tuple is held as two
integer arrays, the lowest and highest *rank* of each attribute:

- a categorical attribute's rank is its taxonomy leaf rank (``core.hierarchy``); a generalised value is a taxonomy
  node, i.e. the leaf range ``node.lo..node.hi``, and the closure of a set of values is the lowest common
  ancestor of its smallest and largest leaf (``Taxonomy.closure``);
- a numeric attribute's rank is the index of its value among the snapshot's sorted distinct values; a generalised
  value is the interval between two of them (the collection of all intervals, §2.1), which is its own closure.

The closure of a box ``lo..hi`` (already a closure, or the raw min/max of a set of tuples) is then ``snap``, and
its loss ``loss`` a sum over attributes of O(1) look-ups:

- LM (eq. (1)): ``(|v(m)| - 1) / (|A_m| - 1)``, the leaves under the node for a categorical attribute, and for a
  numeric one the interval's length over the snapshot's range (the usual reading of eq. (1) for ordered domains);
- EM: the conditional entropy ``H(v(m))`` in bits of the attribute's values in T restricted to ``v(m)``, from
  prefix sums of the counts ``c`` and of ``c log2 c`` over ranks: ``H = log2 P - S / P`` with ``P = Σ c`` and
  ``S = Σ c log2 c`` over the range (values of the domain absent from T weigh nothing).

Cost: construction O(N log N + Σ_m K_m² · depth): an attribute of K_m <= ``_TABLE_LEAVES`` ranks gets the K x K
table of the loss of every range (and a categorical one the K x K table of closures), so ``loss`` is one look-up
per attribute; a wider attribute computes it per call (O(depth) for a taxonomy, O(1) for a numeric range).
``snap`` and ``loss`` O(size · d).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...hierarchy import Taxonomy
from ...spec import BoundSpec

LOSSES = ("LM", "EM")

#: Attributes of at most this many ranks get K x K tables of losses and closures (8 MB each at 1024).
_TABLE_LEAVES = 1024

#: Attributes of at most this many ranks get the K x K x K table of ``InformationLoss.join_table`` (16 MB at 128).
_JOIN_LEAVES = 128


def _entropy_prefix(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums (leading 0) of ``counts`` and of ``counts * log2(counts)`` (0 for a zero count)."""
    counts = counts.astype(np.float64)
    clog = np.where(counts > 0, counts * np.log2(np.where(counts > 0, counts, 1.0)), 0.0)
    return np.concatenate(([0.0], np.cumsum(counts))), np.concatenate(([0.0], np.cumsum(clog)))


def _entropy(cum: np.ndarray, cum_log: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """EM of the rank ranges ``lo..hi``: ``log2 P - S / P`` (0 where the range holds no value of T)."""
    total = cum[hi + 1] - cum[lo]
    weighted = cum_log[hi + 1] - cum_log[lo]
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, np.log2(safe) - weighted / safe, 0.0)


@dataclass(frozen=True)
class _Attribute:
    """One quasi-identifier in rank space (module docstring)."""

    name: str
    taxonomy: Taxonomy | None  # None: numeric
    values: np.ndarray  # numeric: sorted distinct values of T; categorical: leaf ranks 0..K-1
    node_lo: np.ndarray  # categorical: leaf range and loss of every taxonomy node
    node_hi: np.ndarray
    node_loss: np.ndarray
    table: np.ndarray | None  # categorical: node of the closure of leaves lo..hi, when K <= _TABLE_LEAVES
    cum: np.ndarray  # numeric EM: prefix sums over ranks
    cum_log: np.ndarray
    width: float  # numeric LM: the range of T's values

    def node(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Taxonomy node (index) of the closure of leaf ranks ``lo..hi``."""
        if self.table is not None:
            return self.table.ravel()[lo * len(self.table) + hi]
        assert self.taxonomy is not None, f"{self.name}: a numeric attribute has no taxonomy node"
        return self.taxonomy.closure(lo.reshape(-1), hi.reshape(-1)).reshape(lo.shape)


class InformationLoss:
    """The quasi-identifiers ``attributes`` of ``snapshot`` (T) in rank space, and the loss ``loss`` of a box.

    ``ranks``: (N, d) int32, every tuple's ranks (a tuple is the box ``ranks..ranks``). Methods take ``lo``,
    ``hi`` of shape (..., d) and work elementwise.
    """

    def __init__(self, snapshot: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...], loss: str):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.names = tuple(attributes)
        self.loss_name = loss
        ranks, described = [], []
        for name in self.names:
            qi = spec.quasi_identifiers[name]
            if qi.numeric:
                values, rank, counts = np.unique(snapshot[name].to_numpy(dtype=np.float64), return_inverse=True,
                                                 return_counts=True)
                cum, cum_log = _entropy_prefix(counts)
                width = float(values[-1] - values[0]) if len(values) else 0.0
                empty = np.zeros(0)
                described.append(_Attribute(name, None, values, empty, empty, empty, None, cum, cum_log, width))
            else:
                tax = spec.taxonomy(name)
                rank = pd.Index(tax.leaves).get_indexer(snapshot[name].astype(str))
                K = len(tax.leaves)
                node_lo, node_hi, _ = tax.node_arrays()
                if loss == "LM":
                    node_loss = (node_hi - node_lo) / max(K - 1, 1)
                else:
                    cum, cum_log = _entropy_prefix(np.bincount(rank, minlength=K))
                    node_loss = _entropy(cum, cum_log, node_lo, node_hi)
                table = None
                if K <= _TABLE_LEAVES:
                    lo, hi = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
                    table = tax.closure(np.minimum(lo, hi).ravel(), np.maximum(lo, hi).ravel()).reshape(K, K)
                empty = np.zeros(0)
                described.append(_Attribute(name, tax, np.arange(K), node_lo, node_hi, node_loss, table, empty,
                                            empty, 0.0))
            ranks.append(np.asarray(rank, dtype=np.int32).reshape(-1))
        self.attributes = tuple(described)
        self.ranks = np.stack(ranks, axis=1) if ranks else np.zeros((len(snapshot), 0), dtype=np.int32)
        # the loss of every range lo..hi of an attribute of at most _TABLE_LEAVES ranks, flat at lo * K + hi
        self._pairs: list[np.ndarray | None] = [None] * len(described)
        for j, a in enumerate(described):
            K = len(a.values)
            if K <= _TABLE_LEAVES:
                lo, hi = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
                self._pairs[j] = self.attribute_loss(j, np.minimum(lo, hi).ravel(), np.maximum(lo, hi).ravel())
        self._joins: dict[int, np.ndarray | None] = {}

    def join_table(self, j: int) -> np.ndarray | None:
        """(K, K, K) ``table[lo, hi, r]`` = IL_j(closure{lo..hi, r}) = ``attribute_loss(j, min(lo, r), max(hi, r))``
        for an attribute of K <= ``_JOIN_LEAVES`` ranks (None for a wider one), so that the edge weights of
        Algorithm 2's matchings (``sequential_release.match``) are one look-up per (row, tuple) and attribute
        instead of a minimum, a maximum and a look-up: the same values. Made once per attribute (cached).
        O(K³)."""
        if j not in self._joins:
            K = len(self.attributes[j].values)
            table = None
            if K <= _JOIN_LEAVES and self._pairs[j] is not None:
                lo, hi, r = np.meshgrid(np.arange(K), np.arange(K), np.arange(K), indexing="ij")
                table = self.attribute_loss(j, np.minimum(lo, r), np.maximum(hi, r))
            self._joins[j] = table
        return self._joins[j]

    def snap(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The closure (Def. 2.2) of boxes ``lo..hi``: categorical ranges widened to their taxonomy node."""
        lo, hi = lo.copy(), hi.copy()
        for j, a in enumerate(self.attributes):
            if a.taxonomy is not None:
                node = a.node(lo[..., j], hi[..., j])
                lo[..., j], hi[..., j] = a.node_lo[node], a.node_hi[node]
        return lo, hi

    def loss(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """IL of the closure of boxes ``lo..hi`` (LM or EM summed over the attributes, §2.2); shape ``lo.shape[:-1]``."""
        total = np.zeros(lo.shape[:-1])
        for j in range(len(self.attributes)):
            total += self.attribute_loss(j, lo[..., j], hi[..., j])
        return total

    def attribute_loss(self, j: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """IL of the closure of the ranges ``lo..hi`` of attribute ``j`` alone (elementwise)."""
        a, pairs = self.attributes[j], self._pairs[j]
        if pairs is not None:
            return pairs[lo * len(a.values) + hi]
        if a.taxonomy is not None:
            return a.node_loss[a.node(lo, hi)]
        if self.loss_name == "LM":
            return (a.values[hi] - a.values[lo]) / a.width if a.width > 0 else np.zeros(lo.shape)
        return _entropy(a.cum, a.cum_log, lo, hi)

    def loss_tables(self, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """Per attribute j, the (g, K_j) table of IL_j(closure{box, rank r}) of the g boxes ``lo..hi`` (g, d) and
        every rank r of the attribute, so that the loss of joining a box with a tuple is d look-ups (§4.4)."""
        tables = []
        for j, a in enumerate(self.attributes):
            r = np.arange(len(a.values))[None, :]
            tables.append(self.attribute_loss(j, np.minimum(lo[:, j : j + 1], r), np.maximum(hi[:, j : j + 1], r)))
        return tables

    def joined_loss(self, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray, other_hi: np.ndarray) -> np.ndarray:
        """IL of the closure of two (broadcast) boxes: ``loss(min(lo), max(hi))``."""
        return self.loss(np.minimum(lo, other_lo), np.maximum(hi, other_hi))

    def centres(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """(n, d) box centres normalised to [0, 1] per attribute (values for numeric, leaf ranks for categorical),
        for the clustering of §4.4."""
        out = np.empty(lo.shape, dtype=np.float64)
        for j in range(len(self.attributes)):
            out[:, j] = (self.position(j, lo[:, j]) + self.position(j, hi[:, j])) / 2
        return out

    def position(self, j: int, ranks: np.ndarray) -> np.ndarray:
        """Ranks of attribute ``j`` as values normalised to [0, 1] (numeric: by T's range; categorical: leaf rank
        over the leaves)."""
        v = self.attributes[j].values
        span = float(v[-1] - v[0]) if len(v) > 1 else 0.0
        return (v[ranks] - v[0]) / (span or 1.0)
