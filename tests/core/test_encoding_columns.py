"""``encoding.extend_rank_key`` folding a matrix's columns in one at a time (as ``frame_digest`` does, keeping none):
the same keys as ``rank_keys`` of the matrix, and keys that order rows as ``np.lexsort`` does (the definition)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import encoding
from tests.budget import examples


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(0, 30), st.lists(st.integers(1, 2**40), min_size=1, max_size=5), st.integers(0, 2**31))
def test_rank_keys_folded_a_column_at_a_time_are_those_of_the_matrix(n, sizes, seed):
    rng = np.random.default_rng(seed)
    ranks = np.column_stack([rng.integers(0, s, n) for s in sizes]).astype(np.int64).reshape(n, len(sizes))
    keys = encoding.rank_keys(ranks, sizes)
    folded, span = np.zeros(n, dtype=np.int64), 1
    for j, size in enumerate(sizes):
        folded, span = encoding.extend_rank_key(folded, span, ranks[:, j].copy(), size)
    assert folded.tolist() == keys.tolist()
    order = np.lexsort(ranks.T[::-1]) if n else np.zeros(0, dtype=np.intp)
    assert np.argsort(keys, kind="stable").tolist() == order.tolist()
    assert len(np.unique(keys)) == len(np.unique(ranks, axis=0)) if n else len(keys) == 0
