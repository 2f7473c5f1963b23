"""The Dagster layer on UCI Adult (45,222 rows; resources/adult.yaml, m-invariance with m = 4): sensor-to-
published latency and Dagster's overhead per release against the core's own time.

Stream (``core.stream``): T(1) = all of Adult but a pool of 2,000 rows (43,222 rows), then releases with 1,000
deletions, 1,000 insertions and 1% of the survivors a year older, written to a DuckDB table ``source.people``.

- Latency: from the source sensor's tick (fingerprint in DuckDB, new dynamic partition, run request) to the
  release being in ``published``, the run executed in-process as the daemon would launch it. In ``dagster dev``
  add up to the sensor interval (15 s) and the run launcher's start-up.
- Overhead: the same snapshots released by the core alone (``pipeline.stage``, ``make_candidate``, ``judge``,
  ``publish``, timed step by step on another store) against the Dagster run (same steps plus Great
  Expectations, the utility figures in the candidate's metadata, the history plot, Dagster's event log).
"""

import tempfile
import time
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np

from dagster_privrelease import datasets, pipeline
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import split_base_pool, stream
from dagster_privrelease.errors import DatasetUnavailable
from dagster_privrelease.orchestration import DuckDBSource, release_definitions, sensors
from dagster_privrelease.orchestration.factory import QUIET
from dagster_privrelease.storage import ReleaseStore

from .common import ROOT, figure, print_table, ratio, skip

SPEC = ROOT / "resources" / "adult.yaml"
R, RELEASES = 1_000, 3


def _older(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return values + 1


def _write(path: Path, frame) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS source")
        con.register("frame", frame)
        con.execute("CREATE OR REPLACE TABLE source.people AS SELECT * FROM frame")


def _core(store: ReleaseStore, release_id: int, frame) -> dict[str, float]:
    """The core's own time per step for one release."""
    times = {}
    for name, step in (
        ("stage", lambda: pipeline.stage(store, release_id, frame)),
        ("candidate", lambda: pipeline.make_candidate(store, release_id)),
        ("judge", lambda: times.__setitem__("reports", pipeline.judge(store, release_id))),
        ("publish", lambda: pipeline.publish(store, release_id, times.pop("reports"))),
    ):
        start = time.perf_counter()
        step()
        times[name] = time.perf_counter() - start
    return times


def main() -> None:
    try:
        adult = datasets.load_adult()
    except DatasetUnavailable as exc:
        skip("bench_dagster", str(exc))
        return
    spec = load_spec(SPEC)
    data = adult[spec.columns]
    base, pool = split_base_pool(data, len(data) - R * (RELEASES - 1), np.random.default_rng(spec.seed))
    snapshots = list(stream(base, pool, R, RELEASES, np.random.default_rng(1), 0.01, {"age": _older}))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, dg.instance_for_test() as instance:
        folder = Path(tmp)
        source = DuckDBSource(database=str(folder / "data.duckdb"), table="source.people")
        defs = release_definitions(SPEC, folder / "releases.duckdb", source)
        job = defs.resolve_job_def("adult_release")
        core_store = ReleaseStore(folder / "core.duckdb", spec)
        cursor = None
        for release_id, snapshot in enumerate(snapshots, 1):
            _write(folder / "data.duckdb", snapshot)
            start = time.perf_counter()
            tick = sensors.tick(defs, instance, "adult_source_changed", cursor)
            ticked = time.perf_counter() - start
            (request,) = tick.run_requests
            run_start = time.perf_counter()
            result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags, instance=instance,
                                            run_config=QUIET)
            assert result.success
            run = time.perf_counter() - run_start
            latency = time.perf_counter() - start
            cursor = tick.cursor
            core = _core(core_store, release_id, snapshot)
            own = sum(core.values())
            rows.append([release_id, len(snapshot), figure(ticked), figure(run), figure(latency),
                         figure(core["stage"]), figure(core["candidate"]), figure(core["judge"]),
                         figure(core["publish"]), figure(own), figure(run - own), ratio(run, own)])
    print_table(
        "Dagster on Adult: sensor-to-published latency and overhead per release (seconds)",
        ["release", "rows", "sensor tick", "Dagster run", "latency", "core stage", "core candidate",
         "core judge", "core publish", "core total", "overhead", "run / core"],
        rows,
        note="latency = sensor tick + run (in-process, as launched by the daemon); overhead = Dagster run - core "
        "total (Great Expectations, metadata, plot, event log, store re-reads).",
    )


if __name__ == "__main__":
    main()
