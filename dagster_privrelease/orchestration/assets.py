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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster import AssetExecutionContext

from .. import pipeline
from ..core import models
from ..core.judge.history import Report
from ..core.judge.utility import summarise
from ..core.models import Stage
from ..core.spec import Spec, validate_snapshot
from ..errors import NotPublishable, StoreError
from ..export import export_releases
from ..storage import ReleaseStore, frame_digest
from . import report
from .certificate import write_certificate
from .checks import CHECKS
from .expectations import validate_candidate
from .partitions import step
from .resources import PrivreleaseBackend
from .sensors import ATTRIBUTES_TAG
from .translator import ReleaseTable

#: The kinds every asset of a table shows in the UI; the published release is also a ``table``.
KINDS = {"duckdb", "python"}

#: The tag naming a table's model on each of its assets (filterable in the asset catalogue).
MODEL_TAG = "privrelease/model"

#: The candidate's metadata entry saying where its partition-parallel steps ran (``PrivreleaseBackend.where``).
BACKEND = "privrelease/backend"


def release_assets(table: ReleaseTable, spec: Spec, source: object) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """``table``'s assets in run order: the source (an external ``AssetSpec``, ``source_spec``), the snapshot,
    one asset per model stage, the candidate, the publication, and, when the table exports
    (``ReleaseTable.export``), the export (``export_asset``). Each description opens with what the asset is
    and closes with the model's guarantee (``ModelDescriptor.describe``)."""
    model = models.descriptor(spec.model.name)
    shared = Shared(table, model.describe(spec), model.name)
    upstream = source_spec(table, source, spec)
    assets: list[dg.AssetsDefinition] = [snapshot_asset(shared, upstream.key)]
    for stage in model.stages:
        assets.append(stage_asset(shared, stage, assets[-1].key))
    candidate = candidate_asset(shared, [a.key for a in assets])
    published = published_asset(shared, candidate.key)
    exported = [export_asset(shared, published.key, table.export)] if table.export is not None else []
    return [upstream, *assets, candidate, published, *exported]


@dataclass(frozen=True)
class Shared:
    """What every asset of a table shares: the table, its model's guarantee sentence and its model's name."""

    table: ReleaseTable
    guarantee: str
    model: str

    def asset(self, step: str, description: str, deps: Sequence[dg.AssetKey] = (), source: bool = False,
              output_required: bool = True, kinds: Iterable[str] = KINDS, resources: Iterable[str] = ()):
        """The ``dg.asset`` decorator of the table's asset ``step``: ``description`` followed by the guarantee,
        the table's partitions, group, pool, owners, kinds and the model tag; it needs the store, the source when
        ``source``, and ``resources``."""
        table = self.table
        return dg.asset(
            output_required=output_required,
            key=table.asset_key(step),
            deps=list(deps),
            required_resource_keys={table.store, *([table.source] if source else []), *resources},
            description=f"{description}\n\n**Protected by** {self.guarantee}.",
            partitions_def=table.partitions,
            group_name=table.group,
            pool=table.pool,
            kinds=set(kinds),
            owners=table.owners,
            tags={MODEL_TAG: self.model},
        )


def source_spec(table: ReleaseTable, source: object, spec: Spec) -> dg.AssetSpec:
    """The source as an external asset upstream of the snapshot (``<table>/source``): Dagster does not
    materialise it, the source sensor watches it. A source with a ``table`` (the DuckDB kinds) carries it as
    ``dagster/table_name`` and the kind ``duckdb``; its description names the spec's columns by role (the
    identifier and the sensitive column stay in the private schema once captured)."""
    name = getattr(source, "table", None)
    return dg.AssetSpec(
        table.asset_key("source"),
        description=f"The rows {table.name} protects, as their owner keeps them ({type(source).__name__}"
        + (f" {name}" if isinstance(name, str) else "") + f"): identifier {spec.id}, quasi-identifiers "
        f"{', '.join(spec.quasi_identifiers)}, sensitive {spec.sensitive}. Outside this plugin; watched by the "
        "source sensor, read by the snapshot.",
        group_name=table.group,
        kinds={"duckdb"} if isinstance(name, str) else set(),
        owners=table.owners,
        metadata={"dagster/table_name": name} if isinstance(name, str) else None,
    )


