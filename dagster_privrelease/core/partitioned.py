"""The partition seam (issue #26 item 4): apply a kernel to every partition of a table's codes, wherever it runs.

Work that runs bucket by bucket (m-invariance's split of a balanced bucket, Xiao-Tao §4.3; Mondrian below a cut of
its tree) is written as a ``Kernel``: a top-level function given the rows of one or more whole partitions as 1-D
numpy columns (``"key"``, int64, the partition of each row, among them) and returning one int64 label per row. A
group is (key, label): labels need only be distinct within a partition. A ``Backend`` decides how to batch whole
partitions into kernel calls and where to run them: ``LocalBackend`` on a pool of threads of this process (numpy
releases the GIL), the Spark backend (``dagster_privrelease.spark``) on a cluster. ``apply`` numbers the groups
0..G-1 in order of (key, label), so its result does not depend on the backend or on its batching.

Randomness: a kernel that draws draws from ``seeds.rng(key)`` per partition, ``default_rng([seed, release, key])``,
so a partition's draws do not depend on which partitions share its call nor on which machine runs it. The kernels of
this package (the split, Mondrian) are deterministic and ignore their seeds.

Which backend runs: ``current()``, set for a block by ``using(backend)`` (the pipeline wraps a model's ``publish``
in it), else a ``LocalBackend`` of ``PRIVRELEASE_WORKERS`` threads (default: the machine's cores).

The global steps (issue #27): what reads every partition at once goes through a few primitives over columns of
codes, the way PipelineDP's ``pipeline_backend`` puts one algorithm on a local or a Spark backend
(``count_per_element``, ``filter_by_key``): ``Aggregations.count_per_key`` (a group-by count),
``Aggregations.lookup`` (a left join against distinct keys) and ``Aggregations.previous_per_key`` (a lag by key:
each row's previous row of the same key, the judge's per-individual folds). A backend that has them runs them
where its data is (Spark: a DataFrame aggregation, a join, a window); ``dense_counts``, ``lookup`` and
``previous_per_key`` fall back to the local ones for a backend that does not. Their results are defined from the
data alone (keys in lexicographic order, rows in input order), so every backend returns the same arrays.

Pure: numpy (and pandas or pyarrow for the local look-up's hash index and the lag's numbering, imported when they
run), no Dagster, no DuckDB, no pyspark.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from ..errors import SpecError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Aggregations", "Backend", "Kernel", "LocalBackend", "Seeds", "aggregations", "apply", "current",
           "dense_counts", "last_per_key", "lookup", "numbered", "parallelism", "previous_per_key", "using"]

#: The environment variable holding the local backend's number of threads.
WORKERS = "PRIVRELEASE_WORKERS"


@dataclass(frozen=True)
class Seeds:
    """The randomness of one release: every partition's generator derives from (seed, release, partition key).

    Attributes:
        seed: the spec's seed.
        release: the release id.
    """

    seed: int
    release: int

    def rng(self, key: int) -> np.random.Generator:
        """``np.random.default_rng([seed, release, key])``: a partition's randomness, whoever runs it. O(1)."""
        return np.random.default_rng([self.seed, self.release, int(key)])


#: A kernel: the rows of one or more whole partitions (1-D columns, ``"key"`` among them, each partition's rows in
#: their input order) and the release's seeds in; one int64 label per row out, distinct within a partition. A
#: picklable top-level function (parameters bound with ``functools.partial``) whose labels for a partition do not
#: depend on the other partitions of the call.
Kernel = Callable[[Mapping[str, np.ndarray], Seeds], np.ndarray]


