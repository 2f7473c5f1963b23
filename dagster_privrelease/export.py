"""Published releases exported as Parquet, where consumers read, without this package.

``export_releases(con, to, release_ids)`` writes, from the ``published`` schema alone (never ``private``):

```
<to>/release/release_id=<j>/data_0.parquet       published.release rows of release j (counterfeits included)
<to>/counterfeit/release_id=<j>/data_0.parquet   R(j), the counterfeit counts per group (Xiao-Tao Def. 3)
<to>/manifest/release_id=<j>/data_0.parquet      release j's manifest row (params, checks, utility as JSON text)
<to>/verdict/release_id=<j>/data_0.parquet       the judge's verdicts on release j, with their counts
<to>/domain/data_0.parquet                       published.domain: the leaf order of each categorical attribute
```

The layout is hive-style, so DuckDB (``read_parquet('<to>/release/*/*.parquet', hive_partitioning = true)``),
pandas/pyarrow (``pd.read_parquet('<to>/release')``) and Spark read ``release_id`` back from the folder names.
A release with no counterfeit still gets its (empty) file, so every release has a folder in each. The domain
is one file for every release: ranks never move and the domain only grows (``storage.schema``), so the latest
domain reads every earlier release.

``export_postgres`` writes the same tables into a PostgreSQL schema instead (ADBC, the ``postgres`` extra).

Idempotent: each table is written by DuckDB's ``COPY ... (FORMAT parquet, PARTITION_BY (release_id))`` into a
staging folder under ``to``, then each release's folder replaces the one there (a rename per folder), so
exporting a release again replaces its files, never adds to them. Cost: one scan of each published table for
the releases asked for (DuckDB filters on ``release_id``), and the size of those releases written.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .errors import StoreError
from .storage.connection import open_duckdb, quote, table_exists, unreadable
from .storage.schema import ids_text, published_ids

#: The published tables exported one folder per release.
PER_RELEASE = ("release", "counterfeit", "manifest", "verdict")


def export_store(db: str | Path, to: str | Path, release_ids: Sequence[int] | None = None) -> list[int]:
    """``export_releases`` of the release store at ``db`` (opened read-only; a store this process holds open is
    read through that connection, ``open_duckdb``). StoreError naming ``db`` when it is not a release store, and
    re-worded from names when DuckDB fails (``storage.unreadable``), never DuckDB's own text."""
    con = open_duckdb(Path(db), read_only=True)
    try:
        if not table_exists(con, "published", "manifest"):
            raise StoreError(f"{db}: not a release store (no published.manifest table)")
        return export_releases(con, to, release_ids)
    except duckdb.Error as exc:
        raise StoreError(unreadable(db, "release store", exc)) from exc
    finally:
        con.close()


def export_releases(con: duckdb.DuckDBPyConnection, to: str | Path, release_ids: Sequence[int] | None = None
                    ) -> list[int]:
    """Write the published releases ``release_ids`` (None: every one) of the store open on ``con`` under ``to``,
    as the module says; return the ids written, ascending.

    Raises:
        StoreError: ``to`` is a file; or a release asked for is not published (naming it and the published ids),
            and then nothing is written.
    """
    wanted = _published(con, release_ids)
    target = Path(to)
    if target.exists() and not target.is_dir():
        raise StoreError(f"{target}: a file, not a folder; --to names the folder the export is written to")
    if not wanted:
        return []
    try:
        _write(con, target, wanted)
    except (OSError, duckdb.IOException) as exc:
        raise StoreError(f"{target}: cannot write the export there ({type(exc).__name__}: no permission, no space "
                         "left, or not a folder); nothing of it was replaced") from exc
    return wanted


def _write(con: duckdb.DuckDBPyConnection, target: Path, wanted: list[int]) -> None:
    """``export_releases``' writing of releases ``wanted`` under ``target``."""
    with _staging(target) as staging:
        ids = ", ".join(str(int(j)) for j in wanted)
        for table in PER_RELEASE:
            _copy(con, f"SELECT * FROM published.{table} WHERE release_id IN ({ids})", staging / table,
                  partitioned=True)
            for j in wanted:  # a release with no row in this table gets an empty file of the table's columns
                folder = staging / table / f"release_id={j}"
                if not folder.exists():
                    folder.mkdir(parents=True)
                    _copy(con, f"SELECT * EXCLUDE (release_id) FROM published.{table} LIMIT 0",
                          folder / "data_0.parquet")
        _copy(con, "SELECT * FROM published.domain ORDER BY attribute, rank", staging / "domain" / "data_0.parquet")
        for table in PER_RELEASE:
            for j in wanted:
                _replace(staging / table / f"release_id={j}", target / table / f"release_id={j}")
        _replace(staging / "domain", target / "domain")


