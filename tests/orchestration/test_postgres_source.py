"""``PostgresTableSource`` against the session's real PostgreSQL server (``tests/pg_server.py``): snapshot reads,
the change feed's commit order, issue #25's end-to-end test (the sensor publishing each insert, delete and update
once through the blocking checks, the export read back from Parquet by DuckDB alone, the certificates rendered in
headless Chromium), and one clear line (no password, no stored value) for a bad connection, a missing table or a column of
the wrong type."""

import re

import dagster as dg
import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import SnapshotError, StoreError
from dagster_privrelease.orchestration import PostgresTableSource, release_definitions
from dagster_privrelease.orchestration.checks import CHECKS
from dagster_privrelease.orchestration.sensors import tick
from dagster_privrelease.storage import ReleaseStore

from ..chromium import render
from ..pg_server import PASSWORD
from .test_assets import JOB, _metadata
from .test_sensor_promises import patients

SENSOR = "patients_source_changed"
#: An id of the tables below (``patients``: p000, p001, ...), as it could leak into a message.
ID = re.compile(r"\bp\d{3}\b")


def _dbapi():
    return pytest.importorskip("adbc_driver_postgresql.dbapi")


def _sql(dsn: str, *statements: str) -> None:
    """Run ``statements`` in one committed transaction."""
    with _dbapi().connect(dsn) as con, con.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
        con.commit()


def _table(dsn: str, schema: str, rows: pd.DataFrame) -> str:
    """``rows`` as the new table ``<schema>.people`` (ingested through Arrow); its name."""
    with _dbapi().connect(dsn) as con, con.cursor() as cur:
        cur.adbc_ingest("people", pa.Table.from_pandas(rows, preserve_index=False), mode="create",
                        db_schema_name=schema)
        con.commit()
    return f"{schema}.people"


def _source(dsn: str, table: str, schema: str) -> PostgresTableSource:
    return PostgresTableSource(dsn=dsn, table=table, feed_schema=schema)


def test_a_snapshot_reads_text_ids_and_nulls_column_wise(postgres_server, pg_schema, spec_path):
    spec = load_spec(spec_path)
    _sql(postgres_server,
         f"CREATE TABLE {pg_schema}.people (id text PRIMARY KEY, age integer, sex text, zipcode numeric(7, 1), "
         "visits integer, disease text, extra jsonb)",
         f"INSERT INTO {pg_schema}.people VALUES ('p123', 34, 'F', 12345.5, NULL, 'flu', NULL), "
         "('007', 61, 'M', 20000, 4, NULL, '{}'), ('7', 45, NULL, 30000, 2, 'gastritis', NULL)")
    source = _source(postgres_server, f"{pg_schema}.people", pg_schema)
    rows = source.read(spec)
    assert list(rows.columns) == spec.columns and list(rows["id"]) == ["007", "7", "p123"]  # text: 007 is not 7
    assert rows["zipcode"].dtype == "float64" and rows["zipcode"].tolist() == [20000.0, 30000.0, 12345.5]
    assert rows["visits"].isna().tolist() == [False, False, True]
    assert rows["disease"].isna().tolist() == [True, False, False] and rows["sex"].isna().tolist() == [False, True,
                                                                                                       False]
    assert source.install_change_feed() == 1  # the current rows are position 1
    pd.testing.assert_frame_equal(source.read(spec, position=1), rows)  # the replay reads what the table holds


