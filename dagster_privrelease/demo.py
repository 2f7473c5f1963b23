"""The demo tables, Adult and Census-KDD workers, both republished with m-invariance (m = 4), Census-KDD workers
republished with m-Distinct under inserts, deletes and internal updates (``census_kdd_m_distinct``, Li-Zhou §VI-A),
Adult published through release requests with sequential l-diversity (``adult_requests``, each request its own
attributes), and Adult's two projections of Wang-Fung §6 published in turn with (X, Y)-privacy (``adult_xy``):
their definitions
(``build_definitions``; the example ``dg`` project ``examples/privrelease_demo`` declares the same tables as
``defs.yaml`` files), their change stream
(``demo_changes``), a whole run of releases through Dagster (``run_demo``, the ``privrelease demo`` command; its
runs are runs of the code location, ``launch``, so the UI's Overview timeline shows them) and one refused release
to show (``demo_refusal``, used by ``make screenshots``).

Each demo keeps, under ``$PRIVRELEASE_HOME`` (default ``./demo``), a folder ``<name>/`` with

- ``data.duckdb``: the demo source table ``source.people`` (and ``source.pool``, the rows that arrive later);
- ``releases.duckdb``: the release store (schemas ``private`` and ``published``);
- ``requests/``: the drop folder of release requests (``*.yaml``).

The job ``<name>_demo_changes`` (or ``demo_changes(name)`` from Python) creates the source on its first run,
downloading the dataset then and only then, and afterwards applies one step of the papers' stream
(``core.stream``: deletes, internal updates, inserts from the pool), so that the source sensor fires. Building
the definitions touches no data and no file.
"""

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import yaml
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.definitions.selector import InstigatorSelector
from dagster._core.execution.api import create_execution_plan, execute_run
from dagster._core.execution.execution_result import ExecutionResult
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import InstigatorType, TickData, TickStatus
from dagster._core.workspace.load import location_origins_from_yaml_paths

from . import datasets
from .core.spec import Spec, load_spec
from .core.stream import UpdateRule, changes, split_base_pool, stream
from .orchestration import DuckDBTableSource, release_definitions, sensors
from .orchestration.definitions import QUIET, raise_unless_published
from .storage import ReleaseStore
from .storage.connection import quote

ROOT = Path(__file__).resolve().parent.parent
#: The demos' specs and hierarchies.
RESOURCES = ROOT / "resources"
#: The instance settings of the demos (one run of a table at a time), copied into the demo's Dagster home.
INSTANCE_SETTINGS = ROOT / "assets" / "dagster.yaml"
#: The workspace ``dagster dev -w`` loads: the example code location ``LOCATION``.
WORKSPACE = ROOT / "workspace.yaml"