def snapshot_asset(shared: Shared, upstream: dg.AssetKey) -> dg.AssetsDefinition:
    """``snapshot``: T(j) read from the source and staged (``pipeline.stage``) while release j is unpublished, so
    re-materialising a refused partition re-captures the fixed source; once j is published its snapshot is never
    replaced, and a source that replays (a change log) must rebuild it identically (``same_rows``).

    When the source holds exactly the rows of the last published release (``pipeline.unchanged``, with the run's
    requested attributes: the source was restored after the run was requested), nothing is staged and nothing
    materialised: the run logs why and ends, its later steps skipped, so no copy of the release is published."""
    table = shared.table

    @shared.asset("snapshot", "T(j): the source rows this release protects, captured until the release is "
                  "published and never replaced afterwards; private (counts only here).", deps=[upstream],
                  source=True, output_required=False)
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
                rows = len(frame)
            else:
                fresh = source.read(store.spec, position=int(part.key))
                copy = pipeline.unchanged(store, fresh, _attributes(context))
                if copy is not None:
                    context.log.info(f"{table.name} release {part.key}: the source holds exactly the rows of "
                                     f"release {copy}, the last published; nothing to publish, the run ends here")
                    return
                rows = pipeline.stage(store, release_id, fresh)
            delta = pipeline.release_changes(store, release_id)
        yield dg.MaterializeResult(
            metadata={"rows": rows, **delta, "captured": not published, "release_id": release_id}
        )

    return snapshot


