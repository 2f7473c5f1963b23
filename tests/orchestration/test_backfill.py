"""A backfill over five partitions publishes the same history as five releases made one by one."""

import dagster as dg
import duckdb
import pandas as pd

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBSource, release_definitions, run_release
from dagster_privrelease.orchestration.source import partition_key
from dagster_privrelease.storage import ReleaseStore, frame_digest

from .conftest import people, write_source
from .test_factory import PARTITIONS, _run


def _published(path) -> list[str]:
    """The content digest of each published release, in release order."""
    with duckdb.connect(str(path), read_only=True) as con:
        table = con.execute("SELECT * FROM published.release").df()
    return [frame_digest(part.drop(columns="release_id")) for _, part in table.groupby("release_id", sort=True)]


def test_backfill_of_five_partitions_equals_five_sequential_releases(tmp_path, spec_path, instance):
    """A backfill targets keys that all exist before its runs start; its runs go one at a time in key order
    (the table's pool, see assets/dagster.yaml). The result must equal releasing the five snapshots one by one."""
    parts = [people(60).assign(position=1, op="insert")]
    for position in range(2, 6):
        start = 1000 * position
        gone = people(60).iloc[(position - 2) * 8 : (position - 1) * 8]
        parts += [gone.assign(position=position, op="delete"),
                  people(10, seed=position, start=start).assign(position=position, op="insert")]
    path = tmp_path / "data.duckdb"
    write_source(path, pd.concat(parts, ignore_index=True), table="source.people_log")
    source = DuckDBSource(database=str(path), table="source.people_log", change_log="source.people_log")
    defs = release_definitions(spec_path, tmp_path / "backfill.duckdb", source)
    keys = [partition_key(p) for p in range(1, 6)]
    instance.add_dynamic_partitions(PARTITIONS, keys)
    for key in keys:
        assert _run(defs, instance, key).success, key
    spec = load_spec(spec_path)
    with dg.instance_for_test() as other:
        for position in range(1, 6):
            run_release(spec_path, tmp_path / "sequential.duckdb", source.read(spec, position), instance=other)
    assert len(_published(tmp_path / "backfill.duckdb")) == 5
    assert _published(tmp_path / "backfill.duckdb") == _published(tmp_path / "sequential.duckdb")
    backfilled = ReleaseStore(tmp_path / "backfill.duckdb", spec).manifest()
    sequential = ReleaseStore(tmp_path / "sequential.duckdb", spec).manifest()
    columns = ["release_id", "rows", "groups", "counterfeits", "checks"]
    pd.testing.assert_frame_equal(backfilled[columns], sequential[columns])