def test_the_feed_positions_follow_commit_order(postgres_server, pg_schema, spec_path):
    """Transaction A writes first and commits last, and B changes the row A changes after B committed: the feed
    orders by commit (B, then A), so each position replays exactly the table as it was then."""
    spec = load_spec(spec_path)
    source = _source(postgres_server, _table(postgres_server, pg_schema, patients(12)), pg_schema)
    source.install_change_feed()
    table = f"{pg_schema}.people"
    dbapi = _dbapi()
    with dbapi.connect(postgres_server) as a, dbapi.connect(postgres_server) as b, a.cursor() as ca, \
            b.cursor() as cb:
        ca.execute(f"UPDATE {table} SET visits = 50 WHERE id = 'p005'")  # A takes its transaction id first
        cb.execute(f"UPDATE {table} SET visits = 70 WHERE id = 'p001'")
        cb.execute(f"DELETE FROM {table} WHERE id = 'p002'")
        b.commit()
        after_b = source.read(spec)
        ca.execute(f"UPDATE {table} SET visits = 80 WHERE id = 'p001'")  # after B's commit: A's value is final
        ca.execute(f"INSERT INTO {table} SELECT 'p900', age, sex, zipcode, visits, disease FROM {table} LIMIT 1")
        assert source.fingerprint(spec).position == 2  # A is not committed: its changes have no position yet
        a.commit()
    _sql(postgres_server, f"INSERT INTO {table} SELECT 'p901', age, sex, zipcode, visits, disease FROM {table} "
         "LIMIT 0")  # a statement that changes nothing is no position
    with dbapi.connect(postgres_server) as c, c.cursor() as cur:
        cur.execute(f"DELETE FROM {table}")
        c.rollback()  # a rolled-back change is never logged
    final = source.fingerprint(spec)
    assert final.position == 3
    pd.testing.assert_frame_equal(source.read(spec, position=2), after_b)
    pd.testing.assert_frame_equal(source.read(spec, position=3), source.read(spec))
    assert source.read(spec, position=3).set_index("id").loc["p001", "visits"] == 80
    assert "p002" not in set(source.read(spec, position=2)["id"])
    _sql(postgres_server, f"TRUNCATE {table}")
    assert source.fingerprint(spec).position == 4 and source.read(spec, position=4).empty
    with dbapi.connect(postgres_server) as con, con.cursor() as cur:  # the running total is the log's count
        cur.execute(f'SELECT count(*) FROM {pg_schema}."{pg_schema}__people__changes"')
        assert source.fingerprint(spec).rows == cur.fetchall()[0][0] == 12 + 3 + 5 + 12


