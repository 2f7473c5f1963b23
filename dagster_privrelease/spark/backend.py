"""The Spark backend of the partition seam (``core.partitioned``): a kernel runs on Spark's Python workers, whole
partitions batched into groups of ``groupBy("batch").applyInArrow(...)``, and the global steps' primitives
(``Aggregations``) run as DataFrame aggregations, joins and windows (issue #27).

As mosaicrown/mondrian does on PySpark, the driver decides which partition goes where and the executors run the
kernel on Arrow columns; PipelineDP's ``pipeline_backend`` is the model of one algorithm behind several backends.
The kernel and its ``Seeds`` travel by cloudpickle (a kernel is a top-level function, parameters bound with
``functools.partial``: it is pickled by reference, so the package must be importable on the workers). A kernel draws
its randomness from ``seeds.rng(key)`` per partition, so its labels do not depend on the batching, and
``partitioned.apply`` numbers the groups from (key, label): both backends publish the same rows.

Nothing here reads the session's ``sparkContext``, which a Spark Connect client does not have. A failure inside
Spark becomes one ``BackendError`` naming the step and its size; Spark's own text, which may quote a stored value
(a Python worker's traceback, a failed cast), is never passed on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TypeVar

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike
from pyspark.sql import DataFrame, SparkSession

from ..core.partitioned import Kernel, Seeds
from ..errors import BackendError

__all__ = ["SparkBackend", "batches_of"]

T = TypeVar("T")

#: The schema of what a batch returns: each row's position in the input and its label.
LABELS = "row long, label long"


class SparkBackend:
    """The partition seam's ``Backend`` on a Spark session (local, a cluster, or Spark Connect).

    Attributes:
        name: "spark", shown in the UI and the run log.
        session: the session the kernels run in.
        workers: how many groups of whole partitions a call is cut into (about one task each): ``batches``, or
            twice the session's default parallelism; callers size their partitions with it
            (``partitioned.parallelism``).
    """

    name = "spark"

    def __init__(self, session: SparkSession, batches: int | None = None) -> None:
        self.session = session
        self.workers = batches or default_parallelism(session) * 2

    def __repr__(self) -> str:
        return f"SparkBackend(workers={self.workers})"

    def run(self, kernel: Kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        """The kernel's labels for every row of ``columns`` (input row order; ``columns`` holds "key").

        The columns go to Spark as one Arrow table with each row's position and batch (``batches_of``); each batch
        is one call of ``kernel`` on a worker, its rows back in input order and cast back to their numpy types
        (Spark has no unsigned integers); the labels come back as Arrow and are put in place by position. Cost:
        the columns are copied once to the JVM and shuffled once by batch; the driver holds the columns and the
        labels (O(n) int64), never a frame of Python objects.
        """
        n = len(columns["key"])
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        keys = np.asarray(columns["key"])
        batch = batches_of(keys, self.workers)
        dtypes = {name: np.asarray(values).dtype for name, values in columns.items()}
        frame = self.frame({**{name: _arrow(values) for name, values in columns.items()},
                            "row": pa.array(np.arange(n, dtype=np.int64)), "batch": pa.array(batch)})
        one = partial(run_batch, kernel, seeds, dtypes)

        def each(table: pa.Table) -> pa.Table:  # annotated: pyspark infers the UDF's kind from the hints
            return one(table)

        size = f"{len(np.unique(keys))} partition(s) of {n} rows in {int(batch.max()) + 1} batch(es)"
        out = collect(lambda: frame.groupBy("batch").applyInArrow(each, LABELS).toArrow(),
                      f"kernel {kernel_name(kernel)}", size)
        rows, labels = out.column("row").to_numpy(), out.column("label").to_numpy()
        if len(rows) != n or len(np.unique(rows)) != n:
            raise BackendError(f"the Spark backend returned {len(rows)} labels for {n} rows (kernel "
                               f"{kernel_name(kernel)}): a row was lost or doubled; nothing was published")
        result = np.empty(n, dtype=np.int64)
        result[rows] = labels
        return result

    def count_per_key(self, keys: Mapping[str, np.ndarray], step: str) -> dict[str, np.ndarray]:
        """``Aggregations.count_per_key`` as ``groupBy(keys).count()`` (map-side combined: the shuffle carries a
        partial count per distinct tuple and task), the distinct tuples sorted on the driver and cast back to the
        columns' types. Cost: the columns copied once to the JVM; the driver holds the result only."""
        names = list(keys)
        n = len(keys[names[0]]) if names else 0
        dtypes = {name: np.asarray(values).dtype for name, values in keys.items()}
        if n == 0:
            return {**{name: np.zeros(0, dtype) for name, dtype in dtypes.items()}, "count": np.zeros(0, np.int64)}
        frame = self.frame({name: _arrow(values) for name, values in keys.items()})
        out = collect(lambda: frame.groupBy(*names).count().toArrow(), step, f"{n} rows")
        columns = [out.column(name).to_numpy().astype(dtypes[name]) for name in names]
        order = np.lexsort(columns[::-1])
        return {**{name: column[order] for name, column in zip(names, columns, strict=True)},
                "count": out.column("count").to_numpy().astype(np.int64)[order]}

    def lookup(self, keys: ArrayLike, table: ArrayLike, step: str) -> np.ndarray:
        """``Aggregations.lookup`` as a left join of (key, row) with (key, position) on Spark (a shuffle of both
        sides by key, or a broadcast of the smaller), positions put in place by row on the driver. A key of
        ``table`` held twice doubles rows of the join: refused (``BackendError``), as the local lookup refuses it.
        Cost: both columns copied once to the JVM, one join; the driver holds two int64 arrays."""
        keys, table = np.asarray(keys), np.asarray(table)  # a categorical column as its values
        n = len(keys)
        if n == 0 or len(table) == 0:
            return np.full(n, -1, dtype=np.int64)
        left = self.frame({"key": _arrow(keys), "row": pa.array(np.arange(n, dtype=np.int64))})
        right = self.frame({"key": _arrow(table), "at": pa.array(np.arange(len(table), dtype=np.int64))})
        size = f"{n} keys against {len(table)}"
        # a SQL expression, not pyspark.sql.functions: those build the session kind the process started with
        out = collect(lambda: left.join(right, on="key", how="left").selectExpr("row", "coalesce(at, -1) AS at")
                      .toArrow(), step, size)
        if len(out) != n:
            raise BackendError(f"step {step}: the lookup's table holds a key more than once ({size}); nothing was "
                               "published")
        return in_row_order(out, "at")

    def previous_per_key(self, keys: ArrayLike, step: str) -> np.ndarray:
        """``Aggregations.previous_per_key`` as the window ``lag(row) OVER (PARTITION BY key ORDER BY row)`` on
        Spark (a shuffle of (key, row) by key, each key's rows sorted within its task), the positions put in place
        by row on the driver. Cost: the column copied once to the JVM, one shuffle; the driver holds two int64
        arrays."""
        keys = np.asarray(keys)  # a categorical column as its values
        n = len(keys)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        frame = self.frame({"key": _arrow(keys), "row": pa.array(np.arange(n, dtype=np.int64))})
        out = collect(lambda: frame.selectExpr(
            "row", "coalesce(lag(row) OVER (PARTITION BY key ORDER BY row), -1) AS previous").toArrow(), step,
            f"{n} rows")
        if len(out) != n:
            raise BackendError(f"step {step}: the Spark backend returned {len(out)} rows for {n}; nothing was "
                               "published")
        return in_row_order(out, "previous")

    def frame(self, columns: Mapping[str, pa.Array]) -> DataFrame:
        """A DataFrame of Arrow ``columns`` (one copy to the JVM; over Spark Connect, to the server)."""
        return self.session.createDataFrame(pa.table(dict(columns)))


