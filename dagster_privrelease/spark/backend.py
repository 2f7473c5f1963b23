"""The Spark backend of the partition seam (``core.partitioned``): a kernel runs on Spark's Python workers, whole
partitions batched into groups of ``groupBy("batch").applyInArrow(...)`` (issue #27).

As mosaicrown/mondrian does on PySpark, the driver decides which partition goes where and the executors run the
kernel on Arrow columns; PipelineDP's ``pipeline_backend`` is the model of one algorithm behind several backends.
The kernel and its ``Seeds`` travel by cloudpickle (a kernel is a top-level function, parameters bound with
``functools.partial``: it is pickled by reference, so the package must be importable on the workers). A kernel draws
its randomness from ``seeds.rng(key)`` per partition, so its labels do not depend on the batching, and
``partitioned.apply`` numbers the groups from (key, label): both backends publish the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from ..core.partitioned import Kernel, Seeds

__all__ = ["SparkBackend", "batches_of"]

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
        batch = batches_of(np.asarray(columns["key"]), self.workers)
        dtypes = {name: np.asarray(values).dtype for name, values in columns.items()}
        table = pa.table({**{name: _arrow(values) for name, values in columns.items()},
                          "row": pa.array(np.arange(n, dtype=np.int64)), "batch": pa.array(batch)})
        frame = self.session.createDataFrame(table)
        one = partial(run_batch, kernel, seeds, dtypes)

        def each(table: pa.Table) -> pa.Table:  # annotated: pyspark infers the UDF's kind from the hints
            return one(table)

        out = frame.groupBy("batch").applyInArrow(each, LABELS).toArrow()
        rows, labels = out.column("row").to_numpy(), out.column("label").to_numpy()
        if len(rows) != n or len(np.unique(rows)) != n:
            raise RuntimeError(f"the Spark backend returned {len(rows)} labels for {n} rows")
        result = np.empty(n, dtype=np.int64)
        result[rows] = labels
        return result


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
    """The session's default parallelism (its cores in local mode); 2 for a Spark Connect session, whose
    context the client cannot read, unless ``spark.default.parallelism`` is set."""
    try:
        return int(session.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: no SparkContext on the client
        return int(session.conf.get("spark.default.parallelism", "2") or 2)
