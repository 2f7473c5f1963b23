"""Parquet exports of the published releases (``dagster_privrelease.export``), read back with DuckDB alone."""

from __future__ import annotations

import uuid
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.export import export_postgres, export_store
from dagster_privrelease.storage import ReleaseStore
from tests.storage.conftest import SPEC, publish, snapshot

#: Three releases: people come and go, text ids (zero-padded), counterfeits in release 2 only.
RELEASES = [[f"p{i:03d}" for i in ids] for ids in (range(0, 8), range(2, 12), range(4, 14))]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """The storage tests' clinic store with ``RELEASES`` published (release 2 with three counterfeits); the tests
    only read it."""
    store = ReleaseStore(tmp_path_factory.mktemp("store") / "clinic.duckdb", parse_spec(SPEC))
    with store.session():
        for j, ids in enumerate(RELEASES, start=1):
            rows = snapshot(range(len(ids)), seed=j).assign(pid=ids)
            publish(store, j, rows, fakes=3 if j == 2 else 0)
    return store.path


def published(db: Path, table: str) -> pd.DataFrame:
    """``published.<table>`` as stored, rows in a canonical order."""
    with duckdb.connect(str(db), read_only=True) as con:
        frame = con.sql(f"SELECT * FROM published.{table}").df()
    return canonical(frame)


def exported(to: Path, table: str) -> pd.DataFrame:
    """The export's ``table``, read by DuckDB alone (hive partitions give ``release_id`` back)."""
    with duckdb.connect() as con:
        frame = con.sql(f"SELECT * FROM read_parquet('{to}/{table}/**/*.parquet', hive_partitioning = true)").df()
    return canonical(frame)


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_index(axis=1)
    return frame.sort_values(list(frame.columns), ignore_index=True, key=lambda c: c.astype(str))


@pytest.mark.parametrize("table", ["release", "counterfeit", "manifest", "domain"])
def test_the_export_reads_back_as_the_published_tables(db, tmp_path, table):
    to = tmp_path / "export"
    assert export_store(db, to) == [1, 2, 3]
    back, stored = exported(to, table), published(db, table)
    assert len(back) == len(stored) > 0
    for column in stored.columns:  # values, column by column (the Parquet types of lists and timestamps differ)
        assert back[column].astype(str).tolist() == stored[column].astype(str).tolist(), column


def test_each_release_has_its_own_folder_and_one_without_counterfeits_an_empty_file(db, tmp_path):
    to = tmp_path / "export"
    export_store(db, to)
    assert sorted(p.name for p in (to / "counterfeit").iterdir()) == ["release_id=1", "release_id=2", "release_id=3"]
    with duckdb.connect() as con:
        counts = dict(con.sql(f"SELECT release_id, sum(count) FROM read_parquet('{to}/counterfeit/*/*.parquet', "
                              "hive_partitioning = true) GROUP BY ALL").fetchall())
        assert counts == {2: 3}
        assert con.sql(f"SELECT count(*) FROM '{to}/counterfeit/release_id=1/*.parquet'").fetchall() == [(0,)]


