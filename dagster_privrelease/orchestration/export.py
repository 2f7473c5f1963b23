"""The opt-in export of a protected table (``release_definitions(..., export=DIR)``): each published release
written as Parquet under DIR (``dagster_privrelease.export``) by the asset ``exported_release``, downstream of
``published_release`` and partitioned like it, and its certificate (``dagster_privrelease.certificate``) written
by ``published_release`` under ``DIR/certificate/`` (``certificate_path``) and linked from its metadata.
"""


from pathlib import Path

import dagster as dg
from dagster import AssetExecutionContext

from ..export import export_releases
from .partitions import step
from .translator import ReleaseTable


def certificate_path(folder: Path, release_id: int) -> Path:
    """Where the certificate of release ``release_id`` is written under the export folder ``folder``."""
    return folder / "certificate" / f"release_id={release_id}.html"


def export_asset(table: ReleaseTable, published: dg.AssetKey, folder: Path) -> dg.AssetsDefinition:
    """``exported_release``: the partition's published release, its manifest row and counterfeit counts, and the
    domain, written as hive-partitioned Parquet under ``folder`` (``export.export_releases``; a re-run replaces
    the release's files). Refuses (``Failure``, naming it) while the partition's release is not published. Metadata: the
    folder of the release's rows (a path) and its row count."""

    @dg.asset(
        key=table.asset_key("exported_release"),
        deps=[published],
        required_resource_keys={table.store},
        description="The published release as Parquet, partitioned by release, where consumers read it.",
        partitions_def=table.partitions,
        group_name=table.group,
        pool=table.pool,
        kinds={"duckdb", "parquet"},
    )
    def exported_release(context: AssetExecutionContext) -> dg.MaterializeResult:
        with step(context, table) as part:  # a release not published is refused by export_releases
            with part.store.connect() as con:
                export_releases(con, folder, [part.release_id])
            rows = part.store.manifest().set_index("release_id").loc[part.release_id, "rows"]
        where = folder / "release" / f"release_id={part.release_id}"
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(where)), "rows": int(rows),
                                              "release_id": part.release_id})

    return exported_release
