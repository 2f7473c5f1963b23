"""Checks of a partition backend (``core.partitioned``) shared by the local and the Spark backends' tests.

``assert_same_labels`` compares a backend's ``apply`` with ``apply`` on ``LocalBackend(workers=1)`` (one inline call
on all the rows) and with ``naive_apply``, written here from the seam's contract alone: the kernel called once per
partition, on that partition's rows in input order, and the (key, label) pairs numbered in lexicographic order.
``random_labels`` is a picklable toy kernel that draws its labels from ``seeds.rng(key)`` per partition.

``assert_primitives`` checks a backend's global-step primitives (``Aggregations``) against ``naive_count_per_key``,
``naive_lookup`` and ``naive_previous_per_key`` (with ``naive_last_per_key`` for ``partitioned.last_per_key``),
written from their definitions with Python's dicts and sorted lists: typed codes (uint8, int16, sparse int64 keys),
text ids (``p007``) some of which are absent or come back after a gap, a categorical column, and empty inputs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dagster_privrelease.core.partitioned import (
    Aggregations,
    Backend,
    Kernel,
    LocalBackend,
    Seeds,
    apply,
    last_per_key,
)


def random_labels(columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A toy kernel: per partition, labels drawn from ``seeds.rng(key)`` (a few values, some negative, so that
    groups share labels across partitions and a label's order is not the rows' order), plus ``x`` when given."""
    keys = columns["key"]
    labels = np.empty(len(keys), dtype=np.int64)
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        labels[rows] = seeds.rng(int(key)).integers(-3, 4, size=len(rows)) * 10
    if "x" in columns:
        labels += columns["x"].astype(np.int64) % 10
    return labels


def naive_apply(kernel: Kernel, keys: np.ndarray, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """The contract's group ids, from its definition: one kernel call per partition (its rows in input order),
    then the distinct (key, label) pairs numbered 0..G-1 in lexicographic order."""
    pair: list[tuple[int, int]] = [(0, 0)] * len(keys)
    for key in sorted(set(keys.tolist())):
        rows = [i for i, k in enumerate(keys.tolist()) if k == key]
        part = {name: column[rows] for name, column in columns.items()}
        part["key"] = np.full(len(rows), key, dtype=np.int64)
        for row, label in zip(rows, kernel(part, seeds).tolist(), strict=True):
            pair[row] = (key, int(label))
    number = {p: i for i, p in enumerate(sorted(set(pair)))}
    return np.array([number[p] for p in pair], dtype=np.int64)


def assert_same_labels(kernel: Kernel, keys: np.ndarray, columns: Mapping[str, np.ndarray], seeds: Seeds,
                       backend: Backend) -> None:
    """``apply`` on ``backend`` gives, row for row, the ids of ``apply`` on ``LocalBackend(workers=1)`` and of
    ``naive_apply``."""
    got = apply(kernel, keys, columns, seeds, backend)
    inline = apply(kernel, keys, columns, seeds, LocalBackend(workers=1))
    reference = naive_apply(kernel, keys, columns, seeds)
    np.testing.assert_array_equal(got, reference, err_msg=f"{backend!r} differs from the per-partition reference")
    np.testing.assert_array_equal(inline, reference, err_msg="LocalBackend(workers=1) differs from the reference")


def naive_count_per_key(keys: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    """``count_per_key`` from its definition: each distinct tuple of the columns once, in sorted order, with the
    number of rows holding it."""
    counted = Counter(zip(*(column.tolist() for column in keys.values()), strict=True))
    tuples = sorted(counted)
    return {**{name: [t[i] for t in tuples] for i, name in enumerate(keys)}, "count": [counted[t] for t in tuples]}


def naive_lookup(keys: np.ndarray, table: np.ndarray) -> list[int]:
    """``lookup`` from its definition: each key's position in ``table``, -1 when absent."""
    position = {key: i for i, key in enumerate(table.tolist())}
    return [position.get(key, -1) for key in keys.tolist()]


def naive_previous_per_key(keys: list) -> list[int]:
    """``previous_per_key`` from its definition: walking the rows in order, each row's previous row of the same
    key is the last row seen with it, -1 when none was."""
    latest: dict = {}
    previous = []
    for row, key in enumerate(keys):
        previous.append(latest.get(key, -1))
        latest[key] = row
    return previous


def naive_last_per_key(keys: list) -> list[int]:
    """``last_per_key`` from its definition: each key's last row, the keys in order of their first row (a dict
    keeps its keys in the order they were first set)."""
    return list({key: row for row, key in enumerate(keys)}.values())


def assert_primitives(backend: Aggregations) -> None:
    """``backend``'s ``count_per_key`` and ``lookup`` equal the naive references on typed codes, sparse keys, text
    ids and empty inputs, and keep the columns' types."""
    rng = np.random.default_rng(17)
    keys = {"bucket": rng.integers(0, 5, 300).astype(np.int64) * 1_000_003, "value": rng.integers(0, 7, 300)
            .astype(np.uint8), "flag": rng.integers(-2, 2, 300).astype(np.int16), "group": rng.integers(0, 9, 300)}
    # dense codes (a local backend may count them in cells) and sparse or negative ones (sorted)
    for names in (["group", "value"], ["value"], ["bucket", "value"], ["flag", "bucket", "value"]):
        part = {name: keys[name] for name in names}
        got = backend.count_per_key(part, "test counts")
        assert {name: got[name].tolist() for name in got} == naive_count_per_key(part), names
        assert all(got[name].dtype == part[name].dtype for name in names) and got["count"].dtype == np.int64
    empty = backend.count_per_key({"value": np.zeros(0, np.uint8)}, "test counts")
    assert empty["value"].tolist() == [] and empty["count"].tolist() == []
    table = np.array([f"p{i:03d}" for i in rng.permutation(40)], dtype=object)
    probe = np.array([f"p{i:03d}" for i in rng.integers(0, 60, 120)], dtype=object)  # a third absent, repeats
    got = backend.lookup(probe, table, "test lookup")
    assert got.dtype == np.int64 and got.tolist() == naive_lookup(probe, table)
    near = np.array(["é", "e", "B", "b", "007", "7", "p 1"], dtype=object)  # text that differs by a byte only
    probe = np.array(["b", "7", "é", "E", "07", "p1", "007"], dtype=object)
    assert backend.lookup(pd.Series(probe), near, "test lookup").tolist() == naive_lookup(probe, near)
    codes = rng.permutation(50).astype(np.int64) * 7
    probe = rng.integers(0, 400, 90).astype(np.int64)
    assert backend.lookup(probe, codes, "test lookup").tolist() == naive_lookup(probe, codes)
    assert backend.lookup(probe, codes[:0], "test lookup").tolist() == [-1] * len(probe)
    assert backend.lookup(probe[:0], codes, "test lookup").tolist() == []
    # a stream of appearances: text ids leaving and coming back, a person twice in a row, integer codes
    people = [f"p{i:03d}" for i in rng.integers(0, 25, 200)]
    for keys in (np.array(people, dtype=object), pd.Series(people, dtype="category"), np.array(people[:1], dtype=object),
                 rng.integers(0, 6, 150).astype(np.uint8), rng.integers(-3, 3, 150) * 1_000_003):
        got = backend.previous_per_key(keys, "test previous")
        expected = naive_previous_per_key(list(keys))
        assert got.dtype == np.int64 and got.tolist() == expected, type(keys)
        assert last_per_key(got).tolist() == naive_last_per_key(list(keys))
    assert backend.previous_per_key(np.zeros(0, np.int64), "test previous").tolist() == []
    assert last_per_key(np.zeros(0, np.int64)).tolist() == []
