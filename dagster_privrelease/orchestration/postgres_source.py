"""A PostgreSQL table as a source, with a change feed the tool installs in the same database.

``PostgresTableSource`` reads rows column-wise into Arrow through ADBC's PostgreSQL driver
(``adbc-driver-postgresql``, the ``postgres`` extra): the driver runs ``COPY ... TO STDOUT (FORMAT binary)`` and
decodes it in C straight into Arrow columns, so no row passes through Python. psycopg 3's ``cursor.copy`` would
hand each row of the same COPY stream to Python (``read_row``) or leave its binary format to be parsed by hand.

The change feed is a change-log table filled by triggers (``install_change_feed``), not logical decoding:

- triggers work on any PostgreSQL (11+) with no server configuration, while logical decoding needs
  ``wal_level=logical``, a replication privilege and a slot that holds WAL on the server for as long as the
  sensor is stopped;
- a trigger writes its log entries in the writer's own transaction, so a rolled-back change is never logged and
  a committed one always is;
- the log's cursor is a commit sequence: each committing transaction that changed the table is stamped, at
  commit, with the next position (a deferred constraint trigger under a transaction-scoped advisory lock, so
  positions follow commit order and a position is visible only once every smaller one is). A release's partition
  key is such a position and its snapshot is the log replayed up to it (as ``DuckDBChangeLogSource``): any
  snapshot is rebuilt exactly, and a change published by the sensor is published once.

The feed lives in the schema ``feed_schema`` (``privrelease`` by default) of the source's database: a table of
changes ``(seq, txid, op, row jsonb)``, one entry per inserted, deleted (``op = 'delete'``, the old row) or updated
row (its old row as a delete, then its new row), and a table of commits ``(txid, position, total)``, ``total``
the number of changes logged up to that commit. Rows are kept as
``jsonb`` and read back with the table's current types (``jsonb_populate_record``), so a column added to the
table later does not break its writers. Installing seeds the log with the table's current rows, as position 1.
The log holds the rows it copies: it is as private as the table, in the same database.

Costs: a write to the table also writes its rows to the log (twice for an update); a fingerprint reads the last
commit through an index; a snapshot replays the log in PostgreSQL (one sort of the log up to its position) and moves only
the live rows. The log is never compacted here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import dagster as dg
import pandas as pd
from pydantic import Field

from ..core.spec import Spec
from ..errors import SnapshotError, StoreError
from ..storage import quote
from .partitions import partition_key
from .sources import TABLE_NAME, Fingerprint

if TYPE_CHECKING:
    from adbc_driver_manager.dbapi import Cursor

#: SQLSTATE codes of PostgreSQL's errors, as the words that replace its messages (which may quote values).
_SQLSTATES = {
    "42P01": "a table it reads does not exist",
    "42703": "a column it reads does not exist",
    "42501": "permission denied",
    "22P02": "a stored value does not fit the column's current type",
    "40P01": "deadlock",
    "57014": "the query was cancelled",
}

#: libpq's phrases for a failed connection (matched, never quoted), and the reason each one stands for.
_CONNECT = [
    ("password authentication failed", "authentication failed for the user the dsn names"),
    ("does not exist", "the database or the user the dsn names does not exist"),
    ("connection refused", "no server accepts connections there"),
    ("timeout", "the server did not answer in time"),
    ("could not translate host name", "the host name is unknown"),
]


class PostgresTableSource(dg.ConfigurableResource):
    """A PostgreSQL table, one row per individual, replayed from its change feed: a release's key is the feed's
    commit position its snapshot reflects (``install_change_feed`` lays the feed once).

    Example:
        ```python
        # once: `privrelease change-feed --table public.patients`, the DSN in $PRIVRELEASE_DSN
        # (or PostgresTableSource(dsn=..., table=...).install_change_feed())
        source = PostgresTableSource(dsn=dg.EnvVar("PRIVRELEASE_DSN"), table="public.patients")
        defs = release_definitions("patients.yaml", "patients.duckdb", source)  # the UI shows no DSN
        ```
    """

    dsn: str = Field(
        description="libpq connection string or URI of the database holding the table (never shown in messages; "
        "give it as an EnvVar so the UI does not show it either)."
    )
    table: str = Field(description="The source table, 'schema.table' or 'table': one row per individual.")
    feed_schema: str = Field(
        default="privrelease", description="The schema of the change feed's log and commit tables in that database."
    )

    @property
    def replays(self) -> bool:
        """True: any snapshot is rebuilt exactly from the change feed."""
        return True

    def install_change_feed(self) -> int:
        """Lay the change feed on the table, in one transaction: the feed's schema, log and commit tables, the
        triggers that log every insert, update, delete and truncate, and the table's current rows logged as
        position 1 (none when it is empty). The table is locked against writes meanwhile, so no change falls
        between the seed and the triggers. Idempotent: a feed already there is left as it is.

        Returns:
            The feed's current position (0 while nothing is logged).

        Raises:
            StoreError: the database cannot be reached, the table does not exist, or the user may not create
                the schema, tables or triggers; nothing is installed then.
        """
        src, changes, commits = self._names()
        with self._cursor() as cur:
            self._require_table(cur)
            if not self._installed(cur):
                for statement in _feed_ddl(src, changes, commits, self._object("stamp"), self._object("log"),
                                           quote(self.feed_schema)):
                    cur.execute(statement)
            cur.connection.commit()
            return self._position(cur)[1]

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """The number of logged changes and the feed's position, read in one statement (the log only grows)."""
        with self._cursor() as cur:
            self._require_table(cur)
            self._require_feed(cur)
            rows, top = self._position(cur)
        return Fingerprint(rows, str(top), top)

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The rows with ``spec.columns`` ordered by id: alive at feed ``position`` with their values then, or the
        table's current rows when ``position`` is None. Numbers of type ``numeric`` are read as float64.

        Raises:
            StoreError: the database cannot be reached, the table or (with a position) its feed is missing.
            SnapshotError: a column of the spec is missing, or is not of a type its role takes (a numeric
                quasi-identifier needs a number type; json, arrays and bytes are refused).
        """
        with self._cursor() as cur:
            types = self._require_table(cur)
            columns = ", ".join(_column(c, types[c]) for c in _checked(self.table, types, spec))
            src, changes, commits = self._names()
            if position is None:
                cur.execute(f"SELECT {columns} FROM {src} r ORDER BY r.{quote(spec.id)}")
            else:
                self._require_feed(cur)
                key = f"c.row -> {_literal(spec.id)}"
                cur.execute(f"""
                    SELECT {columns} FROM (
                        SELECT DISTINCT ON ({key}) c.op, c.row
                        FROM {changes} c JOIN {commits} k USING (txid)
                        WHERE k.position <= {int(position)}
                        ORDER BY {key}, k.position DESC, c.seq DESC
                    ) latest, LATERAL jsonb_populate_record(NULL::{src}, latest.row) r
                    WHERE latest.op <> 'delete' ORDER BY r.{quote(spec.id)}
                """)
            return cur.fetch_arrow_table().to_pandas()

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """The feed's position."""
        return partition_key(fingerprint.position or 0)

    def _names(self) -> tuple[str, str, str]:
        """The quoted source table, log table and commit table."""
        return ".".join(quote(p) for p in self.table.split(".")), self._object("changes"), self._object("commits")

    def _object(self, kind: str) -> str:
        """The quoted name of the feed's ``kind`` object for this table, in the feed schema."""
        return f"{quote(self.feed_schema)}.{quote(self.table.replace('.', '__') + '__' + kind)}"

    @contextmanager
    def _cursor(self) -> Iterator[Cursor]:
        """A cursor on a new connection, closed on leaving; every driver error re-worded as a StoreError from
        names and SQLSTATE codes (``_reason``), never from the server's text, which may quote values."""
        if not TABLE_NAME.match(self.table) or not TABLE_NAME.match(self.feed_schema):
            raise StoreError(f"source: {self.table!r} is not a table name of the form schema.table")
        try:
            from adbc_driver_manager import Error
            from adbc_driver_postgresql import dbapi
        except ImportError as exc:
            raise StoreError("source: a PostgreSQL source needs the postgres extra "
                             "(pip install 'dagster-privrelease[postgres]')") from exc
        try:
            with dbapi.connect(self.dsn) as con, con.cursor() as cur:
                yield cur
        except Error as exc:
            raise StoreError(f"source {self.table} ({_where(self.dsn)}): {_reason(exc)}") from None

    def _require_table(self, cur: Cursor) -> dict[str, tuple[str, str]]:
        """The table's columns, each with its type name and PostgreSQL type category; StoreError when the
        table does not exist (or the user may not see it)."""
        cur.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typcategory "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            parameters=(self._names()[0],),
        )
        types = {name: (kind, category) for name, kind, category in cur.fetchall()}
        if not types:
            raise StoreError(f"source {self.table} ({_where(self.dsn)}): no such table")
        return types

    def _installed(self, cur: Cursor) -> bool:
        """Whether the feed's commit table exists (the feed is laid in one transaction, so all of it does)."""
        cur.execute("SELECT to_regclass($1) IS NOT NULL", parameters=(self._object("commits"),))
        ((installed,),) = cur.fetchall()
        return bool(installed)

    def _require_feed(self, cur: Cursor) -> None:
        """StoreError naming how to install the feed when it is not there."""
        if not self._installed(cur):
            raise StoreError(f"source {self.table} ({_where(self.dsn)}): no change feed; install it once with "
                             "`privrelease change-feed` or PostgresTableSource.install_change_feed()")

    def _position(self, cur: Cursor) -> tuple[int, int]:
        """The number of logged changes and the highest commit position: the last commit's row, found through
        the index on positions (each commit records the running total of changes)."""
        cur.execute(f"SELECT coalesce(max(total), 0), coalesce(max(position), 0) FROM (SELECT total, position "
                    f"FROM {self._object('commits')} WHERE position IS NOT NULL ORDER BY position DESC LIMIT 1) top")
        ((rows, top),) = cur.fetchall()
        return int(rows), int(top)