def in_row_order(out: pa.Table, column: str) -> np.ndarray:
    """``out[column]`` (int64) put in place by ``out["row"]``, the positions 0..len(out)-1 in some order (a
    shuffle's output). Cost: two int64 arrays on the driver."""
    result = np.empty(len(out), dtype=np.int64)
    result[out.column("row").to_numpy()] = out.column(column).to_numpy()
    return result


def collect(action: Callable[[], T], step: str, size: str) -> T:
    """``action()`` (a Spark action), or one ``BackendError`` naming ``step``, its ``size`` and the exception's type
    and Spark's error condition (fixed identifiers) when Spark fails; raised outside the handler, so neither
    Spark's message nor the chain that holds it travels with the error."""
    try:
        return action()
    except Exception as exc:  # Spark's errors (Py4J, Spark Connect, a Python worker's) share no base class
        condition = getattr(exc, "getCondition", lambda: None)()
        kind = type(exc).__name__ + (f" {condition}" if condition else "")
    raise BackendError(f"the Spark backend failed in step {step} on {size} ({kind}); Spark's message is not "
                       "shown, as it may quote stored values: the executors' logs hold it; nothing was published")


def kernel_name(kernel: Kernel) -> str:
    """A kernel's function name, through ``functools.partial``: the step it runs (``split_buckets``)."""
    return getattr(getattr(kernel, "func", kernel), "__name__", type(kernel).__name__)


def batches_of(keys: np.ndarray, batches: int) -> np.ndarray:
    """A batch 0..batches-1 for every row: whole partitions, in key order, cut into runs of about n / batches rows
    (a partition starting at row offset o of the key-ordered rows goes to batch o * batches // n). Deterministic:
    it depends on the keys only. A partition larger than n / batches is a batch of its own; O(n log n)."""
    unique, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    before = np.cumsum(counts) - counts
    return (before * batches // max(len(keys), 1))[inverse.reshape(-1)].astype(np.int32)


def run_batch(kernel: Kernel, seeds: Seeds, dtypes: Mapping[str, np.dtype], table: pa.Table) -> pa.Table:
    """On a worker: ``kernel`` on one batch (``table``: the columns, "row" and "batch"), its rows put back in input
    order and each column cast back to ``dtypes``; returns each row's position and label."""
    rows = table.column("row").to_numpy()
    order = np.argsort(rows, kind="stable")
    columns = {name: table.column(name).to_numpy()[order].astype(dtype, copy=False) for name, dtype in dtypes.items()}
    labels = np.asarray(kernel(columns, seeds), dtype=np.int64)
    return pa.table({"row": rows[order], "label": labels})


def _arrow(values: np.ndarray) -> pa.Array:
    """One column as Arrow in a type Spark reads: unsigned integers widened to the next signed width (``run_batch``
    casts them back)."""
    values = np.asarray(values)
    if values.dtype.kind == "u":
        values = values.astype(np.dtype(f"i{min(values.dtype.itemsize * 2, 8)}"))
    return pa.array(values)


def default_parallelism(session: SparkSession) -> int:
    """The session's default parallelism (its cores in local mode); for a Spark Connect session, whose client
    has no SparkContext to read it from, ``spark.default.parallelism`` when set, else 2."""
    if is_connect(session):
        return int(session.conf.get("spark.default.parallelism", "2") or 2)
    return int(session.sparkContext.defaultParallelism)


def is_connect(session: SparkSession) -> bool:
    """Whether ``session`` is a Spark Connect client (``pyspark.sql.connect``), read from its class without
    importing the Connect client (which needs grpc). O(1)."""
    return type(session).__module__.startswith("pyspark.sql.connect")
