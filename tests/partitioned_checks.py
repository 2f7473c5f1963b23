"""Checks of a partition backend (``core.partitioned``) shared by the local and the Spark backends' tests.

``assert_same_labels`` compares a backend's ``apply`` with ``apply`` on ``LocalBackend(workers=1)`` (one inline call
on all the rows) and with ``naive_apply``, written here from the seam's contract alone: the kernel called once per
partition, on that partition's rows in input order, and the (key, label) pairs numbered in lexicographic order.
``random_labels`` is a picklable toy kernel that draws its labels from ``seeds.rng(key)`` per partition.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dagster_privrelease.core.partitioned import Backend, Kernel, LocalBackend, Seeds, apply


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
