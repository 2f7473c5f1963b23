"""The interval joins against brute force, the run expansion they end with, and ``contained_union`` (with every\npath of its sweep forced by small knobs) against a loop from its definition."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import intervals
from dagster_privrelease.core.grouping import pack_bits, unpack_bits
from tests.budget import examples


@pytest.mark.parametrize(("seed", "block"), [(0, 4_000_000), (1, 4_000_000), (2, 37)])
def test_overlapping_pairs_matches_brute_force(seed, block, monkeypatch):
    monkeypatch.setattr(intervals, "_PAIRS_PER_BLOCK", block)  # 37: many blocks of candidate pairs
    rng = np.random.default_rng(seed)
    alo = rng.integers(0, 50, size=(300, 3)).astype(float)
    ahi = alo + rng.integers(0, 4, size=(300, 3)) * (rng.random((300, 3)) < 0.5)
    blo = rng.integers(0, 50, size=(80, 3)).astype(float)
    bhi = blo + rng.choice([0, 1, 3, 10, 40], size=(80, 3))
    i, j = intervals.overlapping_pairs(alo, ahi, blo, bhi)
    got = set(zip(i.tolist(), j.tolist(), strict=True))
    brute = np.all((alo[:, None, :] <= bhi[None]) & (blo[None] <= ahi[:, None, :]), axis=2)
    assert got == set(zip(*np.nonzero(brute), strict=True))
    assert len(got) == len(i)  # no pair reported twice
    points = alo[:, :2] + rng.random((300, 2)) * 3  # non-integer points: the grid join of contained_pairs
    pi, gi = intervals.contained_pairs(points, blo[:, :2], bhi[:, :2])
    inside = np.all((blo[None, :, :2] <= points[:, None]) & (points[:, None] <= bhi[None, :, :2]), axis=2)
    assert set(zip(pi.tolist(), gi.tolist(), strict=True)) == set(zip(*np.nonzero(inside), strict=True))
    assert len(pi) == inside.sum()
    pi, gi = intervals.contained_pairs(alo, blo, bhi)  # integer points on the boxes' edges
    inside = np.all((blo[None] <= alo[:, None]) & (alo[:, None] <= bhi[None]), axis=2)
    assert len(pi) == inside.sum() == len(set(zip(pi.tolist(), gi.tolist(), strict=True)))


def test_contained_pairs_with_a_block_column_is_the_blockwise_join():
    """A block id as one more column (lo = hi = block) restricts containment to the same block (admits_world)."""
    rng = np.random.default_rng(5)
    points = np.column_stack([rng.integers(0, 3, 200), rng.integers(0, 20, 200)]).astype(float)
    block = rng.integers(0, 3, 40).astype(float)
    lo = rng.integers(0, 20, 40).astype(float)
    hi = lo + rng.integers(0, 5, 40)
    pi, gi = intervals.contained_pairs(points, np.column_stack([block, lo]), np.column_stack([block, hi]))
    inside = (points[:, None, 0] == block[None]) & (lo[None] <= points[:, None, 1]) & (points[:, None, 1] <= hi[None])
    assert set(zip(pi.tolist(), gi.tolist(), strict=True)) == set(zip(*np.nonzero(inside), strict=True))
    assert len(pi) == inside.sum()


@pytest.mark.parametrize("lengths", [[], [0], [3, 0, 2], [1, 1, 1, 0, 4]])
def test_expand_runs_lists_every_member_of_every_run(lengths):
    start = np.arange(len(lengths)) * 10
    run, at = intervals.expand_runs(start, np.array(lengths, dtype=np.int64))
    expected = [(r, s + k) for r, (s, n) in enumerate(zip(start, lengths, strict=True)) for k in range(n)]
    assert list(zip(run.tolist(), at.tolist(), strict=True)) == expected


# -- contained_union: the OR of the sets of the boxes containing each point (Xiao-Tao Def. 15) --------------------


def naive_union(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """From the definition: per point, the OR of ``flags[g]`` over every box g with ``lo[g] <= point <= hi[g]`` on
    every column (a comparison with NaN is false, so NaN is inside nothing)."""
    out = np.zeros((len(points), flags.shape[1]), dtype=bool)
    for i, point in enumerate(points):
        inside = ((lo <= point) & (point <= hi)).all(axis=1)  # boxes g containing the point, on every column
        out[i] = flags[inside].any(axis=0)
    return out


#: The sweep's knobs, small enough that a few dozen boxes and points take every path: many blocks, a block of one
#: box, chunks of one point, no widest pass or every box in it, every bit common or every bit rare.
KNOBS = st.fixed_dictionaries({"_BOX_BLOCK": st.sampled_from([1, 5, 1024]), "_WIDEST": st.sampled_from([0, 2, 1024]),
                               "_RARE": st.sampled_from([0.0, 0.05, 0.3, 1.1]),
                               "_POINT_CHUNK": st.sampled_from([3, 65_536]), "_TABLE_CELLS": st.sampled_from([64, 1 << 22])})


def random_boxes(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Points and boxes on a small grid of halves (so points fall on bounds, between them and outside) or, one
    time in four, continuous (every point value distinct), with NaN points and bounds, -inf/inf bounds, empty
    boxes (lo > hi), repeated points and boxes, and 1-130 set bits (one to three words)."""
    rng = np.random.default_rng(seed)
    n, g, d, s = int(rng.integers(0, 50)), int(rng.integers(0, 160)), int(rng.integers(0, 4)), int(rng.integers(1, 131))
    if rng.random() < 0.25:
        points, lo = rng.random((n, d)) * 6, rng.random((g, d)) * 7 - 0.5
        hi = lo + rng.random((g, d)) * 4 - 0.5
    else:
        points = rng.integers(0, 12, (n, d)) / 2
        lo = rng.integers(-1, 12, (g, d)) / 2
        hi = lo + rng.integers(-1, 8, (g, d)) / 2
    points[rng.random((n, d)) < 0.03] = np.nan
    lo[rng.random((g, d)) < 0.02] = -np.inf
    hi[rng.random((g, d)) < 0.02] = np.inf
    lo[rng.random((g, d)) < 0.01] = np.nan
    hi[rng.random((g, d)) < 0.01] = np.nan
    if g:
        repeat = rng.integers(0, g, g // 4)
        lo[: len(repeat)], hi[: len(repeat)] = lo[repeat], hi[repeat]
    flags = rng.random((g, s)) < rng.choice([0.02, 0.1, 0.5])
    return points, lo, hi, flags


@settings(max_examples=examples(120), deadline=None)
@given(st.integers(0, 2**32 - 1), KNOBS)
def test_contained_union_is_the_or_over_containing_boxes(seed, knobs):
    points, lo, hi, flags = random_boxes(seed)
    with mock.patch.multiple(intervals, **knobs):
        got = intervals.contained_union(points, lo, hi, pack_bits(flags))
        union, inverse = intervals.contained_union_distinct(points, lo, hi, pack_bits(flags))
    assert got.dtype == np.uint64 and got.shape == (len(points), max(1, -(-flags.shape[1] // 64)))
    np.testing.assert_array_equal(unpack_bits(got, flags.shape[1]), naive_union(points, lo, hi, flags))
    np.testing.assert_array_equal(union[inverse], got)
    # one row per distinct point: equal points (NaN equal to NaN) share a row, different points do not
    key = [tuple(np.where(np.isnan(p), np.inf, p).tolist()) + tuple(np.isnan(p).tolist()) for p in points]
    assert len(union) == len(set(key))
    assert all((inverse[i] == inverse[j]) == (key[i] == key[j]) for i in range(len(key)) for j in range(i))


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1), KNOBS)
def test_the_passes_sweep_every_box_and_bit_once(seed, knobs):
    """The exactness of the passes: each (box, bit) held is swept in exactly one pass."""
    rng = np.random.default_rng(seed)
    g, s = int(rng.integers(1, 80)), int(rng.integers(1, 20))
    box_sets = rng.random((g, s)) < 0.2
    with mock.patch.multiple(intervals, **knobs):
        passes = intervals._passes(rng.random(g), box_sets)
    swept = np.zeros((g, s), dtype=int)
    for boxes, held in passes:
        assert len(np.unique(boxes)) == len(boxes)
        swept[boxes] += box_sets[boxes] & held
    np.testing.assert_array_equal(swept, box_sets.astype(int))


def test_contained_union_on_edges_and_without_columns():
    """Integer points on the boxes' edges (inclusive bounds), a point outside every box, and d = 0 (every box
    contains every point)."""
    points = np.array([[0.0, 0.0], [2.0, 5.0], [2.0, 5.0], [9.0, 9.0]])
    lo = np.array([[0.0, 0.0], [2.0, 5.0], [1.0, 1.0]])
    hi = np.array([[2.0, 5.0], [3.0, 6.0], [1.5, 9.0]])
    flags = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=bool)
    got = unpack_bits(intervals.contained_union(points, lo, hi, pack_bits(flags)), 3)
    np.testing.assert_array_equal(got, [[1, 0, 0], [1, 1, 0], [1, 1, 0], [0, 0, 0]])
    got = unpack_bits(intervals.contained_union(np.zeros((3, 0)), lo[:, :0], hi[:, :0], pack_bits(flags)), 3)
    np.testing.assert_array_equal(got, np.ones((3, 3), dtype=bool))
    assert intervals.contained_union(np.zeros((0, 2)), lo, hi, pack_bits(flags)).shape == (0, 1)


def test_overlapping_pairs_of_boxes_on_no_column_is_every_pair():
    """d = 0 (two releases of a vertical history with no attribute in common): every pair, as the brute force
    over no column gives."""
    a, b = np.zeros((3, 0)), np.zeros((2, 0))
    i, j = intervals.overlapping_pairs(a, a, b, b)
    assert sorted(zip(i.tolist(), j.tolist(), strict=True)) == [(x, y) for x in range(3) for y in range(2)]