def _older(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Internal update of a QI: a year older (Li-Zhou §VI-A: age + 1)."""
    return values + 1


def within_update_sets(update_sets: dict[str, list[str]]) -> UpdateRule:
    """Internal update of the sensitive value inside its candidate update set (Li-Zhou Def. 12, §VI-A): each
    value becomes another value of CUS(value), uniformly; a value whose CUS holds only itself (or none) stays.

    The rule looks the CUS up as a padded code table (values x largest CUS): O(rows) per call, no loop over rows.
    """
    values = sorted({str(v) for key, targets in update_sets.items() for v in [key, *targets]})
    index = pd.Index(values)
    others = [[t for t in dict.fromkeys(map(str, update_sets.get(v, []))) if t != v] for v in values]
    width = max((len(o) for o in others), default=0)
    table = np.full((len(values), max(width, 1)), -1, dtype=np.int64)
    for i, targets in enumerate(others):
        table[i, : len(targets)] = index.get_indexer(targets)
    counts = np.array([len(o) for o in others], dtype=np.int64)
    domain = np.asarray(values, dtype=object)

    def rule(current: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        code = index.get_indexer(np.asarray(current).astype(str))
        n = np.where(code >= 0, counts[np.maximum(code, 0)], 0)
        pick = (rng.random(len(code)) * np.maximum(n, 1)).astype(np.int64)
        moved = n > 0
        out = np.asarray(current, dtype=object).copy()
        out[moved] = domain[table[code[moved], pick[moved]]]
        return out

    return rule


def _age_rules(spec: Spec) -> dict[str, UpdateRule]:
    """The m-invariance demos' internal updates: a year older (a QI update only)."""
    return {"age": _older}


def _age_and_occupation_rules(spec: Spec) -> dict[str, UpdateRule]:
    """The m-Distinct demo's internal updates (Li-Zhou §VI-A): a year older, and the sensitive value (detailed
    occupation) updated inside its candidate update set (the spec's ``model.update_sets``)."""
    return {"age": _older, spec.sensitive: within_update_sets(spec.model.params["update_sets"])}


def _census_kdd_occupations() -> pd.DataFrame:
    """Census-KDD workers with the detailed occupation code as text (the spec's CUS keys are text)."""
    table = datasets.load_census_kdd(workers_only=True)
    table["detailed_occupation_recode"] = table["detailed_occupation_recode"].astype(str)
    return table


@dataclass(frozen=True)
class Demo:
    """One demo table: its spec, its loader, and the stream that changes it (Xiao-Tao §5, Li-Zhou §VI-A)."""

    name: str
    loader: Callable[[], pd.DataFrame]
    base: int  # rows of the first snapshot; the rest of the data set is the pool of later inserts
    batch: int  # rows deleted (and, unless ``inserts`` says otherwise, inserted) per step
    update_fraction: float  # share of surviving rows changed by the ``updates`` rules per step
    #: release requests (attribute subsets) dropped in ``requests/`` when the source is created, one file each
    requests: tuple[tuple[str, ...], ...] = ()
    inserts_only: bool = False  # a step only inserts (a model that refuses deletions, Shmueli-Tassa §5.3)
    inserts: int | None = None  # rows inserted per step (default ``batch``; Li-Zhou §VI-A: -2,000 / +5,000)
    #: the internal updates of a step, column -> rule, from the bound spec (default: age + 1)
    updates: Callable[[Spec], dict[str, UpdateRule]] = _age_rules
    releases: int = 5  # how many releases ``make demo`` (``privrelease demo --table all``) publishes

    @property
    def spec(self) -> Path:
        """The demo's release spec (``resources/<name>.yaml``)."""
        return RESOURCES / f"{self.name}.yaml"

    @property
    def sensor(self) -> str:
        """The sensor that releases the demo's steps: the request sensor when the demo has ``requests`` (each
        release its own attributes), else the source sensor."""
        return f"{self.name}_release_requests" if self.requests else f"{self.name}_source_changed"

    def request(self, step: int, home: Path | None = None) -> Path:
        """Write the release request of ``step`` (1, 2, ...; ``requests`` taken in turn) to ``requests/`` unless it
        is there (the first step writes them all: ``demo_changes``); return its path."""
        path = self.folder(home) / "requests" / f"{step:02d}.yaml"
        if not path.exists():
            attributes = self.requests[(step - 1) % len(self.requests)]
            path.write_text(yaml.safe_dump({"attributes": list(attributes)}))
        return path

    def folder(self, home: Path | None = None) -> Path:
        """The demo's folder under ``home`` (default ``demo_home()``)."""
        return (home or demo_home()) / self.name

    def source(self, home: Path | None = None) -> DuckDBTableSource:
        """The demo's source table ``source.people`` in ``<folder>/data.duckdb``."""
        return DuckDBTableSource(database=str(self.folder(home) / "data.duckdb"), table="source.people")


DEMOS = {
    "adult": Demo("adult", datasets.load_adult, base=30_000, batch=1_000, update_fraction=0.01, releases=10),
    "census_kdd": Demo(
        "census_kdd", lambda: datasets.load_census_kdd(workers_only=True), base=40_000, batch=2_000,
        update_fraction=0.01, releases=3,
    ),
    # m-Distinct (resources/census_kdd_m_distinct.yaml): Li-Zhou §VI-A's protocol, 20,000 rows, then per step
    # 2,000 deleted, 5,000 inserted and a quarter of the survivors (about 4,500; the paper updates 5,000) a year
    # older with their occupation moved inside its candidate update set (CUS of diameter 10)
    "census_kdd_m_distinct": Demo(
        "census_kdd_m_distinct", _census_kdd_occupations, base=20_000, batch=2_000, update_fraction=0.25,
        inserts=5_000, updates=_age_and_occupation_rules,
    ),
    # Sequential l-diversity (resources/adult_requests.yaml): releases come from requests, each with its own
    # attributes, four of the ten random subsets of Shmueli-Tassa Fig. 14 (occupation, the sensitive value, is in
    # every release); a step inserts an l-diverse batch (§5.2); each request is released in turn
    # (``Demo.request``), so the join and possible-world attacks (Shmueli-Tassa §3) have releases to combine
    "adult_requests": Demo(
        "adult_requests", datasets.load_adult, base=10_000, batch=1_000, update_fraction=0.0, inserts_only=True,
        requests=(("age", "sex", "marital_status", "race"), ("education", "marital_status", "workclass",
                  "native_country"), ("age", "race", "native_country"), ("education", "race", "workclass")), releases=4,
    ),
    # (X, Y)-privacy (resources/adult_xy.yaml): sequential releases of projections of one table (Wang-Fung §1.2,
    # §7), the requests taking in turn Wang-Fung §6's two projections of Adult; a step changes no row (the model
    # refuses a table that changed), so each release is judged against the earlier ones by the join (§3.3) and
    # the judge's attacks
    "adult_xy": Demo(
        "adult_xy", datasets.load_adult, base=20_000, batch=0, update_fraction=0.0, inserts_only=True, inserts=0,
        requests=(("marital_status", "race", "sex", "native_country"),
                  ("age", "education", "workclass", "marital_status", "sex")), releases=3,
    ),
}


def demo_home() -> Path:
    """``$PRIVRELEASE_HOME``, or ``./demo``."""
    return Path(os.environ.get("PRIVRELEASE_HOME", "demo")).resolve()


def demo_changes(name: str, home: Path | None = None) -> dict[str, int]:
    """Create demo ``name``'s source (first call) or change it by one stream step; return the change counts.

    First call: the data set's spec columns split into ``base`` rows (``source.people``) and a pool
    (``source.pool``), as Xiao-Tao §5 builds T(1), and the demo's ``requests`` written to ``requests/``. Later calls
    (only the insertions when ``inserts_only``): ``batch`` random deletions, ``update_fraction``
    of the survivors changed by the demo's ``updates`` rules (a year older; for m-Distinct also a new occupation
    inside its CUS), ``inserts`` (default ``batch``) insertions from the pool (``core.stream.stream``, one step),
    in one transaction. Deterministic given the table's state. ValueError when the pool is used up.
    """
    demo = DEMOS[name]
    spec = load_spec(demo.spec)
    folder = demo.folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requests").mkdir(exist_ok=True)
    with duckdb.connect(str(folder / "data.duckdb")) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS source")
        ((exists,),) = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'source' AND table_name = 'people'"
        ).fetchall()
        if not exists:
            data = demo.loader()[spec.columns]
            people, pool = split_base_pool(data, demo.base, np.random.default_rng(spec.seed))
            _replace(con, people, pool)
            for step in range(1, len(demo.requests) + 1):
                demo.request(step, home)
            return {"inserts": len(people), "deletes": 0, "updates": 0}
        people = con.execute("SELECT * FROM source.people").df()
        pool = con.execute("SELECT * FROM source.pool").df()
    rng = np.random.default_rng([spec.seed, len(people), _id_sum(people[spec.id])])
    steps = stream(people, pool, 0 if demo.inserts_only else demo.batch, 2, rng, demo.update_fraction,
                   demo.updates(spec), inserts=demo.batch if demo.inserts is None else demo.inserts)
    after = next(islice(steps, 1, None))
    with duckdb.connect(str(folder / "data.duckdb")) as con:
        _replace(con, after, pool[~pool[spec.id].isin(after[spec.id])])
    return changes(people, after, spec.id)


