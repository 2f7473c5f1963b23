"""The assets of one protected table, one factory per asset.

    <table>/snapshot -> <table>/<stage> ... -> <table>/release_candidate -> <table>/published_release

The keys are the defaults; a ``ReleaseTranslator`` renames them. There is one ``<stage>`` asset per stage the model declares
(``ModelDescriptor.stages``, e.g. the possible-world set of Shmueli-Tassa Alg. 1), chained in the model's
order; a model without stages has none. All are partitioned by the table's dynamic partitions, run in its pool,
belong to its group and store through the ``ReleaseStoreResource``; none of them returns or logs a private frame,
only counts.

Each asset opens with ``partitions.step`` (its partition: store, keys, release id; one store session for the
step) and refuses (``Failure`` naming it) while its
predecessor is not staged (``snapshot``) or not published (the others). Publication is its own asset downstream
of the candidate's blocking checks, so a failed check stops it and leaves ``published`` untouched.
"""

from collections.abc import Iterator, Sequence

import dagster as dg
import pandas as pd
from dagster import AssetExecutionContext

from .. import pipeline
from ..core.judge.history import Report
from ..core.judge.utility import summarise
from ..core.models import Stage
from ..core.spec import Spec, validate_snapshot
from ..errors import NotPublishable, StoreError
from ..storage import ReleaseStore, frame_digest
from . import report
from .certificate import write_certificate
from .checks import CHECKS
from .expectations import validate_release
from .export import certificate_path, export_asset
from .partitions import step
from .sensors import ATTRIBUTES_TAG
from .translator import ReleaseTable

#: The kinds every asset of a table shows in the UI.
KINDS = {"duckdb", "python"}


def release_assets(table: ReleaseTable, stages: Sequence[Stage]) -> list[dg.AssetsDefinition]:
    """``table``'s assets in run order: the snapshot, one asset per model stage, the candidate, the publication,
    and, when the table exports (``ReleaseTable.export``), the export (``export.export_asset``)."""
    assets = [snapshot_asset(table)]
    for stage in stages:
        assets.append(stage_asset(table, stage, assets[-1].key))
    candidate = candidate_asset(table, [a.key for a in assets])
    published = published_asset(table, candidate.key)
    exported = [export_asset(table, published.key, table.export)] if table.export is not None else []
    return [*assets, candidate, published, *exported]


def _asset(table: ReleaseTable, step: str, description: str, deps: Sequence[dg.AssetKey] = (), source=False,
           output_required=True):
    """The ``dg.asset`` decorator of ``table``'s asset ``step``, with what every asset of the table shares."""
    return dg.asset(
        output_required=output_required,
        key=table.asset_key(step),
        deps=list(deps),
        required_resource_keys={table.store, *([table.source] if source else [])},
        description=description,
        partitions_def=table.partitions,
        group_name=table.group,
        pool=table.pool,
        kinds=KINDS,
    )


