"""The definitions of one protected table: partitioned assets, blocking checks, sensors, a release job.

``release_definitions(spec_path, db_path, source)`` builds, for the table named in the spec::

    <table>/snapshot -> <table>/release_candidate -> <table>/published_release

all partitioned by one ``DynamicPartitionsDefinition`` (``<table>_releases``) whose keys are zero-padded and
increasing (``000001``), so they sort in release order; a key's release id is its rank among the keys
(``release_number``: equal to the key for a plain table, a log position's rank for a change log). Models that publish
possible worlds (sequential ℓ-diversity, Shmueli-Tassa Alg. 1) will add a ``<table>/possible_worlds`` asset
between snapshot and candidate in ``_assets``; no model of the registry uses worlds yet.

Order: Dagster has no self-dependency for dynamic partitions, so each asset finds its predecessor among the
partition keys and refuses (``Failure`` naming it) while the predecessor is not staged (``snapshot``) or not
published (``release_candidate``, ``published_release``). Every asset runs in the pool ``privrelease_<table>``;
with the instance settings of ``assets/dagster.yaml`` (pool limit 1, run granularity) one run of a table
executes at a time, in queue order, so a backfill's runs go in key order. The release job uses the in-process
executor and tags its runs ``privrelease/table``. Publication is its own asset downstream of the blocking
checks, so a failed check stops it and leaves ``published`` untouched.
"""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster import AssetExecutionContext

from .. import pipeline
from ..core.history import Report
from ..core.spec import load_spec, validate_snapshot
from ..core.utility import summarise
from ..errors import NotPublishable, PrivReleaseError, StoreError
from ..storage import ReleaseStore, frame_digest
from . import report
from .checks import CHECKS, candidate_checks
from .expectations import validate_release
from .resources import ReleaseStoreResource
from .sensors import ATTRIBUTES_TAG, TAG, request_sensor, source_sensor
from .source import DuckDBSource, FrameSource, partition_key, predecessor, release_number

#: Run config of an in-process release run that logs only errors to the console (the event log keeps all).
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def release_definitions(
    spec_path: str | Path,
    db_path: str | Path,
    source: DuckDBSource | FrameSource,
    requests: str | Path | None = None,
) -> dg.Definitions:
    """Everything Dagster needs to release one protected table.

    spec_path: the release spec (YAML); its ``name`` prefixes every asset key and names the partitions.
    db_path:   the DuckDB release store of this table (created on first use).
    source:    the source table (``DuckDBSource``) the source sensor watches and snapshots read.
    requests:  optional folder of release-request YAML files the request sensor turns into releases.
    """
    spec = load_spec(spec_path)
    table = spec.name
    partitions = dg.DynamicPartitionsDefinition(name=f"{table}_releases")
    keys = Keys(table)
    assets = _assets(table, partitions, keys)
    checks = candidate_checks(table, partitions, keys, assets[1].key)
    job = dg.define_asset_job(
        f"{table}_release",
        selection=dg.AssetSelection.assets(*assets),
        partitions_def=partitions,
        executor_def=dg.in_process_executor,
        tags={TAG: table},
        description=f"Snapshot, candidate, checks and publication of one release of {table}.",
    )
    sensors = [source_sensor(table, partitions, keys, job)]
    if requests is not None:
        sensors.append(request_sensor(table, partitions, keys, job, Path(requests)))
    return dg.Definitions(
        executor=dg.in_process_executor,  # also for the implicit asset job of UI launches and backfills
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        sensors=sensors,
        resources={
            keys.store: ReleaseStoreResource(database=str(db_path), spec=str(spec_path)),
            keys.source: source,
        },
    )


class Keys:
    """Resource keys and pool of one table, so that two tables live in one code location."""

    def __init__(self, table: str):
        self.table = table
        self.store = f"{table}_store"
        self.source = f"{table}_source"
        self.pool = f"privrelease_{table}"


