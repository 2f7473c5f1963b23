"""Taxonomies and generalised values (core/hierarchy.py), checked against brute-force references and against
Table 3a of Xiao-Tao (the §4.1 minimum interval widths)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.hierarchy import Taxonomy, interval_labels, widen
from dagster_privrelease.errors import SpecError
from tests.budget import examples
from tests.fixtures import xiao_tao

MARITAL = {
    "Any": {
        "Married": {"Spouse present": ["civ-spouse", "AF-spouse"], "Spouse absent": ["absent", "separated"]},
        "Never married": ["never"],
        "Formerly married": ["divorced", "widowed"],
    }
}


def parents(tax: Taxonomy) -> list[int | None]:
    """Parent index of every node, read off the pre-order depths (an independent reference)."""
    out: list[int | None] = []
    for i, node in enumerate(tax.nodes):
        out.append(None if i == 0 else max(j for j in range(i) if tax.nodes[j].depth == node.depth - 1))
    return out


def brute_lca(tax: Taxonomy, a: int, b: int) -> int:
    """Lowest common ancestor of leaf ranks ``a`` and ``b`` by walking parent pointers."""
    up = parents(tax)
    leaf = {n.lo: i for i, n in enumerate(tax.nodes) if n.lo == n.hi and (i + 1 == len(tax.nodes)
                                                                          or tax.nodes[i + 1].depth <= n.depth)}

    def chain(i):
        path = []
        while i is not None:
            path.append(i)
            i = up[i]
        return path

    above_a = set(chain(leaf[a]))
    return next(i for i in chain(leaf[b]) if i in above_a)


def brute_smallest(tax: Taxonomy, lo: int, hi: int) -> int:
    """The smallest node whose leaves include ranks lo..hi (among equal ranges, the deepest one)."""
    covering = [i for i, n in enumerate(tax.nodes) if n.lo <= lo and hi <= n.hi]
    return min(covering, key=lambda i: (tax.nodes[i].hi - tax.nodes[i].lo, -tax.nodes[i].depth))


def test_leaves_in_depth_first_order_and_node_ranges():
    tax = Taxonomy.from_mapping(MARITAL)
    assert tax.leaves == ("civ-spouse", "AF-spouse", "absent", "separated", "never", "divorced", "widowed")
    assert tax.rank == {leaf: r for r, leaf in enumerate(tax.leaves)}
    table = [(n.name, n.lo, n.hi, n.depth) for n in tax.nodes]
    assert table == [
        ("Any", 0, 6, 0), ("Married", 0, 3, 1), ("Spouse present", 0, 1, 2), ("civ-spouse", 0, 0, 3),
        ("AF-spouse", 1, 1, 3), ("Spouse absent", 2, 3, 2), ("absent", 2, 2, 3), ("separated", 3, 3, 3),
        ("Never married", 4, 4, 1), ("never", 4, 4, 2), ("Formerly married", 5, 6, 1), ("divorced", 5, 5, 2),
        ("widowed", 6, 6, 2),
    ]
    assert tax.root.name == "Any" and tax.ancestors.shape == (7, 4)


def test_closure_of_every_range_is_the_lca_and_the_smallest_covering_node():
    tax = Taxonomy.from_mapping(MARITAL)
    pairs = np.array([(a, b) for a, b in itertools.product(range(7), repeat=2) if a <= b])
    got = tax.closure(pairs[:, 0], pairs[:, 1])
    assert got.tolist() == [brute_lca(tax, a, b) for a, b in pairs]
    assert got.tolist() == [brute_smallest(tax, a, b) for a, b in pairs]


def test_generalise_reads_labels_and_node_ranges():
    tax = Taxonomy.from_mapping(MARITAL)
    labels, lo, hi = tax.generalise([0, 2, 4, 5, 0, 3], [1, 3, 4, 6, 3, 5])
    assert labels.tolist() == ["Spouse present", "Spouse absent", "never", "Formerly married", "Married", "Any"]
    assert lo.tolist() == [0, 2, 4, 5, 0, 0] and hi.tolist() == [1, 3, 4, 6, 3, 6]
    # a single leaf under a one-leaf node: the leaf itself, not its parent "Never married"
    assert tax.generalise([4], [4])[0].tolist() == ["never"]


def test_to_mapping_round_trips():
    tax = Taxonomy.from_mapping(MARITAL)
    assert tax.to_mapping() == MARITAL
    again = Taxonomy.from_mapping(tax.to_mapping())
    assert [(n.name, n.lo, n.hi, n.depth) for n in again.nodes] == [(n.name, n.lo, n.hi, n.depth) for n in tax.nodes]
    chain = {"Any": {"Only": {"Inner": ["x", "y"]}, "Alone": ["z"]}}
    assert Taxonomy.from_mapping(chain).to_mapping() == chain


def test_leaves_are_read_as_strings_and_must_be_unique():
    tax = Taxonomy.from_mapping({"Zone": {"North": [1, 2], "South": [3]}})
    assert tax.leaves == ("1", "2", "3")
    with pytest.raises(SpecError, match="zone: leaf '2' appears more than once"):
        Taxonomy.from_mapping({"Zone": {"North": [1, 2], "South": ["2"]}}, where="zone")


def test_flat_taxonomy_sorts_and_grows_by_appending():
    flat = Taxonomy.flat(["Oslo", "Lima", "Oslo", "Accra"])
    assert flat.leaves == ("Accra", "Lima", "Oslo") and flat.root.name == "Any"
    assert [n.depth for n in flat.nodes] == [0, 1, 1, 1]
    grown = flat.extended(["Zagreb", "Lima", "Bern"])
    assert grown.leaves == ("Accra", "Lima", "Oslo", "Bern", "Zagreb")  # earlier ranks unchanged
    assert all(grown.rank[v] == r for v, r in flat.rank.items())
    assert flat.extended(["Lima"]) is flat
    assert grown.closure([0], [4]).tolist() == [0] and grown.closure([3], [3]).tolist() == [4]


def test_widen_reproduces_table_3a():
    """Xiao-Tao §4.1 and Table 3a: min width 1 for age ('[21, 22]') and 2000 for zipcode ('[12k, 14k]').

    Each QI group's genuine tuples of T(2) (Table 2a), enclosed by their minimum interval and widened, give the
    published bounds of Table 3a; Bob's group 1 (Bob and a counterfeit) becomes [21, 22] x [12000, 14000]."""
    micro = xiao_tao.table_2a().merge(xiao_tao.hosting_3a(), on="name")
    boxes = micro.groupby("group_id").agg(age_lo=("age", "min"), age_hi=("age", "max"),
                                          zip_lo=("zipcode", "min"), zip_hi=("zipcode", "max"))
    published = xiao_tao.table_3a().groupby("group_id").first()
    age = widen(boxes["age_lo"].to_numpy(), boxes["age_hi"].to_numpy(), 1)
    zipcode = widen(boxes["zip_lo"].to_numpy(), boxes["zip_hi"].to_numpy(), 2000)
    assert age[0].tolist() == published["age__lo"].tolist() and age[1].tolist() == published["age__hi"].tolist()
    assert zipcode[0].tolist() == published["zipcode__lo"].tolist()
    assert zipcode[1].tolist() == published["zipcode__hi"].tolist()
    assert (age[0][0], age[1][0], zipcode[0][0], zipcode[1][0]) == (21, 22, 12000, 14000)
    assert interval_labels(age[0], age[1]).tolist() == published["age"].tolist()