def _id_sum(ids: pd.Series) -> int:
    """A number that changes with the set of ``ids`` (a seed of the next stream step): their sum for numeric ids,
    the sum of their hashes for text ids (``p007``, ``007``), modulo 2**32."""
    values = ids if pd.api.types.is_numeric_dtype(ids) else pd.util.hash_pandas_object(ids, index=False)
    return int(values.sum()) % 2**32


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


#: The code location ``workspace.yaml`` loads, the ``dg`` project ``examples/privrelease_demo`` (its
#: ``location_name``, the project's name); the demo records its sensor ticks under this location, so the UI shows
#: them on the sensors' pages.
LOCATION = "privrelease_demo"


def run_demo(
    name: str, releases: int, home: Path | None = None, on_release: Callable[[int, dict], None] | None = None
) -> tuple[pd.DataFrame, Path]:
    """Start demo ``name`` over under ``home`` and publish ``releases`` releases through the code location's
    definitions (``build_definitions``), as ``dagster dev`` would: each step changes the source (``demo_changes``;
    a demo of release requests also drops the step's request, ``Demo.request``), ticks the demo's sensor the
    daemon's way (``sensors.tick``; ``Demo.sensor``: the request sensor for a demo of requests, so each release
    has its own attributes), records the tick in the instance's tick storage as the sensor daemon does
    (``recorded_tick``: the sensor's page in the UI lists it, with its runs), and runs the release job it requests
    in-process as a run of the code location (``launch``: the Overview timeline shows it), on a persistent Dagster
    instance in ``home/.dagster``. ``on_release(i, counts)`` is called after release i with the source's change
    counts. The demo tables share that instance: starting ``name`` over replaces its folder and its own Dagster
    history (``forget``), never another table's.

    Returns the store's manifest and the Dagster home. Raises the package's error (e.g. ``NotPublishable``) of
    a release that was refused; the releases before it stay published.
    """
    home = home or demo_home()
    demo = DEMOS[name]
    shutil.rmtree(demo.folder(home), ignore_errors=True)
    dagster_home = home / ".dagster"
    dagster_home.mkdir(parents=True, exist_ok=True)
    if not (dagster_home / "dagster.yaml").exists():
        shutil.copy(INSTANCE_SETTINGS, dagster_home / "dagster.yaml")
    defs = build_definitions(home)
    job = defs.resolve_job_def(f"{name}_release")
    cursor = None
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        forget(instance, defs, name)
        for i in range(1, releases + 1):
            counts = demo_changes(name, home)
            if demo.requests:
                demo.request(i, home)
            with recorded_tick(instance, demo.sensor) as record:
                data = sensors.tick(defs, instance, demo.sensor, cursor)
                cursor = data.cursor
                results = [(request, launch(instance, job, request)) for request in data.run_requests or []]
                record(data, [(r.run_key, result.run_id) for r, result in results])
            for request, result in results:
                raise_unless_published(result, name, str(request.partition_key))
            if on_release:
                on_release(i, counts)
    store = ReleaseStore(demo.folder(home) / "releases.duckdb", load_spec(demo.spec))
    return store.manifest(), dagster_home