def _assets(table: str, partitions: dg.DynamicPartitionsDefinition, keys: Keys) -> list[dg.AssetsDefinition]:
    common = dict(partitions_def=partitions, group_name=table, pool=keys.pool, kinds={"duckdb", "python"})

    @dg.asset(
        key=[table, "snapshot"],
        required_resource_keys={keys.store, keys.source},
        description="T(j): the source rows this release protects, captured once and never replaced.",
        **common,
    )
    def snapshot(context: AssetExecutionContext) -> dg.MaterializeResult:
        store = getattr(context.resources, keys.store).store()
        source = getattr(context.resources, keys.source)
        partition_keys = context.instance.get_dynamic_partitions(partitions.name)
        release_id = release_number(partition_keys, context.partition_key)
        staged = store.snapshot(release_id)
        if staged is None:
            ready = release_id == 1 or store.snapshot(release_id - 1) is not None
            _require(table, partition_keys, context.partition_key, ready, "staged")
        if staged is None or source.replays:
            rows = source.read(store.spec, position=int(context.partition_key))
            if staged is not None:
                same_rows(staged, rows, store.spec, context.partition_key, release_id)
        frame = staged if staged is not None else pipeline.stage(store, release_id, rows)
        delta = pipeline.release_changes(store, release_id, frame)
        return dg.MaterializeResult(
            metadata={"rows": len(frame), **delta, "captured": staged is None, "release_id": release_id}
        )

    @dg.asset(
        key=[table, "release_candidate"],
        deps=[snapshot],
        required_resource_keys={keys.store},
        description="T*(j): the model's candidate release, staged privately until its checks pass.",
        **common,
    )
    def release_candidate(context: AssetExecutionContext) -> dg.MaterializeResult:
        store = getattr(context.resources, keys.store).store()
        partition_keys = context.instance.get_dynamic_partitions(partitions.name)
        release_id = release_number(partition_keys, context.partition_key)
        _require(table, partition_keys, context.partition_key, release_id - 1 in store.release_ids(), "published")
        attributes = context.run.tags.get(ATTRIBUTES_TAG)
        release = pipeline.make_candidate(store, release_id, attributes.split(",") if attributes else None)
        # LM, NCP, discernibility of the candidate; the query error needs T(j) and is computed at publication
        utility = summarise(release.table, release.counterfeits, store.bound_spec(store.snapshot(release_id)))
        return dg.MaterializeResult(
            metadata={
                "rows": len(release.table),
                "groups": release.groups,
                "counterfeits": release.counterfeit_count,
                "model": release.model,
                **report.numeric("utility", utility),
            }
        )

    @dg.asset(
        key=[table, "published_release"],
        deps=[release_candidate],
        required_resource_keys={keys.store},
        description="The release as published: written in one transaction once every blocking check holds.",
        **common,
    )
    def published_release(context: AssetExecutionContext) -> dg.MaterializeResult:
        store = getattr(context.resources, keys.store).store()
        key = context.partition_key
        partition_keys = context.instance.get_dynamic_partitions(partitions.name)
        release_id = release_number(partition_keys, key)
        _require(table, partition_keys, key, release_id - 1 in store.release_ids(), "published")
        reports = verdicts_of_run(context, release_candidate.key) or judge(store, release_id)
        try:
            outcome = pipeline.publish(store, release_id, reports)
        except NotPublishable as exc:
            failed = report.checks_passed(reports)
            raise dg.Failure(description=f"{table} release {key}: {exc}", metadata=failed) from exc
        metadata = {
            **{k: outcome[k] for k in ("rows", "inserts", "deletes", "updates", "groups", "counterfeits")},
            **report.numeric("utility", outcome["utility"]),
            **report.checks_passed(reports),
            "report": report.history_markdown(store.manifest(), "ncp"),
        }
        return dg.MaterializeResult(metadata=metadata)

    return [snapshot, release_candidate, published_release]


def _require(table: str, keys: list[str], key: str, done: bool, what: str) -> None:
    """Refuse (Failure naming it) to go on with ``key`` while its predecessor is not ``what`` yet."""
    before = predecessor(keys, key)
    if before is not None and not done:
        raise dg.Failure(
            description=f"{table} release {key}: its predecessor {before} is not {what}; materialise {before} "
            "first (releases are made in key order)",
            metadata={"predecessor": before},
        )


