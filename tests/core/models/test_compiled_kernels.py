"""The compiled kernels (``core.models.kernels.compiled``) against their numpy references, on random inputs: the
same outputs, bit for bit, ties included (coarse grids of QI values make ties common)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.models.kernels import split as split_kernel
from dagster_privrelease.core.models.kernels.compiled import Kernel, references
from dagster_privrelease.core.models.m_distinct import assignment, cuts
from dagster_privrelease.core.spec import parse_spec
from tests.budget import examples

from . import test_m_distinct as md_tests

SEEDS = st.integers(0, 2**32 - 1)


def greedy_inputs(rng: np.random.Generator) -> tuple:
    """A random state of Algorithm 3 (buckets with entries, counts, QI boxes) and records with candidate pairs."""
    B, s_max, V, d = (int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(2, 7)),
                      int(rng.integers(1, 9)))
    n = int(rng.integers(1, 40))
    grid = int(rng.choice([2, 4, 1000]))  # coarse grids: equal extents, equal scores
    Xn = rng.integers(0, grid + 1, size=(n, d)) / grid
    codes = rng.integers(0, V, size=n)
    lengths = rng.integers(1, B * s_max + 1, size=n)
    pairs = [rng.choice(B * s_max, size=k, replace=False) for k in lengths]
    flat = np.concatenate(pairs)
    bucket, entry = flat // s_max, flat % s_max
    starts = np.cumsum(lengths) - lengths
    cnt = rng.integers(0, 3, size=(B, s_max))
    freq = rng.integers(0, 3, size=(B, V))
    empty = rng.random(B) < 0.3
    cnt[empty], freq[empty] = 0, 0
    lo = np.where(empty[:, None], np.inf, rng.integers(0, grid + 1, size=(B, d)) / grid)
    hi = np.where(empty[:, None], -np.inf, np.minimum(1.0, lo + rng.integers(0, 2, size=(B, d)) / grid))
    volume = np.prod(np.maximum(hi - lo, 0.0) + assignment.XI, axis=1)
    order = rng.permutation(n)[: int(rng.integers(1, n + 1))]
    return (order.astype(np.int64), bucket.astype(np.int64), entry.astype(np.int64), starts.astype(np.int64),
            lengths.astype(np.int64), codes.astype(np.int64), Xn, cnt.astype(np.int64), freq.astype(np.int64),
            cnt.max(axis=1).astype(np.int64), freq.max(axis=1).astype(np.int64), lo, hi, volume,
            np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64))


def run(kernel: Kernel, inputs: tuple, compiled: bool) -> list[np.ndarray]:
    """The arrays after ``kernel`` ran on a copy of ``inputs`` (compiled, or its reference)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
    if compiled:
        kernel(*args)
    else:
        with references():
            kernel(*args)
    return args


@settings(max_examples=examples(100), deadline=None)
@given(SEEDS)
def test_algorithm_3_greedy_compiled_equals_numpy(seed):
    inputs = greedy_inputs(np.random.default_rng(seed))
    fast, slow = run(assignment._greedy, inputs, True), run(assignment._greedy, inputs, False)
    assert (slow[-2][inputs[0]] >= 0).all()  # the reference assigned every record of the order
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("family", ["partition", "chain"])
def test_m_distinct_stream_publishes_the_same_tables_through_the_compiled_kernels(family, monkeypatch):
    """Releases of m-Distinct through the compiled Algorithm 3 and eq. 4 cut search and through their numpy
    references (the path before the kernels): the same published tables, counterfeits and hosting groups, release
    after release (text ids)."""
    update_sets = md_tests.PARTITION if family == "partition" else md_tests.CHAIN
    spec = parse_spec({
        "name": "ward", "id": "pid", "sensitive": {"name": "s", "values": sorted(update_sets)},
        "quasi_identifiers": {"age": {"type": "numeric"}, "zone": {"type": "numeric"}},
        "model": {"name": "m_distinct", "m": 3, "update_sets": update_sets},
    })
    snapshots = [s.assign(pid=s["pid"].map("p{:05d}".format))
                 for s in md_tests.stream(np.random.default_rng(11), update_sets, releases=3, n=400)]
    greedy, node_cuts, chosen, cut = assignment._greedy, cuts._node_cuts, [], []

    def counted(order, *rest):
        chosen.append(len(order))
        return greedy(order, *rest)

    def cutting(*args):
        node_cuts(*args)
        cut.append(int((args[-1] >= 0).sum()))

    monkeypatch.setattr(assignment, "_greedy", counted)
    monkeypatch.setattr(cuts, "_node_cuts", cutting)
    _, fast = md_tests.run(snapshots, spec)
    with references():
        _, slow = md_tests.run(snapshots, spec)
    assert sum(chosen) > 100  # the greedy chose for many records (releases 2-3), both ways
    assert sum(cut) > 10  # eq. 4 cut many nodes, both ways
    for a, b in zip(fast, slow, strict=True):
        pd.testing.assert_frame_equal(a.table, b.table)
        pd.testing.assert_frame_equal(a.counterfeits, b.counterfeits)
        pd.testing.assert_frame_equal(a.hosting, b.hosting)


