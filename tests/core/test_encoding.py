"""The value -> code / rank kernels against their plain numpy / pandas definitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import encoding
from tests.budget import examples
from tests.fixtures import xiao_tao


def test_codes_in_is_the_text_lookup_of_every_value():
    values = pd.Series(["flu", None, "hiv", "flu", 3, np.nan], dtype=object)
    vocabulary = ["hiv", "flu", "3"]
    expected = pd.Index(vocabulary).get_indexer(values.astype(str))
    assert encoding.codes_in(values, vocabulary).tolist() == expected.tolist() == [1, -1, 0, 1, 2, -1]


def test_value_codes_puts_the_domain_first_and_names_unseen_values():
    codes, vocabulary = encoding.value_codes(pd.Series(["b", "z", "a", "z"]), ["a", "b"])
    assert vocabulary == ["a", "b", "z"]
    assert codes.tolist() == [1, 2, 0, 2]


def test_sensitive_codes_and_encode_on_the_paper_table():
    snapshot = xiao_tao.table_1a()
    spec = xiao_tao.spec().bind(snapshot)
    codes = encoding.sensitive_codes(snapshot, spec)
    assert [spec.sensitive_values[c] for c in codes] == snapshot[spec.sensitive].astype(str).tolist()
    X = encoding.encode(snapshot, spec)
    for j, name in enumerate(spec.quasi_identifiers):
        qi = spec.quasi_identifiers[name]
        if qi.numeric:
            assert X[:, j].tolist() == snapshot[name].astype(float).tolist()
        else:
            assert [spec.taxonomy(name).leaves[int(r)] for r in X[:, j]] == snapshot[name].astype(str).tolist()


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.integers(-50, 10_000), max_size=200))
def test_unique_keys_and_dense_unique_are_numpys_unique(keys):
    keys = np.array(keys, dtype=np.int64)
    uniques, first, inverse, counts = encoding.unique_keys(keys)
    u, f, i, c = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    assert uniques.tolist() == u.tolist() and first.tolist() == f.tolist()
    assert inverse.tolist() == i.reshape(-1).tolist() and counts.tolist() == c.tolist()
    uniques, inverse = encoding.dense_unique(keys)
    assert uniques.tolist() == u.tolist() and inverse.tolist() == i.reshape(-1).tolist()


@pytest.mark.parametrize("nan", [False, True])
def test_dense_ranks_rank_each_column_and_leave_nan_out(nan):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 7, size=(300, 3)).astype(float) * 1.5
    if nan:
        X[rng.random(X.shape) < 0.2] = np.nan
    ranks, values = encoding.dense_ranks(X)
    for j in range(3):
        known = ~np.isnan(X[:, j])
        assert values[j].tolist() == np.unique(X[known, j]).tolist()
        assert ranks[known, j].tolist() == np.unique(X[known, j], return_inverse=True)[1].reshape(-1).tolist()
        assert (ranks[~known, j] == -1).all()


def test_unique_rows_counts_distinct_rows():
    rows = np.array([[1, 2], [0, 5], [1, 2], [0, 5], [0, 4]])
    distinct, inverse, counts = encoding.unique_rows(rows)
    assert distinct.tolist() == [[0, 4], [0, 5], [1, 2]]
    assert inverse.tolist() == [2, 1, 2, 1, 0] and counts.tolist() == [1, 2, 2]


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_rank_keys_order_rows_as_a_lexicographic_sort(seed, wide):
    """Equal keys for equal rows, and keys in the order of the rows' lexicographic sort (what ``frame_digest``
    sorts by); ``wide`` sizes pass 2^62 so that the key is re-ranked on the way."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(0, 60)), int(rng.integers(1, 6))
    sizes = rng.integers(2**20, 2**40, d) if wide else rng.integers(1, 5, d)
    ranks = np.column_stack([rng.integers(0, min(int(s), 4), n) * (int(s) // 4 or 1) for s in sizes])
    ranks = ranks.reshape(n, d).astype(np.int64)  # a few values per column, spread over its whole size
    keys = encoding.rank_keys(ranks, sizes.tolist())
    rows = [tuple(r) for r in ranks.tolist()]
    for a in range(n):
        for b in range(n):
            assert (keys[a] == keys[b]) == (rows[a] == rows[b])
            assert (keys[a] < keys[b]) == (rows[a] < rows[b])
    assert np.array_equal(np.lexsort(ranks.T[::-1]), np.argsort(keys, kind="stable"))


def test_as_text_spells_as_astype_str_without_a_string_per_cell():
    """``as_text`` against its definition, ``astype(str)``: texts, numbers, mixed values, categoricals of texts and
    of numbers, nulls included; a text column comes back as it is, and a categorical's equal cells share one
    string (one spelled per category, not per cell)."""
    texts = pd.Series(["p007", "007", "flu", "flu"], dtype=object, name="x")
    columns = [texts, pd.Series([1, 2, 2]), pd.Series(["a", 1, 2.5, None], dtype=object),
               texts.astype("category"), pd.Series(["b", None, "a", "b"], dtype="category"),
               pd.Series([3, 1, 3]).astype("category")]
    for values in columns:
        spelled = encoding.as_text(values)
        pd.testing.assert_series_equal(spelled, values.astype(str).astype(object), check_categorical=False)
    assert encoding.as_text(texts) is texts
    coded = encoding.as_text(texts.astype("category"))
    assert coded.iloc[2] is coded.iloc[3]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), max_size=30), st.sampled_from([2**13, 2**29, 2**41]))
def test_narrow_integers_keeps_the_values_with_room_for_a_difference(values, scale):
    values = np.array([v % (2 * scale) - scale for v in values], dtype=np.int64)
    narrow = encoding.narrow_integers(values)
    assert narrow.tolist() == values.tolist()
    top = int(np.abs(values).max()) if len(values) else 0
    expected = np.int64 if not len(values) else np.int16 if top < 2**13 else np.int32 if top < 2**29 else np.int64
    assert narrow.dtype == expected
    if len(values):  # a difference or a sum of two of its values never wraps
        assert (narrow.max() - narrow.min() + 1) == int(values.max()) - int(values.min()) + 1