def test_end_to_end_each_change_is_published_once_exported_and_certified(postgres_server, pg_schema, spec_path,
                                                                         instance, tmp_path):
    """Issue #25's end-to-end test, in two Dagster runs. A PostgreSQL table of 30 people changes; the sensor,
    carried from tick to tick, publishes each change once through the blocking checks (definitions built with
    ``export=``): release 1 is the rows the feed was seeded with; release 2 an update, a delete of two people and
    an insert of two, committed separately between two ticks (ids and count as many as before) and published as
    one release at the feed's last position. A tick with no change, or whose cursor was lost, requests nothing.
    The export is read back from Parquet alone by a fresh DuckDB connection and equals the published tables;
    each release's certificate renders in headless Chromium with its plots. (That the feed's position moves on
    an update alone is ``test_the_feed_positions_follow_commit_order``'s.)"""
    spec = load_spec(spec_path)
    table = _table(postgres_server, pg_schema, patients(30))
    source = _source(postgres_server, table, pg_schema)
    source.install_change_feed()
    export, db = tmp_path / "export", tmp_path / "releases.duckdb"
    defs = release_definitions(spec_path, db, source, export=export)
    cursor, states = None, {}
    for changes in (
        [],  # the rows the feed was seeded with
        [f"UPDATE {table} SET visits = visits + 100 WHERE id = 'p003'",
         f"DELETE FROM {table} WHERE id IN ('p004', 'p010')",
         f"INSERT INTO {table} SELECT 'p' || (500 + i)::text, age, sex, zipcode, visits, disease "
         f"FROM {table}, generate_series(1, 2) AS i WHERE id = 'p007'"],
    ):
        for change in changes:  # one commit each
            _sql(postgres_server, change)
        data = tick(defs, instance, SENSOR, cursor)
        (request,) = data.run_requests
        run = defs.resolve_job_def(JOB).execute_in_process(
            partition_key=request.partition_key, tags=request.tags, instance=instance
        )
        assert run.success
        checks = run.get_asset_check_evaluations()
        assert sorted(c.check_name for c in checks) == sorted(CHECKS)
        assert all(c.blocking for c in checks) and {c.check_name for c in checks if c.passed} >= {
            "guarantee", "expectations"}  # published through the blocking checks
        assert all(c.passed or c.severity == dg.AssetCheckSeverity.WARN for c in checks)  # k-anonymity: attacks
        # on its sensitive values are reported, never blocking (checks.result)
        assert _metadata(run, "published_release")["certificate"] == str(export / "certificate" /
                                                                          f"release_id={len(states) + 1}.html")
        assert _metadata(run, "exported_release")["release_id"] == len(states) + 1
        states[request.partition_key] = source.read(spec)
        idle = tick(defs, instance, SENSOR, data.cursor)
        assert not idle.run_requests and "unchanged" in idle.skip_message  # published once
        _one_line(idle.skip_message)
        cursor = idle.cursor
    assert list(states) == ["000001", "000004"]  # the feed's positions: 2 to 4 are one release
    lost = tick(defs, instance, SENSOR, None)  # a sensor whose cursor was lost publishes no copy
    assert not lost.run_requests and "already exists" in lost.skip_message

    with duckdb.connect() as con:  # the export, read back by DuckDB alone, equals the published tables
        con.execute(f"ATTACH '{db}' AS store (READ_ONLY)")
        for name in ("release", "counterfeit", "manifest", "verdict", "domain"):
            columns = ", ".join(f'"{c}"' for c in con.sql(f"SELECT * FROM store.published.{name} LIMIT 0").columns)
            files = f"{export}/{name}/{'*/' if name != 'domain' else ''}*.parquet"
            back = f"SELECT {columns} FROM read_parquet('{files}', hive_partitioning = true)"
            kept = f"SELECT {columns} FROM store.published.{name}"
            (differ, exported, published), = con.sql(
                f"SELECT (SELECT count(*) FROM (({back} EXCEPT ALL {kept}) UNION ALL ({kept} EXCEPT ALL {back}))), "
                f"(SELECT count(*) FROM ({back})), (SELECT count(*) FROM ({kept}))").fetchall()
            assert differ == 0 and exported == published, name
        assert con.sql(f"SELECT release_id, count(*) FROM read_parquet('{export}/release/*/*.parquet', "
                       "hive_partitioning = true) GROUP BY ALL ORDER BY 1").fetchall() == [(1, 30), (2, 30)]
        sizes = [con.sql(f"SELECT count(DISTINCT n) FROM (SELECT count(*) AS n FROM read_parquet("
                         f"'{export}/release/release_id={j}/*.parquet') GROUP BY group_id)").fetchall()[0][0]
                 for j in (1, 2)]
        con.execute("DETACH store")

    store = ReleaseStore(db, spec)
    assert store.release_ids() == [1, 2]
    for release, state in enumerate(states.values(), start=1):
        staged = store.snapshot(release).sort_values("id", ignore_index=True)
        assert staged["id"].tolist() == state["id"].tolist()
        assert staged["visits"].tolist() == state["visits"].tolist()
    assert store.snapshot(2).set_index("id").loc["p003", "visits"] == states["000001"].set_index("id").loc[
        "p003", "visits"] + 100
    assert {"p004", "p010"} <= set(store.snapshot(1)["id"]) and not {"p004", "p010"} & set(store.snapshot(2)["id"])
    assert {"p501", "p502"} <= set(store.snapshot(2)["id"]) - set(store.snapshot(1)["id"])

    certificates = [export / "certificate" / f"release_id={j}.html" for j in (1, 2)]
    for j, shown in enumerate(render(*certificates), start=1):
        assert shown.errors == [], j
        assert len(shown.plots) == 4  # LM, NCP, query error over the history; the group sizes
        assert all(b is not None and b["width"] > 100 and b["height"] > 100 for b in shown.plots)
        assert len(shown.bars) == sizes[j - 1] and all(b is not None and b["height"] > 0 for b in shown.bars)
    html = certificates[1].read_text()
    assert "its history: releases 1 to 2" in html and not ID.search(html)


def _one_line(message: str) -> None:
    assert "\n" not in message and PASSWORD not in message and "wrong-pw" not in message and not ID.search(message)


