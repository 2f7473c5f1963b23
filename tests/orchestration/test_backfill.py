"""A backfill over five partitions, run by Dagster's own daemons, publishes the same history as five releases
made one by one."""

import logging
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import yaml
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBChangeLogSource, run_release
from dagster_privrelease.orchestration.partitions import partition_key
from dagster_privrelease.storage import ReleaseStore, frame_digest

from .conftest import people, write_source
from .test_assets import PARTITIONS

ROOT = Path(__file__).resolve().parents[2]


def _published(path) -> list[str]:
    """The content digest of each published release, in release order."""
    with duckdb.connect(str(path), read_only=True) as con:
        table = con.execute("SELECT * FROM published.release").df()
    return [frame_digest(part.drop(columns="release_id")) for _, part in table.groupby("release_id", sort=True)]


def _code_location(folder: Path, spec_path: Path, source: DuckDBChangeLogSource) -> InProcessWorkspaceLoadTarget:
    """A code location file with this table's release definitions, loaded as the daemons load user code."""
    module = folder / "location.py"
    module.write_text(textwrap.dedent(f"""
        from dagster_privrelease.orchestration import DuckDBChangeLogSource, release_definitions

        defs = release_definitions(
            {str(spec_path)!r}, {str(folder / "backfill.duckdb")!r},
            DuckDBChangeLogSource(database={source.database!r}, table={source.table!r}),
        )
    """))
    origin = LoadableTargetOrigin(executable_path=sys.executable, python_file=str(module),
                                  working_directory=str(folder), attribute="defs")
    return InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin, location_name="backfill_test"))


def test_backfill_of_five_partitions_equals_five_sequential_releases(tmp_path, spec_path):
    """The backfill daemon submits one run per partition to the run queue; the queue daemon starts them under the
    instance settings of assets/dagster.yaml (pool limit 1, run granularity). The five published releases must
    equal the five snapshots released one by one."""
    parts = [people(60).assign(position=1, op="insert")]
    for position in range(2, 6):
        start = 1000 * position
        gone = people(60).iloc[(position - 2) * 8 : (position - 1) * 8]
        parts += [gone.assign(position=position, op="delete"),
                  people(10, seed=position, start=start).assign(position=position, op="insert")]
    path = tmp_path / "data.duckdb"
    write_source(path, pd.concat(parts, ignore_index=True), table="source.people_log")
    source = DuckDBChangeLogSource(database=str(path), table="source.people_log")
    keys = [partition_key(p) for p in range(1, 6)]
    settings = yaml.safe_load((ROOT / "assets" / "dagster.yaml").read_text())
    with (
        dg.instance_for_test(overrides=settings, synchronous_run_launcher=True) as instance,
        create_test_daemon_workspace_context(_code_location(tmp_path, spec_path, source), instance) as workspace,
    ):
        instance.add_dynamic_partitions(PARTITIONS, keys)
        asset_graph = workspace.create_request_context().asset_graph
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id="releases", asset_graph=asset_graph, partition_names=keys,
            asset_selection=[dg.AssetKey(["patients", name])
                             for name in ("snapshot", "release_candidate", "published_release")],
            backfill_timestamp=time.time(), tags={}, dynamic_partitions_store=instance, all_partitions=False,
            title=None, description=None, run_config=None,
        )
        instance.add_backfill(backfill)
        queue = QueuedRunCoordinatorDaemon(interval_seconds=1)
        for _ in range(10):
            list(execute_backfill_iteration(workspace, logging.getLogger("backfill")))
            list(queue.run_iteration(workspace))
            if instance.get_backfill("releases").status != BulkActionStatus.REQUESTED:
                break
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": "releases"}))
        assert sorted(r.tags["dagster/partition"] for r in runs) == keys
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), [r.status for r in runs]
        assert instance.get_backfill("releases").status == BulkActionStatus.COMPLETED_SUCCESS
    spec = load_spec(spec_path)
    with dg.DagsterInstance.ephemeral() as other:  # in memory: only the published tables are compared
        for position in range(1, 6):
            run_release(spec_path, tmp_path / "sequential.duckdb", source.read(spec, position), instance=other)
    assert len(_published(tmp_path / "backfill.duckdb")) == 5
    assert _published(tmp_path / "backfill.duckdb") == _published(tmp_path / "sequential.duckdb")
    backfilled = ReleaseStore(tmp_path / "backfill.duckdb", spec).manifest()
    sequential = ReleaseStore(tmp_path / "sequential.duckdb", spec).manifest()
    columns = ["release_id", "rows", "groups", "counterfeits", "checks"]
    pd.testing.assert_frame_equal(backfilled[columns], sequential[columns])