def verdicts_of_run(context: AssetExecutionContext, candidate: dg.AssetKey) -> list[Report] | None:
    """The judge's reports as this run's three checks of ``candidate`` recorded them, or None when the run did
    not evaluate all three (publication in a run of its own: the caller judges again).

    Each check's metadata carries ``<report>/ok`` and ``<report>/summary/blocking`` per report (``checks.result``);
    the candidate cannot change between the checks and this step, since a table's steps run one at a time.
    """
    records = context.instance.get_records_for_run(
        context.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    evaluations = [r.event_log_entry.dagster_event.asset_check_evaluation_data for r in records]
    evaluations = [e for e in evaluations if e.asset_key == candidate]
    if {e.check_name for e in evaluations} != set(CHECKS):
        return None
    reports = []
    for evaluation in evaluations:
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        for key, ok in meta.items():
            if key.endswith("/ok"):
                name = key[: -len("/ok")]
                blocking = meta.get(f"{name}/summary/blocking", 1)
                reports.append(Report(name, bool(ok), summary={"blocking": bool(blocking)}))
    return reports


def judge(store, release_id: int) -> list:
    """Every report that gates publication: the core judge (verifiers, attacks) and the GE suite."""
    candidate = store.candidate(release_id)
    snapshot = store.snapshot(release_id)
    spec = store.bound_spec(snapshot)
    return [*pipeline.judge(store, release_id), validate_release(candidate.table, spec, snapshot, candidate.attributes)]


def same_rows(staged: pd.DataFrame, rows: pd.DataFrame, spec, key: str, release_id: int) -> None:
    """Refuse when a change-log replay at ``key`` differs from the stored T(release_id): a partition of the
    change log was deleted or the log was rewritten, so key and release no longer match."""
    if frame_digest(validate_snapshot(rows, spec)) != frame_digest(staged):
        raise StoreError(
            f"partition {key}: the change log replayed at position {int(key)} differs from the stored snapshot of "
            f"release {release_id}; a partition was deleted or the log was rewritten, and a stored snapshot is "
            "never replaced"
        )


def run_release(
    spec_path: str | Path,
    db_path: str | Path,
    snapshot_df: pd.DataFrame,
    instance: dg.DagsterInstance | None = None,
    attributes: Sequence[str] | None = None,
) -> dict:
    """Publish ``snapshot_df`` as the next release of the store at ``db_path`` through the release job.

    The same definitions as ``dagster dev`` run in-process (snapshot, candidate, blocking checks, publication)
    on ``instance`` (default: an ephemeral one; its partition keys are filled up to the new release).
    Returns the manifest row of the new release with ``partition_key`` and ``run_id``. Raises NotPublishable
    naming the failed checks when a blocking check failed (nothing published; a retry with the same rows goes
    on from the staged snapshot), StoreError when the next release is already staged from other rows (publish
    it, or ``ReleaseStore.discard`` it), and the package's own error (SnapshotError, SpecError, ...) when a
    step refused its input. ``attributes`` restricts the published quasi-identifiers (a release request of the
    vertical models), as the request sensor's tag does.
    """
    defs = release_definitions(spec_path, db_path, FrameSource(snapshot_df))
    spec = load_spec(spec_path)
    store = ReleaseStore(db_path, spec)
    release_id = pipeline.next_release_id(store)
    pipeline.refuse_restaging(store, release_id, snapshot_df)
    instance = instance or dg.DagsterInstance.ephemeral()
    name = f"{spec.name}_releases"
    keys = sorted(instance.get_dynamic_partitions(name))
    added = []
    while len(keys) + len(added) < release_id:
        last = added[-1] if added else (keys[-1] if keys else None)
        added.append(partition_key(int(last) + 1 if last else 1))
    if added:
        instance.add_dynamic_partitions(name, added)
    key = sorted([*keys, *added])[release_id - 1]
    job = defs.resolve_job_def(f"{spec.name}_release")
    tags = {TAG: spec.name, **({ATTRIBUTES_TAG: ",".join(attributes)} if attributes else {})}
    try:
        result = job.execute_in_process(partition_key=key, instance=instance, tags=tags, run_config=QUIET)
    except dg.DagsterExecutionStepExecutionError as exc:
        if isinstance(exc.user_exception, PrivReleaseError):
            raise exc.user_exception from exc
        raise
    raise_unless_published(result, spec.name, key)
    row = store.manifest().set_index("release_id").loc[release_id].to_dict()
    return {"release_id": release_id, "partition_key": key, "run_id": result.run_id, **row}


def raise_unless_published(result: dg.ExecuteInProcessResult, table: str, key: str) -> None:
    """Raise NotPublishable naming the failed blocking checks, or the refusal (``Failure``) of a step, when the
    release run ``result`` of partition ``key`` did not publish; return quietly when it did."""
    failed = [
        e for e in result.get_asset_check_evaluations()
        if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    ]
    if failed:
        why = "; ".join(f"{e.check_name}: {e.description or 'failed'}" for e in failed)
        raise NotPublishable(f"{table} release {key} was not published; blocking check(s) failed: {why}")
    for event in result.all_events:
        if event.is_step_failure:
            data = event.step_failure_data
            why = data.user_failure_data.description if data.user_failure_data else data.error.message.strip()
            raise NotPublishable(f"{table} release {key} was not published; step {event.step_key} failed: {why}")
    if not result.success:
        raise NotPublishable(f"{table} release {key} was not published; run {result.run_id} failed")