def _feed_ddl(src: str, changes: str, commits: str, stamp: str, log: str, schema: str) -> list[str]:
    """The statements that lay the change feed of table ``src`` (all names quoted), its seed last."""
    record = """
        GET DIAGNOSTICS logged = ROW_COUNT;
        IF logged > 0 THEN INSERT INTO {commits} DEFAULT VALUES ON CONFLICT (txid) DO NOTHING; END IF;"""
    record = record.format(commits=commits)
    return [
        f"CREATE SCHEMA IF NOT EXISTS {schema}",
        f"LOCK TABLE {src} IN SHARE ROW EXCLUSIVE MODE",
        f"CREATE TABLE {commits} (txid xid8 PRIMARY KEY DEFAULT pg_current_xact_id(), position bigint UNIQUE, "
        f"total bigint)",
        f"CREATE TABLE {changes} (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        f"txid xid8 NOT NULL DEFAULT pg_current_xact_id(), op text NOT NULL, row jsonb NOT NULL)",
        f"CREATE INDEX ON {changes} (txid)",
        # at commit, under a lock held until the commit is visible: positions follow commit order
        f"""CREATE FUNCTION {stamp}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({_literal(commits)}::regclass::oid::bigint);
            WITH top AS (SELECT position, total FROM {commits} WHERE position IS NOT NULL
                         ORDER BY position DESC LIMIT 1)
            UPDATE {commits} SET position = coalesce((SELECT position FROM top), 0) + 1,
                total = coalesce((SELECT total FROM top), 0) + (SELECT count(*) FROM {changes} WHERE txid = NEW.txid)
            WHERE txid = NEW.txid;
            RETURN NULL;
        END $$""",
        f"CREATE CONSTRAINT TRIGGER privrelease_stamp AFTER INSERT ON {commits} DEFERRABLE INITIALLY DEFERRED "
        f"FOR EACH ROW EXECUTE FUNCTION {stamp}()",
        f"""CREATE FUNCTION {log}() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE logged bigint;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {changes} (op, row) SELECT 'insert', to_jsonb(n) FROM new_rows n;
            ELSIF TG_OP = 'UPDATE' THEN
                INSERT INTO {changes} (op, row) SELECT 'delete', to_jsonb(o) FROM old_rows o;
                INSERT INTO {changes} (op, row) SELECT 'update', to_jsonb(n) FROM new_rows n;
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO {changes} (op, row) SELECT 'delete', to_jsonb(o) FROM old_rows o;
            ELSE
                INSERT INTO {changes} (op, row) SELECT 'delete', to_jsonb(t) FROM {src} t;
            END IF;{record}
            RETURN NULL;
        END $$""",
        f"CREATE TRIGGER privrelease_insert AFTER INSERT ON {src} REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {log}()",
        f"CREATE TRIGGER privrelease_update AFTER UPDATE ON {src} REFERENCING OLD TABLE AS old_rows "
        f"NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {log}()",
        f"CREATE TRIGGER privrelease_delete AFTER DELETE ON {src} REFERENCING OLD TABLE AS old_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {log}()",
        f"CREATE TRIGGER privrelease_truncate BEFORE TRUNCATE ON {src} FOR EACH STATEMENT EXECUTE FUNCTION {log}()",
        f"""DO $$ DECLARE logged bigint; BEGIN
            INSERT INTO {changes} (op, row) SELECT 'insert', to_jsonb(t) FROM {src} t;{record}
        END $$""",
    ]


