"""The Spark backend of the partition seam against the contract: the labels of ``apply`` on Spark equal those of the
inline local backend and of the per-partition reference (``tests.partitioned_checks``), whatever the batching, and
the columns reach the kernel with their numpy types and values (unsigned codes, NaN counterfeits)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from dagster_privrelease.core.partitioned import Seeds, apply
from tests.partitioned_checks import assert_same_labels, random_labels

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def typed_labels(columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A kernel whose labels are its input: the uint8 code, 100 for a NaN of ``x``, ``flag`` as 1000; it refuses a
    column that lost its type or a partition whose rows are out of input order (``pos`` increasing)."""
    assert columns["code"].dtype == np.uint8 and columns["x"].dtype == np.float64 and columns["flag"].dtype == bool
    for key in np.unique(columns["key"]):
        assert (np.diff(columns["pos"][columns["key"] == key]) > 0).all()
    return columns["code"].astype(np.int64) + 100 * np.isnan(columns["x"]) + 1000 * columns["flag"]


def test_random_kernel_same_labels_for_every_batching(spark) -> None:
    from dagster_privrelease.spark import SparkBackend

    rng = np.random.default_rng(7)
    keys = rng.integers(0, 23, size=600) * 3 + 5  # sparse keys, partitions of unequal sizes
    columns = {"x": rng.integers(0, 50, size=600)}
    for batches in (1, 3, 8):
        assert_same_labels(random_labels, keys, columns, Seeds(seed=11, release=4), SparkBackend(spark, batches))


def test_columns_reach_the_kernel_typed_and_in_order(spark) -> None:
    from dagster_privrelease.spark import SparkBackend

    rng = np.random.default_rng(3)
    n = 400
    x = rng.random(n)
    x[::9] = np.nan
    columns = {"code": rng.integers(0, 256, size=n).astype(np.uint8), "x": x, "flag": rng.random(n) < 0.5,
               "pos": np.arange(n)}
    keys = rng.integers(0, 9, size=n)
    expected = columns["code"].astype(np.int64) + 100 * np.isnan(x) + 1000 * columns["flag"]
    labels = SparkBackend(spark, batches=4).run(typed_labels, {**columns, "key": keys}, Seeds(1, 1))
    np.testing.assert_array_equal(labels, expected)
    assert_same_labels(typed_labels, keys, columns, Seeds(1, 1), SparkBackend(spark, batches=4))


def test_no_rows(spark) -> None:
    from dagster_privrelease.spark import SparkBackend

    empty = np.zeros(0, dtype=np.int64)
    assert len(apply(random_labels, empty, {}, Seeds(1, 1), SparkBackend(spark))) == 0
