"""The definitions of one protected table (``release_definitions``) and one release run in-process
(``run_release``).

``release_definitions(spec_path, db_path, source)`` builds, for the table named in the spec, the assets of
``assets.py`` (the source as an external asset, snapshot, one per model stage, candidate, publication, each
described with the model's guarantee), the candidate's blocking checks
(``checks.py``), the source sensor and optionally the request sensor (``sensors.py``), and the release job, all
partitioned by one ``DynamicPartitionsDefinition`` ``<table>_releases`` (``partitions.py``). Asset keys, the
group and the pool come from a ``ReleaseTranslator`` (default ``<table>/<step>``, group ``<table>``, pool
``privrelease_<table>``).

Every step runs in the table's pool; with the instance settings of ``assets/dagster.yaml`` (pool limit 1, run
granularity) one run of a table executes at a time, in queue order, so a backfill's runs go in key order. The
release job and the definitions' own executor are in-process, and the job tags its runs ``privrelease/table``.
"""

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
from dagster._core.execution.execution_result import ExecutionResult

from .. import pipeline
from ..core import models
from ..core.progress import Reporter, reporting
from ..core.spec import Spec, load_spec, parse_spec
from ..errors import NotPublishable, PrivReleaseError
from ..storage import ReleaseStore
from .assets import release_assets
from .checks import candidate_checks
from .partitions import Refusal, missing_keys
from .resources import PrivreleaseBackend, ReleaseStoreResource
from .sensors import ATTRIBUTES_TAG, TAG, request_sensor, source_sensor
from .sources import FrameSource, Source
from .translator import ReleaseTable, ReleaseTranslator

#: Run config of an in-process release run that logs nothing to the console but critical errors: an expected
#: refusal (logged at ERROR with Dagster's stack trace) is reported once, by the caller; the event log keeps all.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def release_definitions(
    spec_path: str | Path,
    db_path: str | Path,
    source: Source,
    requests: str | Path | None = None,
    translator: ReleaseTranslator | None = None,
    export: str | Path | None = None,
    inline_spec: Mapping[str, Any] | None = None,
    backend: PrivreleaseBackend | None = None,
) -> dg.Definitions:
    """Everything Dagster needs to release one protected table: its assets, checks, job and sensors.

    Args:
        spec_path: the release spec (YAML); its ``name`` names the partitions, the job, the sensors and the
            resources, and (through the translator) the asset keys, group and pool.
        db_path: the DuckDB release store of this table (created on first use).
        source: where the rows come from (``sources.Source``: ``DuckDBTableSource``, ``DuckDBChangeLogSource``,
            ``FrameSource``, or a kind of your own); the source sensor watches it, the snapshot reads it.
        requests: optional folder of release-request YAML files the request sensor turns into releases.
        translator: the names of the assets, group and pool (``ReleaseTranslator``, the default when None).
        export: optional folder each published release is exported to as Parquet (the asset
            ``exported_release``, ``assets.export_asset``), with its certificate (linked from the published
            release's metadata); None exports nothing.
        inline_spec: the spec's keys when the file ``spec_path`` holds them inline rather than being the spec (a
            component's ``defs.yaml``); taxonomy files named in it are read from that file's folder.
        backend: where the candidate's partition-parallel steps run (``PrivreleaseBackend``: local threads or
            Spark); None: local.

    Returns:
        The ``Definitions`` of a code location (several tables: ``dg.Definitions.merge``).

    Raises:
        SpecError: the spec is invalid or names an unregistered model (the message names the key and the rule).

    Example:
        ```python
        from dagster_privrelease import release_definitions
        from dagster_privrelease.orchestration import DuckDBTableSource

        defs = release_definitions("specs/patients.yaml", "patients_releases.duckdb",
                                   DuckDBTableSource(database="source.duckdb", table="patients"))
        ```
    """
    spec = load_spec(spec_path) if inline_spec is None else parse_spec(inline_spec, base=Path(spec_path).parent)
    return _definitions(spec, spec_path, db_path, source, requests, translator, export, inline_spec, backend)