def export_postgres(db: str | Path, uri: str, schema: str, release_ids: Sequence[int] | None = None) -> list[int]:
    """Write the published releases ``release_ids`` (None: every one) of the store at ``db`` into the PostgreSQL
    schema ``schema`` (created if missing) of the database at ``uri``: tables ``release``, ``counterfeit``,
    ``manifest``, ``verdict`` with their ``release_id`` column, and ``domain``, as in ``published``, the lists of
    the manifest's ``attributes`` as text arrays. Return the ids written, ascending.

    Read column-wise from DuckDB into Arrow and written by ADBC's PostgreSQL driver (``adbc_ingest``: COPY, never
    row by row), in one transaction: the rows of those releases (and the domain) are deleted, then written, so
    exporting again replaces them, never duplicates them, and a failure leaves the schema as it was.

    Raises:
        StoreError: the driver is not installed; a release asked for is not published; or PostgreSQL refused (naming the schema and the
            driver's error class, never its text nor ``uri``, which may hold a password).
    """
    try:
        from adbc_driver_postgresql import dbapi  # the postgres extra
    except ImportError as exc:
        raise StoreError("the PostgreSQL export needs ADBC's PostgreSQL driver: install the postgres extra "
                         "(pip install 'dagster-privrelease[postgres]')") from exc

    con = open_duckdb(Path(db), read_only=True)
    try:
        if not table_exists(con, "published", "manifest"):
            raise StoreError(f"{db}: not a release store (no published.manifest table)")
        wanted = _published(con, release_ids)
        ids = ", ".join(str(int(j)) for j in wanted) or "NULL"
        tables = {t: con.sql(f"SELECT * FROM published.{t} WHERE release_id IN ({ids})").to_arrow_table()
                  for t in PER_RELEASE}
        tables["domain"] = con.sql("SELECT * FROM published.domain ORDER BY attribute, rank").to_arrow_table()
    except duckdb.Error as exc:
        raise StoreError(unreadable(db, "release store", exc)) from exc
    finally:
        con.close()
    name = quote(schema)
    try:
        with dbapi.connect(uri) as pg, pg.cursor() as cur:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
            for table, rows in tables.items():
                cur.execute(f"SELECT to_regclass('{name}.{quote(table)}') IS NOT NULL")
                exists = cur.fetchone()
                if exists and exists[0]:
                    where = "" if table == "domain" else f" WHERE release_id IN ({ids})"
                    cur.execute(f"DELETE FROM {name}.{quote(table)}{where}")
                if rows.num_rows or not (exists and exists[0]):
                    cur.adbc_ingest(table, rows, mode="create_append", db_schema_name=schema)
            pg.commit()
    except dbapi.Error as exc:
        raise StoreError(f"PostgreSQL schema {schema!r}: the export was refused ({type(exc).__name__}: a bad "
                         "connection, a missing permission, or a table of that name with other columns); nothing "
                         "was written") from None
    return wanted


def _copy(con: duckdb.DuckDBPyConnection, query: str, path: Path, partitioned: bool = False) -> None:
    """DuckDB's ``COPY (query) TO path (FORMAT parquet)``, hive-partitioned by ``release_id`` when
    ``partitioned``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    literal = "'" + str(path).replace("'", "''") + "'"
    options = "FORMAT parquet" + (", PARTITION_BY (release_id)" if partitioned else "")
    con.execute(f"COPY ({query}) TO {literal} ({options})")


def _replace(new: Path, old: Path) -> None:
    """Put the folder ``new`` where ``old`` is: ``old`` moved aside, ``new`` renamed in, ``old`` removed (renames
    within one folder tree, so a reader sees the old files or the new ones, and at most for an instant none)."""
    old.parent.mkdir(parents=True, exist_ok=True)
    aside = old.with_name(f".{old.name}.{uuid.uuid4().hex}")
    if old.exists():
        old.rename(aside)
    new.rename(old)
    shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A fresh hidden folder under ``target`` (so renames out of it stay on one file system), removed on exit."""
    staging = target / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _published(con: duckdb.DuckDBPyConnection, release_ids: Sequence[int] | None) -> list[int]:
    """``release_ids`` (None: every published release) ascending; StoreError naming those not published (and the
    published ids) when any is not."""
    published = published_ids(con)
    wanted = sorted(set(published if release_ids is None else release_ids))
    missing = [j for j in wanted if j not in published]
    if missing:
        raise StoreError(f"release(s) {missing} are not published, so not exported (published: "
                         f"{ids_text(published)})")
    return wanted
