"""Taxonomies and generalised values.

A categorical attribute's domain is the ordered list of the leaves of its taxonomy (depth-first, as
written in the spec). Every taxonomy node covers a contiguous range of leaf ranks, so a generalised
categorical value is a pair ``(lo, hi)`` of leaf ranks and the smallest node covering a set of values is
the lowest common ancestor of its smallest and largest leaf (the *closure*). Numeric attributes are
generalised to closed intervals ``[lo, hi]`` widened to ``hi - lo >= min_width`` (Xiao-Tao §4.1).

All functions are vectorised over numpy arrays: closures of a million ranges cost one fancy-index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecError


@dataclass(frozen=True)
class Node:
    """A taxonomy node: its label and the inclusive range of leaf ranks it covers."""

    name: str
    lo: int
    hi: int
    depth: int


@dataclass(frozen=True, eq=False)
class Taxonomy:
    """A tree over the leaf values of one categorical attribute.

    ``nodes[i]`` are in depth-first pre-order; ``leaves[r]`` is the value of leaf rank ``r``.
    ``ancestors[r, d]`` is the index in ``nodes`` of the depth-``d`` ancestor of leaf ``r`` (the leaf's own
    node index repeated below its depth), so closures are array look-ups.
    """

    nodes: tuple[Node, ...]
    leaves: tuple[str, ...]
    ancestors: np.ndarray = field(repr=False)

    @classmethod
    def from_mapping(cls, tree: Mapping, where: str = "hierarchy") -> Taxonomy:
        """Build from a nested mapping whose innermost values are lists of leaves, e.g.
        ``{"Any": {"RT": ["r", "t"], "S": ["s"]}}``. The root mapping has exactly one key.

        Raises SpecError naming ``where`` when the shape is wrong or a leaf repeats.
        """
        if not isinstance(tree, Mapping) or len(tree) != 1:
            raise SpecError(f"{where}: a taxonomy is a mapping with exactly one root key, got {tree!r}")
        nodes: list[Node] = []
        leaves: list[str] = []
        paths: list[list[int]] = []

        def visit(name: str, children, depth: int, path: list[int], at: str) -> None:
            index = len(nodes)
            nodes.append(Node(str(name), -1, -1, depth))
            lo = len(leaves)
            if isinstance(children, Mapping):
                if not children:
                    raise SpecError(f"{at}: node {name!r} has no children")
                for child, grand in children.items():
                    visit(child, grand, depth + 1, path + [index], f"{at}.{child}")
            elif isinstance(children, list | tuple):
                if not children:
                    raise SpecError(f"{at}: node {name!r} has an empty list of leaves")
                for leaf in children:
                    if isinstance(leaf, Mapping | list | tuple):
                        raise SpecError(f"{at}: leaves of {name!r} must be plain values, got {leaf!r}")
                    nodes.append(Node(str(leaf), len(leaves), len(leaves), depth + 1))
                    paths.append(path + [index, len(nodes) - 1])
                    leaves.append(str(leaf))
            else:
                raise SpecError(f"{at}: node {name!r} must map to a mapping or a list of leaves, got {children!r}")
            nodes[index] = Node(str(name), lo, len(leaves) - 1, depth)

        (root, children), = tree.items()
        visit(root, children, 0, [], f"{where}.{root}")
        seen: set[str] = set()
        for leaf in leaves:
            if leaf in seen:
                raise SpecError(f"{where}: leaf {leaf!r} appears more than once")
            seen.add(leaf)
        return cls._build(nodes, leaves, paths)

    @classmethod
    def flat(cls, values: Iterable, root: str = "Any") -> Taxonomy:
        """The flat taxonomy ``{root: sorted(values)}`` given to a categorical attribute without one."""
        return cls.from_mapping({root: sorted({str(v) for v in values})})

    @classmethod
    def _build(cls, nodes: list[Node], leaves: list[str], paths: list[list[int]]) -> Taxonomy:
        depth = max(len(p) for p in paths)
        ancestors = np.empty((len(leaves), depth), dtype=np.int64)
        for rank, path in enumerate(paths):
            ancestors[rank, : len(path)] = path
            ancestors[rank, len(path) :] = path[-1]
        return cls(tuple(nodes), tuple(leaves), ancestors)

    @property
    def root(self) -> Node:
        """The root node (the whole domain)."""
        return self.nodes[0]

    @property
    def rank(self) -> dict[str, int]:
        """Leaf value to leaf rank."""
        return {leaf: r for r, leaf in enumerate(self.leaves)}

    def to_mapping(self) -> dict:
        """The nested mapping this taxonomy was built from (inverse of ``from_mapping``)."""

        def build(i: int) -> tuple[dict | list, int]:
            node = self.nodes[i]
            children: list[int] = []
            j = i + 1
            while j < len(self.nodes) and self.nodes[j].depth > node.depth:
                if self.nodes[j].depth == node.depth + 1:
                    children.append(j)
                j += 1
            if all(self._is_leaf(c) for c in children):
                return [self.nodes[c].name for c in children], j
            return {self.nodes[c].name: build(c)[0] for c in children}, j

        return {self.root.name: build(0)[0]}

    def _is_leaf(self, i: int) -> bool:
        node = self.nodes[i]
        nxt = self.nodes[i + 1] if i + 1 < len(self.nodes) else None
        return node.lo == node.hi and (nxt is None or nxt.depth <= node.depth)

    def extended(self, values: Iterable) -> Taxonomy:
        """This flat taxonomy with unseen values appended at the end (ranks of known leaves unchanged).

        Only flat taxonomies (built by ``flat``) can grow; a written taxonomy is the data steward's and a value
        outside it is an error for the snapshot validator to report.
        """
        known = set(self.leaves)
        new = sorted({str(v) for v in values} - known)
        if not new:
            return self
        return Taxonomy.from_mapping({self.root.name: list(self.leaves) + new})

    def closure(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Index (into ``nodes``) of the smallest node covering leaf ranks ``lo..hi``, elementwise.

        The smallest covering node of a contiguous range is the lowest common ancestor of its end leaves.
        O(n * depth).
        """
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        a, b = self.ancestors[lo], self.ancestors[hi]
        agree = (a == b).sum(axis=1) - 1
        return a[np.arange(len(lo)), agree]

    def node_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lo, hi, name)`` of every node as arrays, indexable by the result of ``closure``."""
        return (
            np.array([n.lo for n in self.nodes], dtype=np.int64),
            np.array([n.hi for n in self.nodes], dtype=np.int64),
            np.array([n.name for n in self.nodes], dtype=object),
        )

    def generalise(self, lo: Sequence[int] | np.ndarray, hi: Sequence[int] | np.ndarray):
        """Closure of each range ``lo..hi`` as ``(label, node_lo, node_hi)`` arrays."""
        index = self.closure(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        node_lo, node_hi, names = self.node_arrays()
        return names[index], node_lo[index], node_hi[index]


def widen(lo: np.ndarray, hi: np.ndarray, min_width: float) -> tuple[np.ndarray, np.ndarray]:
    """Widen closed intervals to ``hi - lo >= min_width``, upward from ``lo`` (Xiao-Tao §4.1).

    The paper asks every published interval to have a length of at least a per-attribute threshold but does
    not say where the extra length goes. We keep the lower bound (a genuine value) and raise the upper one:
    with ``min_width`` 1 for age and 2000 for zipcode this reproduces Table 3a's group 1, where Bob (21, 12000)
    and a counterfeit are published as ``[21, 22]``, ``[12k, 14k]``.
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    return lo, np.maximum(hi, lo + min_width)


def interval_labels(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Readable labels of closed intervals: ``"21"`` for a point, ``"[21, 22]"`` otherwise."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    pairs, inverse = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
    text = np.array([_interval_text(a, b) for a, b in pairs.tolist()], dtype=object)
    return text[inverse.reshape(-1)]


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _interval_text(a: float, b: float) -> str:
    return _number(a) if a == b else f"[{_number(a)}, {_number(b)}]"