def _definitions(
    spec: Spec,
    spec_path: str | Path,
    db_path: str | Path,
    source: Source,
    requests: str | Path | None = None,
    translator: ReleaseTranslator | None = None,
    export: str | Path | None = None,
    inline_spec: Mapping[str, Any] | None = None,
    backend: PrivreleaseBackend | None = None,
) -> dg.Definitions:
    """``release_definitions`` for ``spec``, the spec at ``spec_path`` (or ``inline_spec``) as already parsed."""
    table = ReleaseTable(spec.name, translator or ReleaseTranslator(), None if export is None else Path(export))
    assets = release_assets(table, spec, source)
    checks = candidate_checks(table, table.asset_key("release_candidate"),
                              models.descriptor(spec.model.name).describe(spec))
    job = dg.define_asset_job(
        f"{table.name}_release",
        selection=dg.AssetSelection.assets(*[a for a in assets if isinstance(a, dg.AssetsDefinition)]),
        partitions_def=table.partitions,
        executor_def=dg.in_process_executor,
        tags={TAG: table.name},
        description=f"Snapshot, model stages, candidate, checks and publication of one release of {table.name}.",
    )
    sensors = [source_sensor(table, job)]
    if requests is not None:
        sensors.append(request_sensor(table, job, Path(requests)))
    return dg.Definitions(
        executor=dg.in_process_executor,  # also for the implicit asset job of UI launches and backfills
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        sensors=sensors,
        resources={
            table.store: ReleaseStoreResource(
                database=str(db_path), spec=str(spec_path), inline=None if inline_spec is None else dict(inline_spec)
            ),
            table.source: source,
            table.backend: backend or PrivreleaseBackend(),
        },
    )


def run_release(
    spec_path: str | Path,
    db_path: str | Path,
    snapshot_df: pd.DataFrame,
    instance: dg.DagsterInstance | None = None,
    attributes: Sequence[str] | None = None,
    progress: Reporter | None = None,
    backend: PrivreleaseBackend | None = None,
) -> dict:
    """Publish ``snapshot_df`` as the next release of the store at ``db_path`` through the release job.

    The same definitions as ``dagster dev`` run in-process (snapshot, candidate, blocking checks, publication)
    on ``instance`` (default: an ephemeral one; its partition keys are filled up to the new release), with
    Dagster's console logging silenced (``QUIET``; the instance's event log keeps every event).
    Returns the manifest row of the release with ``release_id``, ``partition_key``, ``run_id`` and ``outcome``:
    "published", or "unchanged" when ``snapshot_df`` holds exactly the rows of the last published release
    (``pipeline.unchanged``): then nothing runs, nothing is published, ``run_id`` is None and the row is that
    release's, so running the same release again (say, after a run killed at an unknown moment) publishes it
    exactly once.

    Raises the package's own error when a step refused (SnapshotError, SpecError, StoreError, NotPublishable
    for a model that cannot publish), and NotPublishable naming the failed checks when a blocking check failed.
    Nothing is published then, and nothing blocks the next call: a snapshot staged by a refused run is replaced
    by the next one with other rows. ``attributes`` restricts the published quasi-identifiers (a release
    request of the vertical models), as the request sensor's tag does.

    The whole call is one session of the store (``StoreConnection.session``): the file is opened once and stays
    locked until the release is published or refused, so another process releasing to it waits, then refuses
    naming this one (``open_duckdb``), and every step of the run reads and writes through that one connection.
    The spec is parsed here and once by the run (``ReleaseStoreResource.setup_for_execution``).

    Args:
        spec_path: the release spec (YAML).
        db_path: the DuckDB release store (created on first use).
        snapshot_df: T(n), every row of the table now, with the spec's columns.
        instance: the Dagster instance to run on; None for an ephemeral one.
        attributes: the quasi-identifiers this release publishes (vertical models); None for all.
        progress: hears each step of the run as it starts and ends (``core.progress``: staging, the model's
            phases, the judge's verifiers and attacks, publication); None is silent. The run's event log has the
            same steps either way.
        backend: where the partition-parallel steps run (``PrivreleaseBackend``); None: local threads.

    Returns:
        The manifest row of the release, with ``release_id``, ``partition_key``, ``run_id`` and ``outcome``.

    Raises:
        SpecError: the spec or ``attributes`` are invalid.
        SnapshotError: ``snapshot_df`` does not fit the spec (the message names the column and row).
        StoreError: the store refuses (locked by another process, schema drift).
        NotPublishable: the model cannot publish the snapshot, or a blocking check failed (named).

    Example:
        ```python
        import pandas as pd
        from dagster_privrelease import run_release

        row = run_release("specs/patients.yaml", "patients_releases.duckdb", pd.read_csv("patients.csv"))
        print(row["release_id"], row["outcome"])
        ```
    """
    spec = load_spec(spec_path)
    pipeline.model_spec(spec, attributes)  # a bad attribute is refused before anything is staged
    defs = _definitions(spec, spec_path, db_path, FrameSource(snapshot_df), backend=backend)
    store = ReleaseStore(db_path, spec)
    with store.session(), reporting(progress):
        return _run(defs, spec, store, snapshot_df, instance or dg.DagsterInstance.ephemeral(), attributes)