def stage_asset(shared: Shared, stage: Stage, upstream: dg.AssetKey) -> dg.AssetsDefinition:
    """``<stage.name>``: the model's stage run on the staged snapshot (``pipeline.prepare``), its frames kept
    privately with the release; the metadata holds the frames' row counts and nothing of their content."""
    table = shared.table

    @shared.asset(stage.name, stage.description[:1].upper() + stage.description[1:] + ".", deps=[upstream])
    def model_stage(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:
            part.require_published()
            frames = pipeline.prepare(part.store, part.release_id, stage.name)
        counts = {f"{name}/rows": len(frame) for name, frame in frames.items()}
        return dg.MaterializeResult(metadata={"frames": len(frames), **counts, "release_id": part.release_id})

    return model_stage


def candidate_asset(shared: Shared, deps: Sequence[dg.AssetKey]) -> dg.AssetsDefinition:
    """``release_candidate``: T*(j), the model's release staged privately (``pipeline.make_candidate``), restricted
    to the attributes of the run's release request when it has one, its partition-parallel steps run on the table's
    backend (``PrivreleaseBackend``); metadata: counts and utility, each figure under its ``report.FIGURES`` name
    (the query error is measured at publication, against T(j)), and where the steps ran (``BACKEND``, also a line
    of the run log)."""
    table = shared.table

    @shared.asset("release_candidate", "T*(j): the model's candidate release, staged privately until its three "
                  "blocking checks pass.\n\n" + report.glossary(("lm", "ncp", "discernibility")), deps=deps,
                  resources=[table.backend])
    def release_candidate(context: AssetExecutionContext) -> dg.MaterializeResult:
        resource: PrivreleaseBackend = getattr(context.resources, table.backend)
        with step(context, table) as part:
            part.require_published()
            context.log.info(f"{table.name} release {part.key}: the model's partition-parallel steps run on "
                             f"{resource.where()}")
            release = pipeline.make_candidate(part.store, part.release_id, _attributes(context), backend=resource.backend())
            # LM, NCP, discernibility of the candidate; the query error needs T(j) and is computed at publication
            spec = part.store.staged_bound_spec(part.release_id)  # the binding columns, not all of T(j)
            utility = summarise(release.table, release.counterfeits, spec)
        rows, counterfeits = len(release.table), int(release.counterfeit_count)
        return dg.MaterializeResult(
            metadata={
                "genuine rows": rows - counterfeits,
                "counterfeits": counterfeits,
                **report.utility_metadata(utility),
                "groups": release.groups,
                **report.table_metadata(rows),
                BACKEND: resource.where(),
            }
        )

    return release_candidate


def published_asset(shared: Shared, candidate: dg.AssetKey) -> dg.AssetsDefinition:
    """``published_release``: the candidate published in one transaction (``pipeline.publish``) when every blocking
    report holds, as this run's checks recorded them (``verdicts_of_run``) or judged again; ``Failure`` naming
    the failed checks otherwise. Its metadata: ``report.release_metadata`` with the standard table metadata
    (``dagster/row_count``, ``dagster/table_name``: ``<store>.published.release``, ``dagster/column_schema``)
    and, when the table exports, the release's certificate written under the export folder (``certificate``, a
    path)."""
    table = shared.table

    @shared.asset("published_release", "T*(j) as published in `published.release` of the release store (one "
                  "row per published row, counterfeits included, marked by group in `published.counterfeit`), "
                  "written in one transaction once every blocking check holds.\n\n" + report.glossary(),
                  deps=[candidate], kinds={*KINDS, "table"})
    def published_release(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:
            part.require_published()
            store = part.store
            reports = verdicts_of_run(context, candidate) or judge_with_expectations(store, part.release_id)
            try:
                outcome = pipeline.publish(store, part.release_id, reports)
            except NotPublishable as exc:
                raise dg.Failure(description=f"{table.name} release {part.key}: {exc}",
                                 metadata={"checks": report.verdict_table(reports)}, allow_retries=False) from exc
            manifest = store.manifest()
            standard = report.table_metadata(
                int(outcome["rows"]),
                table_name=f"{Path(store.path).stem}.published.release",
                column_schema=report.column_schema(store.published_columns(), store.spec.quasi_identifiers,
                                                   store.spec.sensitive),
            )
            certificate = {}
            if table.export is not None:
                path = write_certificate(store.path, part.release_id, certificate_path(table.export, part.release_id),
                                         store.spec)
                certificate = {"certificate": dg.MetadataValue.path(str(path))}
        return dg.MaterializeResult(metadata={**report.release_metadata(outcome, reports, manifest, standard),
                                              **certificate})

    return published_release


def _attributes(context: AssetExecutionContext) -> list[str] | None:
    """The attributes the run's release request asks for (its ``privrelease/attributes`` tag), None without one."""
    attributes = context.run.tags.get(ATTRIBUTES_TAG)
    return attributes.split(",") if attributes else None


def verdicts_of_run(context: AssetExecutionContext, candidate: dg.AssetKey) -> list[Report] | None:
    """The judge's reports as this run's three checks of ``candidate`` recorded them, or None when the run did
    not evaluate all three (publication in a run of its own: the caller judges again).

    Each check's ``verdict`` table (``checks.result``) has one row per report with its outcome (holds, broken,
    not run, with the reason in ``reading``), whether it blocks, and its counts (``checked``, ``broken``); each
    report gets them back, its violations as a frame of ``broken`` rows without columns (what ``pipeline.verdicts``
    keeps); the candidate cannot change between the checks and this step, since a table's steps run one at a time.
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
        table = evaluation.metadata["verdict"]
        assert isinstance(table, dg.TableMetadataValue)  # written by checks.result
        for row in (record.data for record in table.records):
            if row["outcome"] == "not run":
                summary = {"skipped": str(row["reading"]).removeprefix("not run: "), "blocking": False}
                reports.append(Report(str(row["report"]), True, summary=summary))
            else:
                summary = {"kind": "attack" if row["kind"] == "attack" else "guarantee",
                           "blocking": bool(row["blocking"])}
                if isinstance(row["checked"], int):
                    summary["checked"] = row["checked"]
                broken = row["broken"] if isinstance(row["broken"], int) else 0
                reports.append(Report(str(row["report"]), row["outcome"] == "holds",
                                      pd.DataFrame(index=range(broken)), summary))
    return reports


def judge_with_expectations(store: ReleaseStore, release_id: int) -> list[Report]:
    """Every report that gates publication: the core judge (verifiers, attacks) and the GE suite."""
    return [*pipeline.judge(store, release_id), validate_candidate(store, release_id)]


def same_rows(staged: pd.DataFrame, rows: pd.DataFrame, spec: Spec, key: str, release_id: int) -> None:
    """Refuse (StoreError) when a change-log replay at ``key`` differs from the stored T(release_id): a partition
    of the change log was deleted or the log was rewritten, so key and release no longer match."""
    if frame_digest(validate_snapshot(rows, spec)) != frame_digest(staged):
        raise StoreError(
            f"partition {key}: the change log replayed at position {int(key)} differs from the stored snapshot of "
            f"release {release_id}; a partition was deleted or the log was rewritten, and a stored snapshot is "
            "never replaced"
        )


def export_asset(shared: Shared, published: dg.AssetKey, folder: Path) -> dg.AssetsDefinition:
    """``exported_release``: the partition's published release, its manifest row and counterfeit counts, and the
    domain, written as hive-partitioned Parquet under ``folder`` (``export.export_releases``; a re-run replaces
    the release's files). Refuses (``Failure``, naming it) while the partition's release is not published.
    Metadata: the folder of the release's rows (a path) and its row count."""
    table = shared.table

    @shared.asset("exported_release", "The published release as Parquet, partitioned by release "
                  "(`release_id=N/` folders), where consumers read it without this package.", deps=[published],
                  kinds={"duckdb", "parquet"})
    def exported_release(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:  # a release not published is refused by export_releases
            with part.store.connect() as con:
                export_releases(con, folder, [part.release_id])
            rows = part.store.manifest().set_index("release_id").loc[part.release_id, "rows"]
        where = folder / "release" / f"release_id={part.release_id}"
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(where)), "rows": int(rows),
                                              "release_id": part.release_id})

    return exported_release


def certificate_path(folder: Path, release_id: int) -> Path:
    """Where the certificate of release ``release_id`` is written under the export folder ``folder``."""
    return folder / "certificate" / f"release_id={release_id}.html"