def job_origin(job: str) -> RemoteJobOrigin:
    """Where the UI finds job ``job``: the example code location ``LOCATION`` as ``workspace.yaml`` declares it
    (``dagster dev -w workspace.yaml`` names the same origin), its single repository, the job's name. A run that
    carries it is placed under its job in the Overview timeline and the location's run lists. Reads
    ``workspace.yaml`` only (no code server is started). KeyError when the workspace declares no ``LOCATION``."""
    origins = {o.location_name: o for o in location_origins_from_yaml_paths([str(WORKSPACE)])}
    return RemoteJobOrigin(RemoteRepositoryOrigin(origins[LOCATION], SINGLETON_REPOSITORY_NAME), job)


def launch(instance: dg.DagsterInstance, job: dg.JobDefinition, request: dg.RunRequest) -> ExecutionResult:
    """Run ``request`` (a sensor's run request of a partition of ``job``) in this process as a run of the code
    location: the run is created with ``job``'s and the request's tags, the partition's tags and the remote origin
    of the job (``job_origin``), as the sensor daemon creates it, then executed in-process (``execute_run``),
    with Dagster's console logging silenced (``QUIET``). A step's failure does not raise: the caller reads the
    result (``raise_unless_published``). Costs the run's steps."""
    key = str(request.partition_key)
    tags = {**job.run_tags, **job.get_tags_for_partition_key(key, None), **request.tags}
    plan = create_execution_plan(InMemoryJob(job), run_config=QUIET, instance_ref=instance.get_ref(), tags=tags)
    run = instance.create_run_for_job(job, execution_plan=plan, run_config=QUIET, tags=tags,
                                      remote_job_origin=job_origin(job.name))
    return execute_run(InMemoryJob(job), run, instance)


def forget(instance: dg.DagsterInstance, defs: dg.Definitions, table: str) -> None:
    """Remove demo table ``table``'s Dagster history from ``instance``, and nothing of another table's: its runs
    (tagged ``privrelease/table``) with their events, its release partitions, its assets' materialisations and its
    sensors' recorded ticks (``sensor_selector``)."""
    for run in instance.get_runs(dg.RunsFilter(tags={sensors.TAG: table})):
        instance.delete_run(run.run_id)
    partitions = f"{table}_releases"
    for key in instance.get_dynamic_partitions(partitions):
        instance.delete_dynamic_partition(partitions, key)
    instance.wipe_assets([key for key in defs.resolve_all_asset_keys() if key.path[0] == table])
    for sensor in (f"{table}_source_changed", f"{table}_release_requests"):
        selector = sensor_selector(sensor).get_id()
        instance.purge_ticks(selector, selector, before=time.time())


def sensor_selector(sensor: str) -> InstigatorSelector:
    """How the UI names sensor ``sensor`` of the example code location: location ``LOCATION``, the single
    repository of a ``Definitions``, the sensor's name. Its ``get_id()`` keys the sensor's ticks."""
    return InstigatorSelector(location_name=LOCATION, repository_name=SINGLETON_REPOSITORY_NAME, name=sensor)


