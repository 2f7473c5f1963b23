"""The Spark backend of the partition seam (issue #27) against the local one: m-invariance releases 1 and 2 on
Census-KDD workers resampled with replacement (``datasets.resample``) to 1M and 3M rows (about 4 minutes on a
quiet 2-core machine, about 12 GB at 3M); r = 20% of the rows, m = 10, the OCC schema of ``bench_m_invariance``.

For each backend (``LocalBackend()``: threads of this process; ``SparkBackend`` on a ``local[2]`` session started
before the clock runs), ``publish`` is timed whole, everything the backend runs on it: the kernels (the split,
§4.3) and the global steps' primitives (``partitioned.Aggregations``: the counts per signature and of S−, Lemma 4's
joins by id); its ``split on <backend>`` step (``core.progress``) is also timed on its own; then the m-invariance
verifier judges both releases on the same backend (its fold's lag by person). CPU is that of this process and of
every process under it (Spark's JVM and its Python workers; read from ``/proc``, so Linux only), peak memory the
largest sum of their resident sets, sampled every 50 ms. Both backends must publish the same releases, run the
same primitives and give the same verifier's reports; the benchmark says so or fails. Spark on the same 2 cores is not expected to win: the point is the cost of the seam's round trip (Arrow to
the JVM, a shuffle by batch, Arrow back) and its growth with the rows, which ``docs/scaling.md`` extrapolates from.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from dagster_privrelease import datasets
from dagster_privrelease.core.judge.history import History
from dagster_privrelease.core.judge.verifiers.xiao_tao import m_invariance as verify_m_invariance
from dagster_privrelease.core.models import m_invariance
from dagster_privrelease.core.models.kernels.split import rank_codes, split_buckets, split_columns
from dagster_privrelease.core.partitioned import Backend, LocalBackend, Seeds, aggregations, apply, using
from dagster_privrelease.core.progress import reporting
from dagster_privrelease.core.release import PreviousRelease, Release, release_rng
from dagster_privrelease.core.spec import validate_snapshot
from dagster_privrelease.core.stream import split_base_pool, stream

from .bench_m_invariance import occ_spec, occ_table
from .common import figure, loaded, print_table, ratio, skip

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree(root: int) -> list[int]:
    """``root`` and every process under it (``/proc/<pid>/stat``'s parent ids)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry.name)] = int(fields[1])
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += frontier
    return found


def _cpu_and_rss(pids: list[int]) -> tuple[float, float]:
    """CPU seconds (user + system) and resident bytes summed over ``pids``."""
    cpu = rss = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / TICK
    return cpu, rss


@contextmanager
def measured(into: dict) -> Iterator[None]:
    """Wall, CPU and peak resident memory of this process and its children over the block, into ``into``."""
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _cpu_and_rss(_tree(os.getpid()))[1])

    cpu0 = _cpu_and_rss(_tree(os.getpid()))[0]
    sampler = threading.Thread(target=sample, daemon=True)
    start = time.perf_counter()
    sampler.start()
    try:
        yield
    finally:
        done.set()
        sampler.join()
        into["wall"] = time.perf_counter() - start
        into["cpu"] = _cpu_and_rss(_tree(os.getpid()))[0] - cpu0
        into["peak_gb"] = peak[0] / 2**30


class Steps:
    """A ``core.progress`` reporter keeping each finished step's seconds by its innermost name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def started(self, name: str) -> None:
        """Nothing to keep."""

    def finished(self, name: str, seconds: float) -> None:
        """Keep ``seconds`` under the step's own name."""
        self.seconds[name.rsplit(" / ", 1)[-1]] = seconds


class Watched:
    """A backend forwarding its kernels and its primitives to ``inner`` (``aggregations(inner)``: the local ones for
    a backend without them), keeping per kernel call the rows, the partitions and the largest one (the skew that
    bounds a backend's parallelism: a partition is one kernel call) and the primitives' calls."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.name = inner, inner.name
        self.primitives = aggregations(inner)
        self.workers = getattr(inner, "workers", 1)
        self.calls: list[tuple[int, int, int]] = []
        self.steps = 0

    def run(self, kernel, columns, seeds):
        """``inner.run``, after noting the call's rows, partitions and largest partition."""
        counts = np.unique(columns["key"], return_counts=True)[1]
        self.calls.append((len(columns["key"]), len(counts), int(counts.max(initial=0))))
        return self.inner.run(kernel, columns, seeds)

    def count_per_key(self, keys, step):
        """``inner``'s ``count_per_key``, counted."""
        self.steps += 1
        return self.primitives.count_per_key(keys, step)

    def lookup(self, keys, table, step):
        """``inner``'s ``lookup``, counted."""
        self.steps += 1
        return self.primitives.lookup(keys, table, step)

    def previous_per_key(self, keys, step):
        """``inner``'s ``previous_per_key``, counted."""
        self.steps += 1
        return self.primitives.previous_per_key(keys, step)