def test_a_bad_connection_gives_one_line_and_the_sensor_requests_nothing(postgres_server, pg_schema, spec_path,
                                                                        instance, tmp_path):
    spec = load_spec(spec_path)
    table = _table(postgres_server, pg_schema, patients(20))
    port = postgres_server.rsplit(":", 1)[1].split("/")[0]
    for dsn, reason in (
        (postgres_server.replace(PASSWORD, "wrong-pw"), "authentication failed"),
        (postgres_server.replace(f":{port}/", ":1/"), "no server accepts connections"),
        (postgres_server.rsplit("/", 1)[0] + "/nodb", "does not exist"),
    ):
        with pytest.raises(StoreError, match=reason) as refused:
            _source(dsn, table, pg_schema).fingerprint(spec)
        _one_line(str(refused.value))
        assert "127.0.0.1" in str(refused.value)
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb",
                               _source(postgres_server.replace(PASSWORD, "wrong-pw"), table, pg_schema))
    skipped = tick(defs, instance, SENSOR, None)
    assert not skipped.run_requests and "authentication failed" in skipped.skip_message
    _one_line(skipped.skip_message)


def test_a_missing_table_or_feed_gives_one_line(postgres_server, pg_schema, spec_path):
    spec = load_spec(spec_path)
    missing = _source(postgres_server, f"{pg_schema}.nobody", pg_schema)
    for call in (missing.install_change_feed, lambda: missing.read(spec), lambda: missing.fingerprint(spec)):
        with pytest.raises(StoreError, match=f"source {pg_schema}.nobody .*: no such table") as refused:
            call()
        _one_line(str(refused.value))
    unfed = _source(postgres_server, _table(postgres_server, pg_schema, patients(5)), pg_schema)
    with pytest.raises(StoreError, match="no change feed; install it once"):
        unfed.fingerprint(spec)
    with pytest.raises(StoreError, match="is not a table name"):
        _source(postgres_server, "people; DROP TABLE x", pg_schema).fingerprint(spec)


def test_a_column_of_the_wrong_type_is_refused_in_one_line_and_publishes_nothing(postgres_server, pg_schema,
                                                                                 spec_path, instance, tmp_path):
    spec = load_spec(spec_path)
    rows = patients(30)
    table = _table(postgres_server, pg_schema, rows.assign(age=[f"age{a}" for a in rows["age"]]))
    source = _source(postgres_server, table, pg_schema)
    with pytest.raises(SnapshotError, match="column 'age' is of type text; .* needs a number type") as refused:
        source.read(spec)
    assert "age3" not in str(refused.value) and "age4" not in str(refused.value)
    _one_line(str(refused.value))
    source.install_change_feed()
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", source)
    data = tick(defs, instance, SENSOR, None)
    (request,) = data.run_requests
    run = defs.resolve_job_def(JOB).execute_in_process(
        partition_key=request.partition_key, tags=request.tags, instance=instance, raise_on_error=False
    )
    assert not run.success
    (failure,) = [e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "column 'age' is of type text" in message and "age3" not in message
    store = tmp_path / "releases.duckdb"
    assert not store.exists() or ReleaseStore(store, spec).release_ids() == []


def test_the_cli_installs_the_feed_once(postgres_server, pg_schema, spec_path):
    from typer.testing import CliRunner

    from dagster_privrelease import cli

    table = _table(postgres_server, pg_schema, patients(8))
    args = ["change-feed", "--table", table, "--feed-schema", pg_schema]
    for _ in range(2):  # re-running changes nothing
        done = CliRunner().invoke(cli.app, args, env={"PRIVRELEASE_DSN": postgres_server})
        assert done.exit_code == 0 and "its position is 1" in done.output, done.output
    _sql(postgres_server, f"DELETE FROM {table} WHERE id = 'p001'")
    assert _source(postgres_server, table, pg_schema).fingerprint(load_spec(spec_path)).position == 2
    refused = CliRunner().invoke(cli.app, [*args, "--dsn", postgres_server.replace(PASSWORD, "wrong-pw")])
    assert refused.exit_code == 1 and "authentication failed" in refused.output
    _one_line(refused.output.strip())
