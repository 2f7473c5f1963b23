"""The Spark backend of the partition seam against the contract: the labels of ``apply`` on Spark equal those of the
inline local backend and of the per-partition reference (``tests.partitioned_checks``), whatever the batching, and
the columns reach the kernel with their numpy types and values (unsigned codes, NaN counterfeits); its global-step
primitives equal their naive references; a kernel that fails on Spark is one ``BackendError`` line naming the step
and its size, never Spark's text."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pytest

from dagster_privrelease.core.partitioned import Seeds, apply
from dagster_privrelease.errors import BackendError
from tests.partitioned_checks import assert_primitives, assert_same_labels, random_labels

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


def test_split_kernel_same_groups_on_spark(spark) -> None:
    """m-invariance's split (§4.3, ``kernels.split.split_buckets``) on Spark: six balanced buckets (2-4 values, 1-9
    tuples each, a few counterfeits), rows interleaved, uint8 ranks; the groups equal the inline and per-bucket
    ones for two batchings."""
    from dagster_privrelease.core.models.kernels import split as kernel
    from dagster_privrelease.spark import SparkBackend

    rng = np.random.default_rng(9)
    parts = []
    for b in range(6):
        s, c = int(rng.integers(2, 5)), int(rng.integers(1, 10))
        X = rng.random((s * c, 3))
        X[: int(rng.integers(0, 2)) * c] = np.nan  # a whole value's tuples counterfeit: no QI values
        parts.append((X, np.repeat(rng.choice(8, s, replace=False), c), np.full(s * c, 1000 - 7 * b)))
    order = rng.permutation(sum(len(p[1]) for p in parts))
    X, values, keys = (np.concatenate([p[i] for p in parts])[order] for i in range(3))
    ranks, table = kernel.rank_codes(X)
    assert ranks.dtype == np.uint8
    for batches in (2, 5):
        assert_same_labels(partial(kernel.split_buckets, table=table), keys, kernel.split_columns(ranks, values),
                           Seeds(0, 1), SparkBackend(spark, batches))


def test_primitives_on_spark_equal_the_naive_references(spark) -> None:
    from dagster_privrelease.spark import SparkBackend

    assert_primitives(SparkBackend(spark))
    with pytest.raises(BackendError, match="holds a key more than once"):
        SparkBackend(spark).lookup(np.array([4, 5]), np.array([5, 4, 5]), "test lookup")


def refuse_thirteen(columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A careless kernel: it refuses the row whose ``x`` is 13 with a message quoting a person and a value."""
    if (columns["x"] == 13).any():
        raise ValueError("p013 has hiv")
    return columns["x"].astype(np.int64)


def test_a_failing_kernel_is_one_line_naming_the_step_never_sparks_text(spark) -> None:
    from dagster_privrelease.spark import SparkBackend

    keys, x = np.repeat(np.arange(6), 5), np.arange(30)
    with pytest.raises(BackendError) as caught:
        apply(refuse_thirteen, keys, {"x": x}, Seeds(1, 1), SparkBackend(spark, batches=3))
    message = str(caught.value)
    assert "\n" not in message
    assert "kernel refuse_thirteen on 6 partition(s) of 30 rows in 3 batch(es)" in message, message
    assert "p013" not in message and "hiv" not in message and "Traceback" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None  # Spark's text travels nowhere


def test_a_primitive_failing_on_spark_is_one_line_naming_the_step(spark, monkeypatch) -> None:
    """The lag by key (``previous_per_key``) over a column whose reading fails inside Spark, its error quoting a
    person and a value: one ``BackendError`` line naming the step and its rows, never Spark's text."""
    from dagster_privrelease.spark import SparkBackend

    backend = SparkBackend(spark)
    failing = spark.range(3).selectExpr("raise_error('p013 has hiv') AS key", "id AS row")
    monkeypatch.setattr(backend, "frame", lambda columns: failing)
    with pytest.raises(BackendError) as caught:
        backend.previous_per_key(np.array(["p013", "p014", "p013"], dtype=object), "previous appearance by individual")
    message = str(caught.value)
    assert "\n" not in message and "step previous appearance by individual on 3 rows" in message, message
    assert "p013" not in message and "hiv" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None
