"""The example code location: Adult (ℓ-diversity baseline) and Census-KDD workers (m-invariance), as ``defs``.

Each demo keeps, under ``$PRIVRELEASE_HOME`` (default ``./demo``), a folder ``<name>/`` with

- ``data.duckdb``: the demo source table ``source.people`` (and ``source.pool``, the rows that arrive later);
- ``releases.duckdb``: the release store (schemas ``private`` and ``published``);
- ``requests/``: the drop folder of release requests (``*.yaml``).

The job ``<name>_demo_changes`` (or ``demo_changes(name)`` from Python) creates the source on its first run,
downloading the dataset then and only then, and afterwards applies one step of the papers' stream
(``core.stream``: deletes, internal updates, inserts from the pool), so that the source sensor fires. Loading
this module touches no data and no file.
"""

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd

from dagster_privrelease import datasets
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import changes, split_base_pool, stream
from dagster_privrelease.orchestration import DuckDBSource, release_definitions, sensors
from dagster_privrelease.orchestration.factory import QUIET, raise_unless_published
from dagster_privrelease.storage import ReleaseStore

RESOURCES = Path(__file__).resolve().parent.parent / "resources"


@dataclass(frozen=True)
class Demo:
    """One demo table: its spec, its loader, and the stream that changes it (Xiao-Tao §5, Li-Zhou §VI-A)."""

    name: str
    loader: Callable[[], pd.DataFrame]
    base: int  # rows of the first snapshot; the rest of the data set is the pool of later inserts
    batch: int  # rows deleted and inserted per step
    update_fraction: float  # share of surviving rows whose age moves on by a year per step

    @property
    def spec(self) -> Path:
        return RESOURCES / f"{self.name}.yaml"

    def folder(self, home: Path | None = None) -> Path:
        return (home or demo_home()) / self.name

    def source(self, home: Path | None = None) -> DuckDBSource:
        return DuckDBSource(database=str(self.folder(home) / "data.duckdb"), table="source.people")


DEMOS = {
    "adult": Demo("adult", datasets.load_adult, base=30_000, batch=1_000, update_fraction=0.01),
    "census_kdd": Demo(
        "census_kdd", lambda: datasets.load_census_kdd(workers_only=True), base=40_000, batch=2_000,
        update_fraction=0.01,
    ),
}


def demo_home() -> Path:
    """``$PRIVRELEASE_HOME``, or ``./demo``."""
    return Path(os.environ.get("PRIVRELEASE_HOME", "demo")).resolve()


def _older(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return values + 1


def demo_changes(name: str, home: Path | None = None) -> dict[str, int]:
    """Create demo ``name``'s source (first call) or change it by one stream step; return the change counts.

    First call: the data set's spec columns split into ``base`` rows (``source.people``) and a pool
    (``source.pool``), as Xiao-Tao §5 builds T(1). Later calls: ``batch`` random deletions, ``update_fraction``
    of the survivors a year older, ``batch`` insertions from the pool (``core.stream.stream``, one step), in one
    transaction. Deterministic given the table's state. ValueError when the pool is used up.
    """
    demo = DEMOS[name]
    spec = load_spec(demo.spec)
    folder = demo.folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requests").mkdir(exist_ok=True)
    with duckdb.connect(str(folder / "data.duckdb")) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS source")
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'source' AND table_name = 'people'"
        ).fetchone()[0]
        if not exists:
            data = demo.loader()[spec.columns]
            people, pool = split_base_pool(data, demo.base, np.random.default_rng(spec.seed))
            _replace(con, people, pool)
            return {"inserts": len(people), "deletes": 0, "updates": 0}
        people = con.execute("SELECT * FROM source.people").df()
        pool = con.execute("SELECT * FROM source.pool").df()
    rng = np.random.default_rng([spec.seed, len(people), int(people[spec.id].sum()) % 2**32])
    steps = stream(people, pool, demo.batch, 2, rng, demo.update_fraction, {"age": _older})
    after = next(islice(steps, 1, None))
    with duckdb.connect(str(folder / "data.duckdb")) as con:
        _replace(con, after, pool[~pool[spec.id].isin(after[spec.id])])
    return changes(people, after, spec.id)


def _replace(con: duckdb.DuckDBPyConnection, people: pd.DataFrame, pool: pd.DataFrame) -> None:
    con.begin()
    con.register("people_frame", people)
    con.register("pool_frame", pool)
    con.execute("CREATE OR REPLACE TABLE source.people AS SELECT * FROM people_frame")
    con.execute("CREATE OR REPLACE TABLE source.pool AS SELECT * FROM pool_frame")
    con.commit()


def _changes_job(demo: Demo) -> dg.JobDefinition:
    @dg.op(name=f"{demo.name}_demo_step", description=f"One step of the {demo.name} demo stream.")
    def step(context: dg.OpExecutionContext) -> None:
        counts = demo_changes(demo.name)
        context.log.info(f"{demo.name} source changed: {counts}")

    @dg.job(name=f"{demo.name}_demo_changes", executor_def=dg.in_process_executor,
            description=f"Create the {demo.name} demo source, or insert, delete and update some of its rows.")
    def job():
        step()

    return job


def run_demo(
    name: str, releases: int, home: Path | None = None, on_release: Callable[[int, dict], None] | None = None
) -> tuple[pd.DataFrame, Path]:
    """Start demo ``name`` over under ``home`` and publish ``releases`` releases through this code location's
    definitions, as ``dagster dev`` would: each step changes the source (``demo_changes``), ticks the source
    sensor the daemon's way and runs the release job it requests in-process, on a persistent Dagster instance
    in ``home/.dagster`` (so the UI shows the runs). ``on_release(i, counts)`` is called after release i.

    Returns the store's manifest and the Dagster home. Raises the package's error (e.g. ``NotPublishable``) of
    a release that was refused; the releases before it stay published.
    """
    home = home or demo_home()
    demo = DEMOS[name]
    shutil.rmtree(demo.folder(home), ignore_errors=True)
    dagster_home = home / ".dagster"
    shutil.rmtree(dagster_home, ignore_errors=True)
    dagster_home.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("dagster.yaml"), dagster_home / "dagster.yaml")
    defs = build_definitions(home)
    job = defs.resolve_job_def(f"{name}_release")
    cursor = None
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        for i in range(1, releases + 1):
            counts = demo_changes(name, home)
            data = sensors.tick(defs, instance, f"{name}_source_changed", cursor)
            cursor = data.cursor
            for request in data.run_requests:
                result = job.execute_in_process(
                    partition_key=request.partition_key, tags=request.tags, instance=instance, raise_on_error=False,
                    run_config=QUIET,
                )
                raise_unless_published(result, name, request.partition_key)
            if on_release:
                on_release(i, counts)
    store = ReleaseStore(demo.folder(home) / "releases.duckdb", load_spec(demo.spec))
    return store.manifest(), dagster_home


def build_definitions(home: Path | None = None) -> dg.Definitions:
    """The code location: each demo's release definitions and its change job, with files under ``home``."""
    parts = [
        release_definitions(
            demo.spec, demo.folder(home) / "releases.duckdb", demo.source(home), requests=demo.folder(home) / "requests"
        )
        for demo in DEMOS.values()
    ]
    jobs = dg.Definitions(jobs=[_changes_job(demo) for demo in DEMOS.values()])
    return dg.Definitions.merge(*parts, jobs)


defs = build_definitions()
