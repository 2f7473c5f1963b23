"""Order and safety of releases: predecessors, backfills, change-log sources, schema drift, a locked store."""


import duckdb
import pandas as pd
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBChangeLogSource, release_definitions
from dagster_privrelease.orchestration.partitions import partition_key
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage import write as storage

from .conftest import locked_by_another_process, people, write_source
from .test_assets import JOB, PARTITIONS, _defs, _failure, _run


def test_out_of_order_release_names_its_predecessor(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    defs = _defs(tmp_path, spec_path)
    instance.add_dynamic_partitions(PARTITIONS, ["000001", "000002"])
    result = _run(defs, instance, "000002")
    assert not result.success
    assert "predecessor 000001" in _failure(result)
    assert _run(defs, instance, "000001").success
    assert _run(defs, instance, "000002").success


def test_schema_drift_in_the_source_is_refused(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    defs = _defs(tmp_path, spec_path)
    assert _run(defs, instance, "000001").success
    write_source(tmp_path / "data.duckdb", people(90).drop(columns="zipcode"))
    dropped = _run(defs, instance, "000002")
    assert not dropped.success and "['zipcode']" in _failure(dropped) and "schema drift" in _failure(dropped)
    write_source(tmp_path / "data.duckdb", people(90).assign(visits=lambda d: d["visits"].astype(str) + " visits"))
    retyped = _run(defs, instance, "000002")
    assert not retyped.success and "'visits' was BIGINT, now VARCHAR" in _failure(retyped)
    assert ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path)).release_ids() == [1]


def test_locked_store_fails_with_a_clear_message(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    store = tmp_path / "releases.duckdb"
    duckdb.connect(str(store)).close()
    with locked_by_another_process(store) as pid:
        result = _run(_defs(tmp_path, spec_path), instance, "000001")
        assert not result.success
        message = _failure(result)
        assert "locked by" in message and str(pid) in message


def test_change_log_partitions_rebuild_their_snapshots(tmp_path, spec_path, instance):
    log = _change_log()
    path = tmp_path / "data.duckdb"
    write_source(path, log, table="source.people_log")
    source = DuckDBChangeLogSource(database=str(path), table="source.people_log")
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", source)
    for position in (2, 3):
        assert _run(defs, instance, partition_key(position)).success
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    second = store.snapshot(2).set_index("id")
    assert sorted(second.index) == list(range(1, 80)) + list(range(100, 110))
    assert second.loc[5, "visits"] == 42  # updated at position 3
    assert sorted(store.snapshot(1)["id"]) == list(range(100))  # key 000002 is release 1: the log at position 2


def _change_log() -> pd.DataFrame:
    """Position 1: 80 inserts; 2: 20 more inserts; 3: id 0 deleted, id 5 updated, ids 80..99 deleted, 10 new."""
    base = people(80)
    more = people(20, seed=1, start=80)
    updated = base[base["id"] == 5].assign(visits=42)
    gone = pd.concat([base[base["id"] == 0], more])
    new = people(10, seed=2, start=100)
    parts = [
        base.assign(position=1, op="insert"),
        more.assign(position=2, op="insert"),
        updated.assign(position=3, op="update"),
        gone.assign(position=3, op="delete"),
        new.assign(position=3, op="insert"),
    ]
    return pd.concat(parts, ignore_index=True)


def test_unknown_partition_is_refused(tmp_path, spec_path, instance):
    """A key that is not a partition of the table (the sensors add them) publishes nothing."""
    write_source(tmp_path / "data.duckdb", people(60))
    defs = _defs(tmp_path, spec_path)
    with pytest.raises(Exception, match="000007"):
        defs.resolve_job_def(JOB).execute_in_process(partition_key="000007", instance=instance)
    store = tmp_path / "releases.duckdb"
    assert not store.exists() or ReleaseStore(store, load_spec(spec_path)).release_ids() == []


def test_a_run_that_dies_while_publishing_leaves_nothing_and_its_rerun_publishes(
    tmp_path, spec_path, instance, monkeypatch
):
    """The process dies after published.release was written inside the publication's transaction: nothing of the
    release is in ``published``, and running the same partition again publishes it once."""
    write_source(tmp_path / "data.duckdb", people(60))
    defs = _defs(tmp_path, spec_path)
    real = storage._insert

    def dying(con, table, frame):
        if table == "private.digest":  # published.release, .counterfeit, .domain and private.hosting are written
            raise SystemExit("killed")
        real(con, table, frame)

    monkeypatch.setattr(storage, "_insert", dying)
    assert not _run(defs, instance, "000001").success
    with duckdb.connect(str(tmp_path / "releases.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM published.release").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM published.manifest").fetchone() == (0,)
    monkeypatch.setattr(storage, "_insert", real)
    assert _run(defs, instance, "000001").success
    with duckdb.connect(str(tmp_path / "releases.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM published.release").fetchone() == (60,)
        assert con.execute("SELECT release_id FROM published.manifest").fetchall() == [(1,)]