def snapshot_asset(table: ReleaseTable) -> dg.AssetsDefinition:
    """``snapshot``: T(j) read from the source and staged (``pipeline.stage``) while release j is unpublished, so
    re-materialising a refused partition re-captures the fixed source; once j is published its snapshot is never
    replaced, and a source that replays (a change log) must rebuild it identically (``same_rows``).

    When the source holds exactly the rows of the last published release (``pipeline.unchanged``, with the run's
    requested attributes: the source was restored after the run was requested), nothing is staged and nothing
    materialised: the run logs why and ends, its later steps skipped, so no copy of the release is published."""

    @_asset(table, "snapshot", "T(j): the source rows this release protects, captured until the release is "
            "published and never replaced afterwards.", source=True, output_required=False)
    def snapshot(context: AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        with step(context, table) as part:
            part.require_published()
            store, release_id = part.store, part.release_id
            source = getattr(context.resources, table.source)
            published = release_id in store.release_ids()
            if published:
                frame = pipeline.staged_snapshot(store, release_id)
                if source.replays:
                    same_rows(frame, source.read(store.spec, position=int(part.key)), store.spec, part.key,
                              release_id)
            else:
                rows = source.read(store.spec, position=int(part.key))
                copy = pipeline.unchanged(store, rows, _attributes(context))
                if copy is not None:
                    context.log.info(f"{table.name} release {part.key}: the source holds exactly the rows of "
                                     f"release {copy}, the last published; nothing to publish, the run ends here")
                    return
                frame = pipeline.stage(store, release_id, rows)
            delta = pipeline.release_changes(store, release_id, frame)
        yield dg.MaterializeResult(
            metadata={"rows": len(frame), **delta, "captured": not published, "release_id": release_id}
        )

    return snapshot


def stage_asset(table: ReleaseTable, stage: Stage, upstream: dg.AssetKey) -> dg.AssetsDefinition:
    """``<stage.name>``: the model's stage run on the staged snapshot (``pipeline.prepare``), its frames kept
    privately with the release; the metadata holds the frames' row counts and nothing of their content."""

    @_asset(table, stage.name, stage.description, deps=[upstream])
    def model_stage(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:
            part.require_published()
            frames = pipeline.prepare(part.store, part.release_id, stage.name)
        counts = {f"{name}/rows": len(frame) for name, frame in frames.items()}
        return dg.MaterializeResult(metadata={"frames": len(frames), **counts, "release_id": part.release_id})

    return model_stage


def candidate_asset(table: ReleaseTable, deps: Sequence[dg.AssetKey]) -> dg.AssetsDefinition:
    """``release_candidate``: T*(j), the model's release staged privately (``pipeline.make_candidate``), restricted
    to the attributes of the run's release request when it has one; metadata: counts and utility."""

    @_asset(table, "release_candidate", "T*(j): the model's candidate release, staged privately until its checks "
            "pass.", deps=deps)
    def release_candidate(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:
            part.require_published()
            release = pipeline.make_candidate(part.store, part.release_id, _attributes(context))
            # LM, NCP, discernibility of the candidate; the query error needs T(j) and is computed at publication
            spec = part.store.staged_bound_spec(part.release_id)  # the binding columns, not all of T(j)
            utility = summarise(release.table, release.counterfeits, spec)
        rows, counterfeits = len(release.table), int(release.counterfeit_count)
        return dg.MaterializeResult(
            metadata={
                "rows (incl. counterfeits)": rows,
                "genuine rows": rows - counterfeits,
                "counterfeits": counterfeits,
                "groups": release.groups,
                **report.numeric("utility", utility, skip=("rows", "groups", "counterfeits")),
                "model": release.model,
            }
        )

    return release_candidate


def published_asset(table: ReleaseTable, candidate: dg.AssetKey) -> dg.AssetsDefinition:
    """``published_release``: the candidate published in one transaction (``pipeline.publish``) when every blocking
    report holds, as this run's checks recorded them (``verdicts_of_run``) or judged again; ``Failure`` naming
    the failed checks otherwise. When the table exports, the release's certificate is written under the export
    folder and linked from the metadata (``certificate``, a path)."""

    @_asset(table, "published_release", "The release as published: written in one transaction once every "
            "blocking check holds.", deps=[candidate])
    def published_release(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:
            part.require_published()
            store = part.store
            reports = verdicts_of_run(context, candidate) or judge_with_expectations(store, part.release_id)
            try:
                outcome = pipeline.publish(store, part.release_id, reports)
            except NotPublishable as exc:
                failed = report.checks_passed(reports)
                raise dg.Failure(description=f"{table.name} release {part.key}: {exc}", metadata=failed,
                                 allow_retries=False) from exc
            manifest = store.manifest()
            certificate = {}
            if table.export is not None:
                path = write_certificate(store.path, part.release_id, certificate_path(table.export, part.release_id))
                certificate = {"certificate": dg.MetadataValue.path(str(path))}
        return dg.MaterializeResult(metadata={**report.release_metadata(outcome, reports, manifest), **certificate})

    return published_release


def _attributes(context: AssetExecutionContext) -> list[str] | None:
    """The attributes the run's release request asks for (its ``privrelease/attributes`` tag), None without one."""
    attributes = context.run.tags.get(ATTRIBUTES_TAG)
    return attributes.split(",") if attributes else None


def verdicts_of_run(context: AssetExecutionContext, candidate: dg.AssetKey) -> list[Report] | None:
    """The judge's reports as this run's three checks of ``candidate`` recorded them, or None when the run did
    not evaluate all three (publication in a run of its own: the caller judges again).

    Each check's metadata carries ``<report>/ok``, ``<report>/violations`` (a count) and ``<report>/summary/<key>``
    (its numeric summary, ``blocking`` among them) per report, or ``<report>/skipped`` with the reason
    (``checks.result``); each report gets them back, its kind from its check, its violations as a frame of as many
    rows without columns (what ``pipeline.verdicts`` keeps);
    the candidate cannot change between the checks and this step, since a table's steps run one at a time.
    """
    records = context.instance.get_records_for_run(
        context.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    events = [r.event_log_entry.dagster_event for r in records]
    evaluations = [e.asset_check_evaluation_data for e in events if e is not None]
    evaluations = [e for e in evaluations if e.asset_key == candidate]
    if {e.check_name for e in evaluations} != set(CHECKS):
        return None
    reports = []
    for evaluation in evaluations:
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        kind = {"guarantee": {"kind": "guarantee"}, "attacks": {"kind": "attack"}}.get(evaluation.check_name, {})
        for key, value in meta.items():
            if key.endswith("/ok"):
                name = key[: -len("/ok")]
                prefix = f"{name}/summary/"
                summary = {k.removeprefix(prefix): v for k, v in meta.items() if k.startswith(prefix)}
                summary.update(kind, blocking=bool(summary.get("blocking", 1)))
                # the check keeps the violations' count, not the frame: a frame of as many rows, with no column
                count = meta.get(f"{name}/violations", 0)
                count = count if isinstance(count, int) else 0
                reports.append(Report(name, bool(value), pd.DataFrame(index=range(count)), summary))
            elif key.endswith("/skipped"):
                reports.append(Report(key[: -len("/skipped")], True,
                                      summary={"skipped": value, "blocking": False, **kind}))
    return reports


def judge_with_expectations(store: ReleaseStore, release_id: int) -> list[Report]:
    """Every report that gates publication: the core judge (verifiers, attacks) and the GE suite."""
    candidate = store.candidate(release_id)
    snapshot = store.snapshot(release_id)
    spec = store.bound_spec(snapshot)
    return [*pipeline.judge(store, release_id), validate_release(candidate.table, spec, snapshot, candidate.attributes)]


def same_rows(staged: pd.DataFrame, rows: pd.DataFrame, spec: Spec, key: str, release_id: int) -> None:
    """Refuse (StoreError) when a change-log replay at ``key`` differs from the stored T(release_id): a partition
    of the change log was deleted or the log was rewritten, so key and release no longer match."""
    if frame_digest(validate_snapshot(rows, spec)) != frame_digest(staged):
        raise StoreError(
            f"partition {key}: the change log replayed at position {int(key)} differs from the stored snapshot of "
            f"release {release_id}; a partition was deleted or the log was rewritten, and a stored snapshot is "
            "never replaced"
        )