class Backend(Protocol):
    """Where the kernels run.

    Attributes:
        name: what the UI and the run log call it (``"local"``, ``"spark"``).
    """

    name: str

    def run(self, kernel: Kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        """The kernel's labels for every row of ``columns`` (input row order), the backend choosing how to batch
        whole partitions (rows of equal ``columns["key"]``) into calls and where to run them."""
        ...


@runtime_checkable
class Aggregations(Protocol):
    """The global steps' primitives, run where the backend's data is (PipelineDP's ``pipeline_backend`` shape).

    Each names its ``step`` (a fixed string of the code, never a value), which a backend's error names. Their
    results depend on the data alone, so every implementation returns the same arrays.

    Attributes:
        name: what the UI and the run log call the backend.
    """

    name: str

    def count_per_key(self, keys: Mapping[str, np.ndarray], step: str) -> dict[str, np.ndarray]:
        """The distinct tuples of the integer columns ``keys`` (n rows each) with how many rows hold each: the
        same names, each tuple once, in lexicographic order of the columns as given, and ``"count"`` (int64).
        SQL's ``SELECT keys, count(*) GROUP BY keys ORDER BY keys``."""
        ...

    def lookup(self, keys: ArrayLike, table: ArrayLike, step: str) -> np.ndarray:
        """For each of ``keys``, the position in ``table`` (distinct keys: integer codes or text ids, as arrays or
        pandas columns) of the equal key, -1 when none: a left join of ``keys`` against ``table``, as int64 in the
        order of ``keys``."""
        ...

    def previous_per_key(self, keys: ArrayLike, step: str) -> np.ndarray:
        """For each row of ``keys`` (integer codes or text ids, as an array or a pandas column), the position of the
        nearest earlier row holding an equal key, -1 for a key's first row, as int64 in row order: SQL's
        ``lag(row) OVER (PARTITION BY key ORDER BY row)``. With the rows in time order, each row's previous
        appearance of its key (a person's last appearance before this one)."""
        ...


def apply(kernel: Kernel, keys: np.ndarray, columns: Mapping[str, np.ndarray], seeds: Seeds,
          backend: Backend | None = None) -> np.ndarray:
    """Global group ids 0..G-1 of ``kernel`` run on every partition of ``columns``, numbered in order of (key, label).

    Args:
        kernel: what runs on each partition (``Kernel``).
        keys: (n,) the partition of every row (integers).
        columns: 1-D arrays of n rows each, the kernel's input (``"key"`` is added from ``keys``).
        seeds: the release's randomness (``Seeds``).
        backend: where it runs; None: ``current()``.

    Returns:
        (n,) int64 group ids, independent of the backend and of how it batched the partitions.

    Cost: the backend's run plus one sort of the n (key, label) pairs.
    """
    keys = np.asarray(keys, dtype=np.int64)
    runner = current() if backend is None else backend
    labels = np.asarray(runner.run(kernel, {**columns, "key": keys}, seeds), dtype=np.int64)
    if labels.shape != keys.shape:
        raise ValueError(f"backend {runner.name!r} returned {labels.shape} labels for {len(keys)} rows")
    return numbered(keys, labels)


def numbered(keys: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Ids 0..G-1 of the distinct (key, label) pairs, in their lexicographic order. One lexsort: O(n log n)."""
    order = np.lexsort((labels, keys))
    k, lab = keys[order], labels[order]
    new = np.empty(len(order), dtype=bool)
    new[:1] = True
    np.not_equal(k[1:], k[:-1], out=new[1:])
    new[1:] |= lab[1:] != lab[:-1]
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


class LocalBackend:
    """Kernels on a pool of threads of this process: whole partitions batched into about ``workers`` calls of
    similar row counts (numpy releases the GIL while a kernel sorts and reduces); ``workers=1`` runs the kernel
    inline, once, on all the rows.

    Attributes:
        name: ``"local"``.
        workers: the threads (and calls) a run uses at most.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: the threads; None: ``PRIVRELEASE_WORKERS``, else the machine's cores. Raises SpecError, naming
        the variable, when it is not a positive integer."""
        self.workers = _workers_from_environment() if workers is None else workers
        if self.workers < 1:
            raise SpecError(f"workers: expected a positive integer, got {self.workers}")

    def __repr__(self) -> str:
        return f"LocalBackend(workers={self.workers})"

    def run(self, kernel: Kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        """The kernel's labels for every row (``Backend.run``). Inline when one worker or one partition; else the
        rows grouped by key (a stable sort: each partition keeps its input order), cut at partition boundaries
        into ``workers`` batches of about n / workers rows, each batch's columns gathered (a copy) and run on a
        thread. Memory: one copy of the columns beside the input."""
        keys = columns["key"]
        if self.workers == 1 or len(keys) == 0 or keys.min() == keys.max():
            return kernel(columns, seeds)
        order = np.argsort(keys, kind="stable")
        batches = np.split(order, _cuts(keys[order], self.workers))
        labels = np.empty(len(keys), dtype=np.int64)

        def call(rows: np.ndarray, context: Context) -> None:
            labels[rows] = context.run(kernel, {name: column[rows] for name, column in columns.items()}, seeds)

        # each call runs in a copy of the caller's context (``references()``, ``using``), made on this thread
        with ThreadPoolExecutor(max_workers=len(batches)) as pool:
            list(pool.map(call, batches, [copy_context() for _ in batches]))
        return labels


    def count_per_key(self, keys: Mapping[str, np.ndarray], step: str) -> dict[str, np.ndarray]:
        """``Aggregations.count_per_key`` on this process: ``np.bincount`` of the tuples' mixed-radix index when
        the columns are non-negative codes whose product of ranges is at most ``max(4 n, 2^16)`` cells (O(n +
        cells)), else one lexsort of the rows (O(n log n))."""
        names = list(keys)
        columns = [np.asarray(keys[name]) for name in names]
        dense = _dense_cells(columns)
        if dense is not None:
            counted = np.bincount(np.ravel_multi_index(columns, dense), minlength=int(np.prod(dense)))
            present = np.flatnonzero(counted)  # ascending flat index: the tuples in lexicographic order
            tuples = np.unravel_index(present, dense)
            return {**{name: t.astype(c.dtype) for name, t, c in zip(names, tuples, columns, strict=True)},
                    "count": counted[present].astype(np.int64)}
        order = np.lexsort(columns[::-1]) if names else np.zeros(0, dtype=np.int64)
        ordered = [column[order] for column in columns]
        new = np.zeros(len(order), dtype=bool)
        new[:1] = True
        for column in ordered:
            new[1:] |= column[1:] != column[:-1]
        starts = np.flatnonzero(new)
        return {**{name: column[starts] for name, column in zip(names, ordered, strict=True)},
                "count": np.diff(np.r_[starts, len(order)]).astype(np.int64)}

    def lookup(self, keys: ArrayLike, table: ArrayLike, step: str) -> np.ndarray:
        """``Aggregations.lookup`` on this process: a hash index of ``table`` probed by ``keys``,
        O(len(keys) + len(table)). Text on both sides (object arrays of ``str``, no nulls) is hashed by Arrow
        (``pyarrow.compute.index_in`` over UTF-8 buffers, after one conversion of each side; no Python object is
        hashed or compared), its buffers given back to the system when done;
        anything else by pandas (a categorical column is probed by its codes, never copied as text)."""
        import pandas as pd  # the callers' columns are pandas already; the partition seam alone needs numpy

        words = _arrow_text(table)
        probes = _arrow_text(keys) if words is not None else None
        if words is not None and probes is not None:
            import pyarrow as pa
            import pyarrow.compute as pc

            found = pc.index_in(probes, value_set=words).fill_null(-1).to_numpy().astype(np.int64)
            del words, probes
            pa.default_memory_pool().release_unused()  # the texts' buffers: Arrow's allocator would keep them
            return found
        return pd.Index(table).get_indexer(keys).astype(np.int64, copy=False)

    def previous_per_key(self, keys: ArrayLike, step: str) -> np.ndarray:
        """``Aggregations.previous_per_key`` on this process: the keys numbered by a hash (``pandas.factorize``, a
        categorical column by its codes), then one stable sort of the numbers, each row after an equal one pointing
        back to it. O(n log n); memory three int64 columns of n."""
        import pandas as pd

        number = pd.factorize(keys)[0]
        order = np.argsort(number, kind="stable")
        same = number[order][1:] == number[order][:-1]
        previous = np.full(len(number), -1, dtype=np.int64)
        previous[order[1:][same]] = order[:-1][same]
        return previous


def _dense_cells(columns: list[np.ndarray]) -> tuple[int, ...] | None:
    """Each column's range (its maximum + 1) when every column holds non-negative integers and their product is at
    most ``max(4 n, 2^16)`` cells (a dense count is then cheaper than a sort), else None. O(n) per column."""
    n = len(columns[0]) if columns else 0
    if not n or any(c.dtype.kind not in "iu" or c.min() < 0 for c in columns):
        return None
    ranges = tuple(int(c.max()) + 1 for c in columns)
    return ranges if float(np.prod([float(r) for r in ranges])) <= max(4 * n, 1 << 16) else None


def _arrow_text(values: ArrayLike) -> pa.Array | None:
    """``values`` as an Arrow string array when they are text (an object array or pandas column of ``str``, no
    nulls), else None (numbers, categoricals, mixed objects). O(n) conversion of text, O(1) otherwise."""
    import pyarrow as pa

    if getattr(values, "dtype", None) != np.dtype(object) or not np.size(values):
        return None
    try:
        text = pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return text if not text.null_count else None


def aggregations(backend: Backend | None = None) -> Aggregations:
    """The global steps' primitives of ``backend`` (None: ``current()``), or the local ones when it has none (a
    backend that only runs kernels). O(1)."""
    backend = current() if backend is None else backend
    return backend if isinstance(backend, Aggregations) else LocalBackend(workers=1)


def dense_counts(keys: Mapping[str, np.ndarray], shape: tuple[int, ...], step: str,
                 backend: Backend | None = None) -> np.ndarray:
    """``np.bincount`` of the tuples of ``keys`` as a dense int64 array of ``shape`` (one dimension per column,
    codes within it), counted by ``backend``'s ``count_per_key`` (None: ``current()``). Cost: the count, then a
    scatter of the distinct tuples."""
    counted = aggregations(backend).count_per_key(keys, step)
    out = np.zeros(shape, dtype=np.int64)
    out[tuple(counted[name] for name in keys)] = counted["count"]
    return out


def lookup(keys: ArrayLike, table: ArrayLike, step: str, backend: Backend | None = None) -> np.ndarray:
    """``Aggregations.lookup`` on ``backend`` (None: ``current()``): each key's position in ``table``, -1 when
    absent."""
    return aggregations(backend).lookup(keys, table, step)


def previous_per_key(keys: ArrayLike, step: str, backend: Backend | None = None) -> np.ndarray:
    """``Aggregations.previous_per_key`` on ``backend`` (None: ``current()``): each row's previous row of the same
    key, -1 for a key's first."""
    return aggregations(backend).previous_per_key(keys, step)


def last_per_key(previous: np.ndarray) -> np.ndarray:
    """Each key's last row, the keys in order of their first row, from ``previous`` (``previous_per_key``'s
    result): each chain of rows followed from its first row (-1 in ``previous``) to the row no other row points
    back to. Runs on the driver over the n int64 positions it holds anyway: O(n x the longest chain), a few passes
    when a key has a few rows (a person's last appearance and this release's)."""
    following = np.full(len(previous), -1, dtype=np.int64)
    later = np.flatnonzero(previous >= 0)
    following[previous[later]] = later
    last = np.flatnonzero(previous < 0)
    walking = np.flatnonzero(following[last] >= 0)
    while len(walking):
        last[walking] = following[last[walking]]
        walking = walking[following[last[walking]] >= 0]
    return last


def _cuts(sorted_keys: np.ndarray, batches: int) -> np.ndarray:
    """Positions cutting ``sorted_keys`` into at most ``batches`` runs of whole keys, each about n / batches long:
    every ideal cut i·n/batches moved to the next partition boundary. O(n)."""
    n = len(sorted_keys)
    boundaries = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    ideal = np.arange(1, batches) * n // batches
    at = boundaries[np.minimum(np.searchsorted(boundaries, ideal), len(boundaries) - 1)]
    return np.unique(at)


def _workers_from_environment() -> int:
    """``PRIVRELEASE_WORKERS`` as a positive integer, else the machine's cores; SpecError naming it when unreadable."""
    raw = os.environ.get(WORKERS)
    if raw is None or not raw.strip():
        return os.cpu_count() or 1
    try:
        workers = int(raw)
    except ValueError:
        workers = 0
    if workers < 1:
        raise SpecError(f"{WORKERS}: expected a positive integer (the local backend's threads), got {raw!r}")
    return workers


def parallelism(backend: Backend) -> int:
    """How many kernel calls ``backend`` runs at once: its ``workers`` attribute when it has one, else 1. Callers
    size their partitions with it (Mondrian cuts its tree into about 4 x this many regions)."""
    workers = getattr(backend, "workers", 1)
    return workers if isinstance(workers, int) and workers > 0 else 1


#: The backend set by ``using`` for this context, None when none is.
_BACKEND: ContextVar[Backend | None] = ContextVar("privrelease_backend", default=None)


@contextmanager
def using(backend: Backend) -> Iterator[None]:
    """Inside the block ``current()`` is ``backend``. O(1)."""
    token = _BACKEND.set(backend)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def current() -> Backend:
    """The backend set by the innermost ``using``, else a ``LocalBackend()`` (``PRIVRELEASE_WORKERS`` threads)."""
    backend = _BACKEND.get()
    return LocalBackend() if backend is None else backend