def test_widen_keeps_wide_intervals_and_zero_width():
    lo, hi = widen(np.array([1.0, 5.0, 3.5]), np.array([9.0, 5.0, 3.5]), 0)
    assert lo.tolist() == [1.0, 5.0, 3.5] and hi.tolist() == [9.0, 5.0, 3.5]
    lo, hi = widen([1, 5], [9, 6], 4)
    assert hi.tolist() == [9.0, 9.0]


def test_interval_labels():
    labels = interval_labels(np.array([21, 21, 1.5, 12000]), np.array([21, 22, 2, 14000]))
    assert labels.tolist() == ["21", "[21, 22]", "[1.5, 2]", "[12000, 14000]"]
    assert interval_labels(np.array([]), np.array([])).tolist() == []


# ----------------------------------------------------------------------------------------------- properties

_shapes = st.recursive(
    st.integers(min_value=1, max_value=4),  # a node listing this many leaves
    lambda children: st.lists(children, min_size=1, max_size=3),  # a node with these child nodes
    max_leaves=12,
)


def _tree(shape) -> dict:
    """A nested taxonomy mapping of the given shape, leaves named l0, l1, ... in depth-first order."""
    counter = itertools.count()

    def build(node):
        if isinstance(node, int):
            return [f"l{next(counter)}" for _ in range(node)]
        return {f"n{i}": build(child) for i, child in enumerate(node)}

    return {"Any": build(shape)}


@st.composite
def taxonomy_and_ranges(draw):
    tax = Taxonomy.from_mapping(_tree(draw(_shapes)))
    n = len(tax.leaves)
    ends = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=20))
    lo = np.array([min(a, b) for a, b in ends])
    hi = np.array([max(a, b) for a, b in ends])
    return tax, lo, hi


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(taxonomy_and_ranges())
def test_closure_is_the_smallest_node_containing_the_range(case):
    tax, lo, hi = case
    got = tax.closure(lo, hi)
    assert got.tolist() == [brute_smallest(tax, a, b) for a, b in zip(lo, hi, strict=True)]
    assert got.tolist() == [brute_lca(tax, a, b) for a, b in zip(lo, hi, strict=True)]


@settings(max_examples=examples(100), deadline=None, derandomize=True)
@given(_shapes)
def test_to_mapping_round_trips_any_tree(shape):
    tree = _tree(shape)
    tax = Taxonomy.from_mapping(tree)
    assert tax.to_mapping() == tree
    assert tax.leaves == tuple(f"l{i}" for i in range(len(tax.leaves)))
    node_lo, node_hi, _ = tax.node_arrays()
    assert (node_lo <= node_hi).all() and node_lo[0] == 0 and node_hi[0] == len(tax.leaves) - 1
