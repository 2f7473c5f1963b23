"""The partition seam (``core.partitioned``): ``apply``'s ids do not depend on how a backend batches the partitions,
the local backend equals the per-partition reference with 1 and 4 workers, and a partition's randomness is
``default_rng([seed, release, key])``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextvars import ContextVar
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import partitioned
from dagster_privrelease.core.partitioned import LocalBackend, Seeds, apply, current, using
from dagster_privrelease.errors import SpecError
from tests.budget import examples
from tests.partitioned_checks import assert_primitives, assert_same_labels, naive_apply, naive_lookup, random_labels


class Shuffled:
    """A backend that batches the partitions as it is told: partition p goes to call ``batch_of[p]``, the calls'
    partitions in a shuffled order (each partition's rows keep their input order)."""

    name = "shuffled"

    def __init__(self, batch_of: list[int], seed: int) -> None:
        self.batch_of, self.seed = batch_of, seed

    def run(self, kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        keys = columns["key"]
        distinct = np.unique(keys)
        shuffle = np.random.default_rng(self.seed)
        labels = np.empty(len(keys), dtype=np.int64)
        for batch in set(self.batch_of):
            mine = [k for i, k in enumerate(distinct) if self.batch_of[i % len(self.batch_of)] == batch]
            rows = np.concatenate([np.flatnonzero(keys == k) for k in shuffle.permutation(mine)] or [[]]).astype(int)
            labels[rows] = kernel({name: column[rows] for name, column in columns.items()}, seeds)
        return labels


def stream(sizes: list[int], seed: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Rows of partitions of ``sizes`` (text-like sparse keys, rows interleaved at random) and a column ``x``."""
    rng = np.random.default_rng(seed)
    keys = rng.permutation(np.repeat(np.arange(len(sizes)) * 7 + 100, sizes))
    return keys, {"x": rng.integers(0, 50, size=len(keys))}


@settings(max_examples=examples(60), deadline=None)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=12), seed=st.integers(0, 2**32 - 1),
       batch_of=st.lists(st.integers(0, 3), min_size=1, max_size=12))
def test_ids_do_not_depend_on_how_the_partitions_are_batched(sizes, seed, batch_of):
    keys, columns = stream(sizes, seed)
    seeds = Seeds(seed % 1000, 4)
    got = apply(random_labels, keys, columns, seeds, Shuffled(batch_of, seed))
    np.testing.assert_array_equal(got, naive_apply(random_labels, keys, columns, seeds))
    np.testing.assert_array_equal(got, apply(random_labels, keys, columns, seeds, Shuffled([0], seed + 1)))


@settings(max_examples=examples(30), deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=20), seed=st.integers(0, 2**32 - 1),
       workers=st.sampled_from([1, 4]))
def test_local_backend_equals_the_per_partition_reference(sizes, seed, workers):
    keys, columns = stream(sizes, seed)
    assert_same_labels(random_labels, keys, columns, Seeds(3, 12), LocalBackend(workers=workers))


def test_ids_are_numbered_by_key_then_label():
    keys = np.array([5, 2, 5, 2, 2])
    labels = np.array([-1, 9, 4, 9, 0])
    # pairs (2, 0) < (2, 9) < (5, -1) < (5, 4)
    np.testing.assert_array_equal(partitioned.numbered(keys, labels), [2, 1, 3, 1, 0])


def test_seeds_rng_is_default_rng_of_seed_release_key():
    seeds = Seeds(seed=42, release=7)
    np.testing.assert_array_equal(seeds.rng(3).integers(0, 2**62, size=5),
                                  np.random.default_rng([42, 7, 3]).integers(0, 2**62, size=5))
    draws = {(s.seed, s.release, key): tuple(s.rng(key).integers(0, 2**62, size=2))
             for s in (Seeds(42, 7), Seeds(42, 8), Seeds(43, 7)) for key in (3, 4)}
    assert len(set(draws.values())) == len(draws)  # each of seed, release and key changes the stream


def test_a_partitions_draws_do_not_depend_on_its_batch():
    keys = np.repeat([10, 20, 30], [5, 6, 7])
    seeds = Seeds(1, 2)
    alone = random_labels({"key": keys[keys == 20]}, seeds)
    together = random_labels({"key": keys}, seeds)[keys == 20]
    np.testing.assert_array_equal(alone, together)
    np.testing.assert_array_equal(alone, np.random.default_rng([1, 2, 20]).integers(-3, 4, size=6) * 10)


def record(calls: list, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A kernel that records the keys and the thread of its call and labels every row 0."""
    calls.append((tuple(np.unique(columns["key"]).tolist()), len(columns["key"]), threading.get_ident()))
    return np.zeros(len(columns["key"]), dtype=np.int64)


def test_four_workers_batch_whole_partitions_of_similar_sizes_on_threads():
    keys = np.random.default_rng(0).permutation(np.repeat(np.arange(40), 25))
    calls: list = []
    ids = apply(partial(record, calls), keys, {}, Seeds(0, 1), LocalBackend(workers=4))
    np.testing.assert_array_equal(ids, keys)  # label 0 in every partition: one group per key
    assert len(calls) == 4
    seen = [k for batch, _, _ in calls for k in batch]
    assert sorted(seen) == list(range(40))  # every partition in exactly one call
    assert {rows for _, rows, _ in calls} == {250}
    assert threading.get_ident() not in {thread for _, _, thread in calls}


def test_one_worker_runs_inline_in_one_call():
    calls: list = []
    apply(partial(record, calls), np.repeat(np.arange(5), 3), {}, Seeds(0, 1), LocalBackend(workers=1))
    assert [(batch, rows, thread) for batch, rows, thread in calls] == [((0, 1, 2, 3, 4), 15, threading.get_ident())]


def test_a_big_partition_is_never_cut():
    keys = np.repeat([0, 1, 2], [100, 3, 3])
    calls: list = []
    apply(partial(record, calls), keys, {}, Seeds(0, 1), LocalBackend(workers=4))
    assert sorted(rows for _, rows, _ in calls) == [6, 100]


_MODE: ContextVar[int] = ContextVar("test_mode", default=0)


def by_mode(columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A kernel reading a context variable of its caller."""
    return np.full(len(columns["key"]), _MODE.get(), dtype=np.int64)


def test_kernels_on_threads_see_the_callers_context():
    keys = np.repeat(np.arange(8), 4)
    token = _MODE.set(1)
    try:
        calls = LocalBackend(workers=4).run(by_mode, {"key": keys}, Seeds(0, 1))
    finally:
        _MODE.reset(token)
    assert (calls == 1).all()


def test_empty_input_gives_no_ids():
    assert len(apply(random_labels, np.zeros(0, dtype=np.int64), {}, Seeds(0, 1), LocalBackend(workers=4))) == 0


def test_using_sets_the_current_backend_for_the_block():
    outer, inner = LocalBackend(workers=2), LocalBackend(workers=3)
    with using(outer):
        assert current() is outer
        with using(inner):
            assert current() is inner
        assert current() is outer
    assert isinstance(current(), LocalBackend) and current() is not outer


def test_workers_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(partitioned.WORKERS, "3")
    assert LocalBackend().workers == 3
    monkeypatch.delenv(partitioned.WORKERS)
    assert LocalBackend().workers >= 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(partitioned.WORKERS, bad)
        with pytest.raises(SpecError, match=f"PRIVRELEASE_WORKERS: expected a positive integer.*{bad!r}"):
            LocalBackend()


def test_a_backend_returning_the_wrong_number_of_labels_is_refused():
    class Short:
        name = "short"

        def run(self, kernel, columns, seeds):
            return np.zeros(len(columns["key"]) - 1, dtype=np.int64)

    with pytest.raises(ValueError, match="backend 'short' returned"):
        apply(random_labels, np.arange(3), {}, Seeds(0, 1), Short())


def test_local_primitives_equal_the_naive_references() -> None:
    assert_primitives(LocalBackend(workers=2))


def test_the_local_look_up_of_objects_that_are_not_all_text_compares_python_values() -> None:
    """Text goes through Arrow's hash; an object column that is not all text (a number among ids, a null) falls
    back to pandas and compares the Python values (``7 == 7.0``, ``"7" != 7``), as the naive reference does."""
    table = np.array([7, "7", 8.0, None], dtype=object)
    keys = np.array(["7", 7, 8, None, "8"], dtype=object)
    assert LocalBackend(workers=1).lookup(keys, table, "t").tolist() == naive_lookup(keys, table) == [1, 0, 2, 3, -1]
    text = np.array(["p1", None], dtype=object)
    assert LocalBackend(workers=1).lookup(np.array(["p1", "p2"], dtype=object), text, "t").tolist() == [0, -1]


def test_a_backend_without_primitives_counts_and_looks_up_locally() -> None:
    """A backend that only runs kernels (no ``Aggregations``) still serves the global steps: ``dense_counts``,
    ``lookup`` and ``previous_per_key`` fall back to the local primitives, with ``np.bincount``'s and the
    definitions' results."""

    class KernelsOnly:
        name = "kernels-only"

        def run(self, kernel, columns, seeds):
            return kernel(columns, seeds)

    backend = KernelsOnly()
    assert not isinstance(backend, partitioned.Aggregations)
    assert isinstance(partitioned.aggregations(backend), LocalBackend)
    rows, values = np.array([0, 2, 2, 1, 2]), np.array([1, 0, 0, 3, 1])
    expected = np.bincount(rows * 4 + values, minlength=12).reshape(3, 4)
    np.testing.assert_array_equal(partitioned.dense_counts({"r": rows, "v": values}, (3, 4), "t", backend), expected)
    with using(backend):
        assert partitioned.lookup(np.array(["b", "z"], dtype=object), np.array(["a", "b"], dtype=object),
                                  "t").tolist() == [1, -1]
        assert partitioned.previous_per_key(np.array(["b", "a", "b"], dtype=object), "t").tolist() == [-1, -1, 0]