def releases(table: pd.DataFrame, n: int, backend: Backend) -> tuple[list[Release], list[dict]]:
    """Releases 1 and 2 of ``n`` rows (r = n / 5) published on ``backend``, then judged there by the m-invariance
    verifier (Xiao-Tao Def. 17, its fold's lag by person on the backend); the figures of each release (with the
    seam's calls: rows, partitions, largest partition; the primitives' calls), then the verifier's."""
    rng = np.random.default_rng(3)
    big = datasets.resample(table, n + n // 5, rng)
    first, pool = split_base_pool(big, n, rng)
    snaps = list(stream(first, pool, n // 5, 2, rng))
    spec = occ_spec(10).bind(snaps[0]).bind(snaps[1])
    out, figures, previous, stamped = [], [], None, []
    for j, raw in enumerate(snaps, start=1):
        snapshot = validate_snapshot(raw, spec)
        steps, row, watched = Steps(), {}, Watched(backend)
        with using(watched), reporting(steps), measured(row):
            release = m_invariance.publish(snapshot, spec, previous, release_rng(spec, j))
        row["split"] = steps.seconds.get(f"split on {backend.name}")
        row["calls"] = watched.calls
        row["steps"] = watched.steps
        out.append(release)
        figures.append(row)
        previous = PreviousRelease(j, snapshot, release.table, release.counterfeits, release.hosting, release.state)
        stamped.append([frame.assign(release_id=np.int64(j)) for frame in
                        (release.table, release.counterfeits, snapshot, release.hosting)])
    history = History(spec, *(pd.concat(frames, ignore_index=True) for frames in zip(*stamped, strict=True)))
    row, watched = {}, Watched(backend)
    with using(watched), measured(row):
        row["reports"] = [(report.name, report.ok, report.summary) for report in verify_m_invariance(history)]
    row["steps"] = watched.steps
    figures.append(row)
    return out, figures


def warm(backend: Backend) -> None:
    """One split of a tiny bucket on ``backend``: Spark's Python workers started and the package imported there
    before any clock runs."""
    ranks, table = rank_codes(np.random.default_rng(0).random((8, 2)))
    apply(partial(split_buckets, table=table), np.zeros(8, dtype=np.int64), split_columns(ranks, np.tile([0, 1], 4)),
          Seeds(0, 0), backend)


def same(a: list[Release], b: list[Release]) -> bool:
    """Whether two backends published the same releases (tables and counterfeits, row for row)."""
    return all(x.table.equals(y.table) and x.counterfeits.equals(y.counterfeits) for x, y in zip(a, b, strict=True))


def compare(table: pd.DataFrame, sizes: list[int], spark: Callable[[], Backend]) -> None:
    """Publish and judge on both backends at each of ``sizes`` rows; print the figures side by side."""
    rows, judged = [], []
    for n in sizes:
        local, local_figures = releases(table, n, LocalBackend())
        remote, spark_figures = releases(table, n, spark())
        if not same(local, remote):
            raise AssertionError(f"{n:,} rows: the Spark backend published another release than the local one")
        for j in (0, 1):
            lo, sp = local_figures[j], spark_figures[j]
            calls = lo["calls"]
            parts = f"{sum(c[1] for c in calls):,} / {max((c[2] for c in calls), default=0):,}"
            if sp["steps"] != lo["steps"] or not sp["steps"]:
                raise AssertionError(f"{n:,} rows: the Spark backend ran {sp['steps']} primitive(s), local "
                                     f"{lo['steps']}: a global step did not go through the backend")
            rows.append((f"{n:,}", j + 1, parts, sp["steps"], figure(lo["split"]), figure(sp["split"]),
                         figure(lo["wall"]), figure(sp["wall"]), ratio(sp["wall"], lo["wall"]),
                         figure(lo["cpu"]), figure(sp["cpu"]), ratio(sp["cpu"], lo["cpu"]),
                         figure(lo["peak_gb"]), figure(sp["peak_gb"])))
        lo, sp = local_figures[2], spark_figures[2]
        if lo["reports"] != sp["reports"] or sp["steps"] != lo["steps"] or not sp["steps"]:
            raise AssertionError(f"{n:,} rows: the m-invariance verifier's reports or steps differ between backends")
        judged.append((f"{n:,}", sp["steps"], figure(lo["wall"]), figure(sp["wall"]), ratio(sp["wall"], lo["wall"]),
                       figure(lo["cpu"]), figure(sp["cpu"]), ratio(sp["cpu"], lo["cpu"]), figure(lo["peak_gb"]),
                       figure(sp["peak_gb"])))
    print_table(
        "m-invariance on the local and the Spark local[2] backends (m = 10, r = 20%, Census-KDD resampled)",
        ["rows", "release", "partitions / largest", "primitives", "split local s", "split Spark s",
         "publish local s", "publish Spark s", "wall Spark / local", "CPU local s", "CPU Spark s",
         "CPU Spark / local", "peak local GB", "peak Spark GB"], rows,
        "Partitions: those the seam ran (over all its calls) and the rows of the largest; primitives: the global "
        "steps' calls (``count_per_key``, ``lookup``), run on the same backend as the kernels. Wall seconds unless "
        "CPU; CPU and peak memory of the whole process tree (the driver, Spark's JVM and its Python workers). Both "
        "backends published the same releases, row for row.",
    )
    print_table(
        "The m-invariance verifier over releases 1-2 on each backend (its fold's lag by person, Lemma 4)",
        ["rows", "primitives", "local s", "Spark s", "wall Spark / local", "CPU local s", "CPU Spark s",
         "CPU Spark / local", "peak local GB", "peak Spark GB"], judged,
        "Both releases judged from scratch (``xiao_tao.m_invariance``), the same reports on both backends. Primitives: "
        "the lag by person (``previous_per_key``) of each release's fold. The rest of the verifier (the groups' "
        "signatures, m-uniqueness, the comparison of the signature words) runs on the driver.",
    )


def main() -> None:
    try:
        from dagster_privrelease.spark import SparkBackend, spark_session
    except ImportError as exc:
        skip("the Spark backend", f"the [spark] extra is not installed ({exc.name})")
        return
    base = loaded("the Spark backend on Census-KDD", occ_table)
    if base is None:
        return
    session = spark_session("local[2]", conf={"spark.driver.memory": "4g"})
    try:
        warm(SparkBackend(session))
        compare(base, [1_000_000, 3_000_000], lambda: SparkBackend(session))
    finally:
        session.stop()


if __name__ == "__main__":
    main()