def _run(
    defs: dg.Definitions,
    spec: Spec,
    store: ReleaseStore,
    snapshot_df: pd.DataFrame,
    instance: dg.DagsterInstance,
    attributes: Sequence[str] | None,
) -> dict:
    """``run_release``'s body, inside its session of ``store``."""
    name = f"{spec.name}_releases"
    last = pipeline.unchanged(store, snapshot_df, attributes)
    release_id = last if last is not None else pipeline.next_release_id(store)
    keys = sorted(instance.get_dynamic_partitions(name))
    added = missing_keys(keys, release_id)
    if added:
        instance.add_dynamic_partitions(name, added)
    key = sorted([*keys, *added])[release_id - 1]
    if last is not None:
        row = store.manifest().set_index("release_id").loc[last].to_dict()
        return {"release_id": last, "partition_key": key, "run_id": None, "outcome": "unchanged", **row}
    job = defs.resolve_job_def(f"{spec.name}_release")
    tags = {TAG: spec.name, **({ATTRIBUTES_TAG: ",".join(attributes)} if attributes else {})}
    run_id = str(uuid.uuid4())  # known before the run, to read its check evaluations when it raises
    try:
        result = job.execute_in_process(
            partition_key=key, instance=instance, tags=tags, run_config=QUIET, run_id=run_id
        )
    except (dg.DagsterError, dg.Failure) as exc:
        refused = refusal(getattr(exc, "user_exception", exc))
        if refused is not None:
            raise refused from exc
        records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        events = [r.event_log_entry.dagster_event for r in records.records]
        blocked = failed_checks(spec.name, key, [e.asset_check_evaluation_data for e in events if e is not None])
        if blocked is not None:  # a blocking check failed (Dagster raises its own error for it)
            raise NotPublishable(blocked) from exc
        raise
    raise_unless_published(result, spec.name, key)
    row = store.manifest().set_index("release_id").loc[release_id].to_dict()
    return {"release_id": release_id, "partition_key": key, "run_id": result.run_id, "outcome": "published", **row}


def raise_unless_published(result: ExecutionResult, table: str, key: str) -> None:
    """Raise NotPublishable naming the failed blocking checks, the refusal (``Failure``) of a step, or the class of
    any other error of a step, when the release run ``result`` of partition ``key`` did not publish; return
    quietly when it did."""
    failed = failed_checks(table, key, result.get_asset_check_evaluations())
    if failed:
        raise NotPublishable(failed)
    for event in result.all_events:
        if event.is_step_failure:
            data = event.step_failure_data
            if data.user_failure_data:
                why = data.user_failure_data.description
            else:  # the error's class, not its text, which may quote stored values
                why = f"{data.error.cls_name} (the run's event log has the details)" if data.error else \
                    "no error recorded"
            raise NotPublishable(f"{table} release {key} was not published; step {event.step_key} failed: {why}")
    if not result.success:
        raise NotPublishable(f"{table} release {key} was not published; run {result.run_id} failed")


def failed_checks(table: str, key: str, evaluations: Sequence[dg.AssetCheckEvaluation]) -> str | None:
    """The message of a release refused by its blocking checks (those of ``evaluations`` that failed with
    severity ERROR, each with its description: counts, never an individual), or None when none failed."""
    failed = [e for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if not failed:
        return None
    why = "; ".join(f"{e.check_name}: {e.description or 'failed'}" for e in failed)
    return f"{table} release {key} was not published; blocking check(s) failed: {why}"


def refusal(error: BaseException | None) -> PrivReleaseError | None:
    """The package's error behind a step's failure: ``error`` itself, or the one a ``Refusal`` carries
    (``partitions.refusals``); None for any other error."""
    if isinstance(error, PrivReleaseError):
        return error
    return error.error if isinstance(error, Refusal) else None
