"""The Dagster layer on UCI Adult (45,222 rows; resources/adult.yaml, m-invariance with m = 4): sensor-to-
published latency and Dagster's overhead per release against the core's own time.

Stream (``core.stream``): T(1) = all of Adult but a pool of 2,000 rows (43,222 rows), then releases with 1,000
deletions, 1,000 insertions and 1% of the survivors a year older, written to a DuckDB table ``source.people``.

- Latency: from the source sensor's tick (fingerprint in DuckDB, new dynamic partition, run request) to the
  release being in ``published``, the run executed in-process as the daemon would launch it (no session around
  it: each step opens the store once). In ``dagster dev`` add up to the sensor interval (15 s) and the run
  launcher's start-up. Wall seconds, and CPU seconds of this process (``time.process_time``, every thread)
  beside them: this 2-core machine is shared, and the CPU figure is the one that does not move with the load.
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
from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions, sensors
from dagster_privrelease.orchestration.definitions import QUIET
from dagster_privrelease.storage import ReleaseStore

from .common import ROOT, figure, loaded, print_table, ratio

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
    """The core's own wall time per step for one release, in one store session (as ``pipeline.release_next``)."""
    times = {}
    with store.session():
        _core_steps(store, release_id, frame, times)
    return times


def _core_steps(store: ReleaseStore, release_id: int, frame, times: dict) -> None:
    """``_core``'s steps, timed into ``times``."""
    for name, step in (
        ("stage", lambda: pipeline.stage(store, release_id, frame)),
        ("candidate", lambda: pipeline.make_candidate(store, release_id)),
        ("judge", lambda: times.__setitem__("reports", pipeline.judge(store, release_id))),
        ("publish", lambda: pipeline.publish(store, release_id, times.pop("reports"))),
    ):
        start = time.perf_counter()
        step()
        times[name] = time.perf_counter() - start


def measure(releases: int = RELEASES) -> list[dict]:
    """Per release of the Adult stream (``releases`` releases): sensor tick, run, latency, and the core's own time
    per step (seconds). DatasetUnavailable when Adult cannot be loaded. Cost: each release twice (Dagster, core)."""
    adult = datasets.load_adult()
    spec = load_spec(SPEC)
    data = adult[spec.columns]
    base, pool = split_base_pool(data, len(data) - R * (releases - 1), np.random.default_rng(spec.seed))
    snapshots = list(stream(base, pool, R, releases, np.random.default_rng(1), 0.01, {"age": _older}))
    out = []
    with tempfile.TemporaryDirectory() as tmp, dg.instance_for_test() as instance:
        folder = Path(tmp)
        source = DuckDBTableSource(database=str(folder / "data.duckdb"), table="source.people")
        defs = release_definitions(SPEC, folder / "releases.duckdb", source)
        job = defs.resolve_job_def("adult_release")
        core_store = ReleaseStore(folder / "core.duckdb", spec)
        cursor = None
        for release_id, snapshot in enumerate(snapshots, 1):
            _write(folder / "data.duckdb", snapshot)
            start, cpu = time.perf_counter(), time.process_time()
            tick = sensors.tick(defs, instance, "adult_source_changed", cursor)
            ticked = time.perf_counter() - start
            (request,) = tick.run_requests or []
            run_start = time.perf_counter()
            result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags, instance=instance,
                                            run_config=QUIET)
            assert result.success
            run = time.perf_counter() - run_start
            latency, latency_cpu = time.perf_counter() - start, time.process_time() - cpu
            cursor = tick.cursor
            core = _core(core_store, release_id, snapshot)
            out.append({"release": release_id, "rows": len(snapshot), "tick": ticked, "run": run, "latency": latency,
                        "latency cpu": latency_cpu,
                        **{f"core {k}": v for k, v in core.items()}, "core": sum(core.values())})
    return out


def main() -> None:
    measured = loaded("bench_dagster", measure)
    if measured is None:
        return
    rows = [[m["release"], m["rows"], figure(m["tick"]), figure(m["run"]), figure(m["latency"]), figure(m["latency cpu"]),
             figure(m["core stage"]), figure(m["core candidate"]), figure(m["core judge"]),
             figure(m["core publish"]), figure(m["core"]), figure(m["run"] - m["core"]), ratio(m["run"], m["core"])]
            for m in measured]
    print_table(
        "Dagster on Adult: sensor-to-published latency and overhead per release (seconds)",
        ["release", "rows", "sensor tick", "Dagster run", "latency", "latency CPU", "core stage", "core candidate",
         "core judge", "core publish", "core total", "overhead", "run / core"],
        rows,
        note="latency = sensor tick + run (in-process, as launched by the daemon), wall and CPU seconds; overhead = "
        "Dagster run - core total (Great Expectations, metadata, history chart, event log, store re-reads); the "
        "first release pays Great Expectations' import. Target: latency <= 10 s.",
    )


if __name__ == "__main__":
    main()