def test_exporting_again_replaces_and_never_duplicates(db, tmp_path):
    to = tmp_path / "export"
    export_store(db, to, [2])
    export_store(db, to)
    export_store(db, to, [2])
    files = sorted(p.relative_to(to).as_posix() for p in to.rglob("*") if p.is_file())
    assert files == sorted(["domain/data_0.parquet", *(f"{t}/release_id={j}/data_0.parquet"
                                                       for t in ("counterfeit", "manifest", "release", "verdict")
                                                       for j in (1, 2, 3))])
    assert len(exported(to, "release")) == len(published(db, "release"))
    assert not [p for p in to.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_pandas_reads_the_export_without_this_package(db, tmp_path):
    to = tmp_path / "export"
    export_store(db, to, [1, 3])
    frame = pd.read_parquet(to / "release")
    assert sorted(frame["release_id"].astype(int).unique()) == [1, 3]
    assert len(frame) == len(published(db, "release").query("release_id != 2"))


def test_nothing_private_is_exported(db, tmp_path):
    to = tmp_path / "export"
    export_store(db, to)
    with duckdb.connect(str(db), read_only=True) as con:
        ids = {r for (r,) in con.sql("SELECT DISTINCT pid FROM private.snapshot").fetchall()}
    with duckdb.connect() as con:
        for path in to.rglob("*.parquet"):
            frame = con.sql(f"SELECT * FROM '{path}'").df()
            assert "pid" not in frame.columns, path
            cells = {str(v) for v in frame.to_numpy().ravel()}
            assert not ids & cells, path


def test_an_unpublished_release_is_refused_and_nothing_is_written(db, tmp_path):
    to = tmp_path / "export"
    with pytest.raises(StoreError, match=r"release\(s\) \[4\] are not published, so not exported \(published: 1\.\.3\)"):
        export_store(db, to, [3, 4])
    assert not to.exists()


def test_a_file_as_the_target_is_refused(db, tmp_path):
    to = tmp_path / "export"
    to.write_text("")
    with pytest.raises(StoreError, match="a file, not a folder"):
        export_store(db, to)


def test_the_command_exports_and_refuses_in_one_line(db, tmp_path):
    to = tmp_path / "export"
    runner = CliRunner()
    done = runner.invoke(cli.app, ["export", "--db", str(db), "--to", str(to), "--release", "1", "--release", "3"])
    assert done.exit_code == 0, done.output
    assert f"exported release(s) 1, 3 of {db} to {to}" in done.output.replace("\n", "")
    assert sorted(p.name for p in (to / "release").iterdir()) == ["release_id=1", "release_id=3"]
    refused = runner.invoke(cli.app, ["export", "--db", str(db), "--to", str(to), "--release", "9"])
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        "error: release(s) [9] are not published, so not exported (published: 1..3)"]


def rows_of(table: pa.Table) -> list[list[tuple[str, str]]]:
    """An Arrow table's rows as sorted lists of (column, value as text), in a canonical order."""
    return sorted(sorted((k, str(v)) for k, v in row.items()) for row in table.to_pylist())


@pytest.fixture
def postgres_uri(request) -> str:
    """The session's PostgreSQL server, from the fixture the PostgreSQL tests provide (``postgres_dsn`` or
    ``postgres_server``); the test is skipped, saying so, in a checkout without one."""
    for name in ("postgres_dsn", "postgres_server"):
        try:
            return request.getfixturevalue(name)
        except pytest.FixtureLookupError:
            continue
    pytest.skip("no PostgreSQL server fixture (postgres_dsn / postgres_server of tests/conftest.py) here")


def test_the_postgres_export_reads_back_as_the_published_tables_and_replaces_on_repeat(db, postgres_uri):
    from adbc_driver_postgresql import dbapi

    schema = f"export_{uuid.uuid4().hex[:8]}"
    assert export_postgres(db, postgres_uri, schema, [2]) == [2]
    assert export_postgres(db, postgres_uri, schema) == [1, 2, 3]
    export_postgres(db, postgres_uri, schema, [2])
    with dbapi.connect(postgres_uri) as pg, pg.cursor() as cur:
        for table in ("release", "counterfeit", "manifest", "domain"):
            cur.execute(f"SELECT * FROM {schema}.{table}")
            back = rows_of(cur.fetch_arrow_table())
            with duckdb.connect(str(db), read_only=True) as con:
                stored = rows_of(con.sql(f"SELECT * FROM published.{table}").to_arrow_table())
            assert back == stored and len(stored) > 0, table
    done = CliRunner().invoke(cli.app, ["export", "--db", str(db), "--release", "3", "--schema", schema],
                              env={"PRIVRELEASE_POSTGRES": postgres_uri})
    assert done.exit_code == 0 and f"exported release(s) 3 of {db} to PostgreSQL schema {schema}" in done.output
    with dbapi.connect(postgres_uri) as pg, pg.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {schema}.release")
        assert cur.fetchone() == (len(published(db, "release")),)  # release 3 replaced, not added again
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
        pg.commit()
    with pytest.raises(StoreError, match=r"^PostgreSQL schema 'x': the export was refused \(\w+"):
        export_postgres(db, "postgresql://nobody:wrong@127.0.0.1:1/none", "x")
