"""The interval joins against brute force, and the run expansion they end with."""

from __future__ import annotations

import numpy as np
import pytest

from dagster_privrelease.core import intervals


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