#: PostgreSQL type categories (``pg_type.typcategory``) no column of a spec takes: arrays, composites, json
#: and other user-defined kinds, bytes, geometry, network addresses, ranges.
_REFUSED = {"A": "an array", "C": "a composite", "U": "a user-defined or json", "G": "a geometric", "I": "a network",
            "R": "a range"}


def _checked(table: str, types: dict[str, tuple[str, str]], spec: Spec) -> list[str]:
    """``spec.columns``; SnapshotError naming the first column that is missing or of a type its role refuses."""
    missing = [c for c in spec.columns if c not in types]
    if missing:
        raise SnapshotError(f"source {table}: column(s) {missing} named in spec {spec.name!r} are missing (schema "
                            f"drift); the source has {sorted(types)}")
    for column in spec.columns:
        kind, category = types[column]
        numeric = column in spec.quasi_identifiers and spec.quasi_identifiers[column].numeric
        if (numeric and category != "N") or category in _REFUSED or kind == "bytea":
            need = "a number type (integer, numeric, real, double precision)" if numeric else "a scalar type"
            raise SnapshotError(f"source {table}: column {column!r} is of type {kind}; spec {spec.name!r} needs "
                                f"{need} there")
    return list(spec.columns)


def _column(name: str, type_: tuple[str, str]) -> str:
    """The select item of column ``name`` of the row alias ``r``: ``numeric`` cast to float64 (the driver hands
    ``numeric`` over as text), any other type as it is."""
    item = f"r.{quote(name)}"
    return f"{item}::double precision AS {quote(name)}" if type_[0].startswith("numeric") else item


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _where(dsn: str) -> str:
    """Where ``dsn`` points, ``host:port/database``, from a URI or a libpq keyword string: never its user or
    password."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        host, port, database = parts.hostname, parts.port, parts.path.lstrip("/")
    else:
        pairs = dict(re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", dsn))
        host, port, database = pairs.get("host"), pairs.get("port"), pairs.get("dbname")
    return f"{host or 'localhost'}:{port or 5432}/{database or 'default database'}"


def _reason(exc: Any) -> str:
    """The reason of driver error ``exc`` in words of its own: by SQLSTATE, or for a connection that failed
    before any SQL by a libpq phrase it contains, else its error class."""
    code = getattr(exc, "sqlstate", None)
    if code in _SQLSTATES:
        return _SQLSTATES[code]
    text = str(exc).lower()
    if "failed to connect" in text:
        reason = next((words for phrase, words in _CONNECT if phrase in text), "the connection failed")
        return f"cannot connect: {reason}"
    return f"PostgreSQL refused the query ({type(exc).__name__}{f', SQLSTATE {code}' if code else ''})"