@contextmanager
def recorded_tick(instance: dg.DagsterInstance, sensor: str) -> Iterator[Callable[[Any, list], None]]:
    """A tick of ``sensor`` in ``instance``'s tick storage, as the sensor daemon records one: created STARTED on
    entry; the caller hands the tick's data (``SensorResult`` data: cursor, run requests, skip message) and the
    ``(run_key, run_id)`` of the runs it launched to the function it gets, which marks the tick SUCCESS (runs
    requested) or SKIPPED (with the reason), with the key of what the sensor logged (``sensors.tick``); a tick
    left without it (an error) is marked FAILURE on exit."""
    selector = sensor_selector(sensor)
    tick = instance.create_tick(TickData(
        instigator_origin_id=selector.get_id(), instigator_name=sensor, instigator_type=InstigatorType.SENSOR,
        status=TickStatus.STARTED, timestamp=time.time(), selector_id=selector.get_id(),
    ))
    done: list = []

    def record(data, runs: list[tuple[str | None, str]]) -> None:
        marked = tick.with_cursor(data.cursor)
        if data.log_key:  # what the sensor logged on the tick, shown beside it in the UI
            marked = marked.with_log_key(data.log_key)
        for run_key, run_id in runs:
            marked = marked.with_run_info(run_id=run_id, run_key=run_key)
        if runs:
            marked = marked.with_status(TickStatus.SUCCESS)
        else:
            marked = marked.with_status(TickStatus.SKIPPED).with_reason(data.skip_message or "no run requested")
        instance.update_tick(marked)
        done.append(marked)

    try:
        yield record
    finally:
        if not done:
            instance.update_tick(tick.with_status(TickStatus.FAILURE))


def build_definitions(home: Path | None = None) -> dg.Definitions:
    """The code location: each demo's release definitions and its change job, with files under ``home``."""
    parts = [
        release_definitions(
            demo.spec, demo.folder(home) / "releases.duckdb", demo.source(home), requests=demo.folder(home) / "requests"
        )
        for demo in DEMOS.values()
    ]
    return dg.Definitions.merge(*parts, dg.Definitions(jobs=change_jobs()))


def change_jobs() -> list[dg.JobDefinition]:
    """The job ``<name>_demo_changes`` of each demo table (``demo_changes``: create its source, then change it)."""
    return [_changes_job(demo) for demo in DEMOS.values()]


def demo_refusal(name: str = "adult_requests", rows: int = 10, home: Path | None = None) -> str:
    """A refused release of demo ``name`` (default the sequential l-diversity demo, whose model refuses
    deletions, Shmueli-Tassa §5.3), for the UI to show: ``rows`` rows are deleted from its source, its source
    sensor ticks (recorded, ``recorded_tick``) and the release run it requests runs as a run of the code location
    (``launch``) and is refused; then the rows are put back, so the source holds the last published release's rows
    again (the sensor's next tick retires the refused partition: nothing is published, nothing blocked). Does
    nothing when a run of ``name`` already failed on that instance. Returns the refused run's id.

    Raises ValueError when the run was not refused (it published, or the tick requested nothing): the demo is not
    the one this expects (run ``run_demo`` first)."""
    home = home or demo_home()
    demo = DEMOS[name]
    defs = build_definitions(home)
    sensor = f"{name}_source_changed"
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        failed = instance.get_runs(dg.RunsFilter(tags={sensors.TAG: name}, statuses=[dg.DagsterRunStatus.FAILURE]),
                                   limit=1)
        if failed:
            return failed[0].run_id
        source = demo.source(home)
        key = quote(load_spec(demo.spec).id)
        with duckdb.connect(source.database) as con:
            gone = con.execute(f"SELECT * FROM {source.table} ORDER BY {key} LIMIT {int(rows)}").df()
            con.register("gone", gone)
            con.execute(f"DELETE FROM {source.table} WHERE {key} IN (SELECT {key} FROM gone)")
        try:
            with recorded_tick(instance, sensor) as record:
                data = sensors.tick(defs, instance, sensor, None)
                job = defs.resolve_job_def(f"{name}_release")
                results = [(request, launch(instance, job, request)) for request in data.run_requests or []]
                record(data, [(r.run_key, result.run_id) for r, result in results])
        finally:
            with duckdb.connect(source.database) as con:
                con.register("gone", gone)
                con.execute(f"INSERT INTO {source.table} SELECT * FROM gone")
    refused = [result.run_id for _, result in results if not result.success]
    if not refused:
        raise ValueError(f"{name}: deleting {rows} rows was not refused; run the demo of {name} first")
    return refused[0]