def test_numba_is_imported_by_the_first_kernel_call_not_by_the_package():
    """The package, its models, pipeline and CLI import without numba (a step that runs no kernel pays nothing);
    the first kernel call imports it; a loop numba cannot cache still compiles."""
    code = ("import sys; import dagster_privrelease, dagster_privrelease.pipeline, dagster_privrelease.cli; "
            "from dagster_privrelease.core.models import m_distinct, m_invariance; "
            "assert 'numba' not in sys.modules, 'imported early'; "
            "from dagster_privrelease.core.models.m_distinct.assignment import _greedy; _greedy.machine_code(); "
            "assert 'numba' in sys.modules, 'not imported'; "
            # a loop numba cannot cache (no source file: no folder to cache it in) is compiled all the same
            "from dagster_privrelease.core.models.kernels.compiled import Kernel; import numpy as np; "
            "assert Kernel(lambda a: a * 2, np.negative)(np.arange(3)).tolist() == [0, 2, 4]")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@settings(max_examples=examples(100), deadline=None)
@given(SEEDS)
def test_eq4_cut_search_compiled_equals_numpy(seed):
    """``cuts._node_cuts`` (node by node, compiled) and its numpy reference (nodes padded into batches): the same
    children, row for row, on nodes of every size past ``LEAF`` with open counterfeits (NaN QIs, no value) and
    coarse grids (ties of eq. 4's score), for d on both sides of numpy's pairwise sum (8 QIs)."""
    rng = np.random.default_rng(seed)
    s, d, V = int(rng.integers(1, 4)), int(rng.integers(1, 13)), int(rng.integers(2, 7))
    deltas = [int(x) for x in rng.integers(2, 40, size=int(rng.integers(1, 6)))]
    nodes, entry, value, X = md_tests._nodes(rng, s, d, V, deltas, scale=int(rng.choice([1, 3, 1000])))
    columns = np.ascontiguousarray(np.vstack([X, np.full((1, d), np.nan)]).T)
    rows = np.concatenate(nodes).astype(np.int64)
    starts = np.r_[0, np.cumsum([len(n) for n in nodes])].astype(np.int64)
    inputs = (columns, entry.astype(np.int64), np.r_[value, -1].astype(np.int64), rows, starts, s, V,
              np.full(len(rows), -1, dtype=np.int64), np.full(len(nodes), -2, dtype=np.int64))
    fast, slow = run(cuts._node_cuts, inputs, True), run(cuts._node_cuts, inputs, False)
    assert (slow[-1] != -2).all()  # the reference decided every node (-1: no valid cut)
    np.testing.assert_array_equal(fast[-1], slow[-1])
    np.testing.assert_array_equal(fast[-2], slow[-2])


@pytest.mark.parametrize("relative", [False, True])
@settings(max_examples=examples(100), deadline=None)
@given(SEEDS)
def test_split_levels_compiled_equals_numpy(relative, seed):
    """``kernels.split._split_levels`` (node by node from a queue, compiled) and its numpy reference (every node
    of a level at once): the same group of every tuple, ids included, on balanced buckets of several signature
    sizes with counterfeits (NaN QIs) and coarse grids of QI values (ties of the perimeter sum), for m-invariance's
    perimeters and Li-Zhou eq. 4's relative ones (m-Distinct)."""
    rng = np.random.default_rng(seed)
    d, grid = int(rng.integers(1, 5)), int(rng.choice([1, 3, 1000]))
    parts_x, parts_v, parts_b = [], [], []
    for b in range(int(rng.integers(1, 5))):
        s, c = int(rng.integers(1, 5)), int(rng.integers(2, 25))
        x = rng.integers(0, grid + 1, size=(s * c, d)) / grid
        x[rng.random(s * c) < 0.1] = np.nan  # counterfeits: no QI values
        parts_x.append(x)
        parts_v.append(np.repeat(rng.choice(8, size=s, replace=False), c))
        parts_b.append(np.full(s * c, 10 - b))
    order = rng.permutation(sum(len(v) for v in parts_v))  # the buckets' rows interleaved
    X, values, bucket = np.vstack(parts_x)[order], np.concatenate(parts_v)[order], np.concatenate(parts_b)[order]
    fast = split_kernel.split(X, values, bucket, relative=relative)
    with references():
        slow = split_kernel.split(X, values, bucket, relative=relative)
    assert len(np.unique(slow)) > len(parts_v)  # the reference cut buckets into several groups
    np.testing.assert_array_equal(fast, slow)
