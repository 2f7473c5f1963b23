"""QI classes of homogeneous and per-tuple releases, and the bitset kernels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dagster_privrelease.core import grouping
from tests.fixtures import xiao_tao


def _boxes(group_id):
    return pd.DataFrame({
        "release_id": [1, 1, 1, 2, 2],
        "group_id": group_id,
        "age__lo": [20.0, 20.0, 30.0, 20.0, 20.0],
        "age__hi": [29.0, 29.0, 39.0, 29.0, 29.0],
    })


def test_homogeneous_classes_are_release_and_group():
    index, first, size = grouping.qi_classes(_boxes([1, 1, 2, 1, 1]))
    assert index.tolist() == [0, 0, 1, 2, 2] and first.tolist() == [0, 2, 3] and size.tolist() == [2, 1, 2]
    index, _, size = grouping.qi_classes(_boxes([1, 1, 2, 1, 1]), by_release=False)
    assert index.tolist() == [0, 0, 1, 0, 0] and size.tolist() == [4, 1]


def test_per_tuple_classes_are_release_and_box():
    table = _boxes([None, None, None, None, None])
    index, first, size = grouping.qi_classes(table)
    assert index.tolist() == [0, 0, 1, 2, 2] and first.tolist() == [0, 2, 3] and size.tolist() == [2, 1, 2]
    index, _, _ = grouping.qi_classes(table, ["age"], by_release=False)
    assert index.tolist() == [0, 0, 1, 0, 0]


def test_qi_groups_and_class_boxes_on_the_paper_table():
    spec, table = xiao_tao.spec(), xiao_tao.table_3a()
    index, groups = grouping.qi_groups(table)
    assert groups["size"].sum() == len(table) and len(groups) == table["group_id"].nunique()
    names = grouping.released_attributes(table, spec)
    label, lo, hi, counts = grouping.class_boxes(table, spec, names)
    assert label.tolist() == index.tolist()
    assert counts.sum() == len(table) and lo.shape == hi.shape == (len(groups), len(names))


def test_bitsets_popcount_describe_and_group_or():
    bits = grouping.bitsets(np.array([0, 0, 1, 1, 1]), np.array([0, 70, 2, 2, 1]), 3, 71)
    assert bits.shape == (3, 2)
    assert grouping.popcount(bits).tolist() == [2, 2, 0]
    names = [f"v{i}" for i in range(71)]
    assert grouping.describe(bits, names).tolist() == ["{v0, v70}", "{v1, v2}", "{}"]
    merged = grouping.group_or(np.array([0, 0, 1]), bits, 2)
    assert grouping.describe(merged, names).tolist() == ["{v0, v1, v2, v70}", "{}"]
