"""Where a protected table's rows come from: the ``Source`` protocol and one class per kind of source.

The snapshot asset reads a source, the source sensor fingerprints it and asks it the key of the next release
(``docs/sources.md``). The kinds:

- ``DuckDBTableSource``: a plain table (``source.people``). Its current rows are captured when a release's
  snapshot is materialised while the release is unpublished (re-materialising a refused partition re-captures
  the fixed table); once the release is published the store keeps that capture, so re-materialising its
  partition never replaces it. Keys count releases (``000001``, ``000002``, ...).
- ``DuckDBChangeLogSource``: a change log (``source.people_log``), one row per change ``(position, op, <id>,
  <columns>)`` with ``op`` in ``insert | update | delete`` (an update carries the row's new values). The
  partition key of a release is the log position its snapshot reflects, so any snapshot is rebuilt exactly.
- ``FrameSource``: an in-memory frame (``run_release``, the CLI), captured like a plain table.
- In modules of their own: ``PostgresTableSource`` (``postgres_source``), a PostgreSQL table replayed from the
  change feed the tool installs, keyed by the feed's commit position; ``LandingZoneSource`` (``landing_zone``), a
  folder of Parquet/CSV snapshot and changes files, captured like a plain table.

A new kind is one class with the four members of ``Source``; ``release_definitions``
takes any of them. The YAML component configures a source through its ``source:`` block, one
``component.SourceKind`` per kind, told apart by the block's ``kind`` key (``component.SourceBlock``). The kinds
Dagster configures are ``ConfigurableResource``s whose fields carry descriptions.
A DuckDB source file is opened read-only and briefly, so the process that writes the table keeps writing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import dagster as dg
import duckdb
import pandas as pd
from pydantic import Field

from ..core.spec import Spec
from ..errors import SnapshotError, StoreError
from ..storage import frame_digest, open_duckdb, quote
from .partitions import partition_key

#: A table name the sources accept: an SQL identifier, optionally schema-qualified (``schema.table``); nothing
#: to quote, so a name is never a way into the SQL they build.
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass(frozen=True)
class Fingerprint:
    """What the source sensor compares between ticks: row count, a hash of ids and values, the log position."""

    rows: int
    digest: str
    position: int | None = None

    def as_cursor(self) -> dict:
        """The fingerprint as the sensor's JSON cursor."""
        return {"rows": self.rows, "digest": self.digest, "position": self.position}


class Source(Protocol):
    """What the snapshot asset and the source sensor need of a source: a protocol, so any class with these four
    members is a source (``release_definitions``'s ``source``).

    A member raises StoreError when the source cannot be reached (the sensor skips the tick with its message) and
    SnapshotError when its rows do not fit the spec.

    Example:
        ```python
        import pandas as pd
        from dagster_privrelease import Fingerprint, Spec
        from dagster_privrelease.orchestration.partitions import partition_key


        class CsvFileSource:  # the current rows of one CSV file
            replays = False  # a snapshot is captured once, not rebuilt

            def __init__(self, path: str) -> None:
                self.path = path

            def fingerprint(self, spec: Spec) -> Fingerprint:
                rows = self.read(spec)
                return Fingerprint(rows=len(rows), digest=str(pd.util.hash_pandas_object(rows).sum()))

            def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
                return pd.read_csv(self.path, dtype=str)[list(spec.columns)]

            def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
                return partition_key(max((int(k) for k in keys), default=0) + 1)
        ```
    """

    @property
    def replays(self) -> bool:
        """True when any snapshot can be rebuilt exactly from the source (a change log): the snapshot asset then
        compares a published snapshot with its replay. False when a snapshot is captured from the current rows
        and kept once published."""
        ...

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """A cheap summary of the rows that changes whenever a row of ``spec.columns`` is inserted, deleted or
        updated."""
        ...

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The rows with ``spec.columns`` as of partition key ``position`` (used by sources that replay; the
        others return their current rows)."""
        ...

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """The partition key of the next release, given the existing ``keys`` and the current ``fingerprint``."""
        ...


def _after(keys: list[str]) -> str:
    """One past the highest key: the next key of a source that is captured rather than replayed."""
    return partition_key(max((int(k) for k in keys), default=0) + 1)


class _DuckDBSource(dg.ConfigurableResource):
    """A table in a DuckDB file, opened read-only for each call (the base of the DuckDB kinds)."""

    database: str = Field(description="Path of the DuckDB file holding the source table.")
    table: str
    retries: int = Field(
        default=5, description="How many times a source file locked by its writer is retried before giving up."
    )
    backoff: float = Field(
        default=0.2, description="Seconds before the first retry of a locked source file; doubled at each retry."
    )

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """A read-only connection (``storage.open_duckdb``); StoreError for a bad table name, a missing file, or
        a file still locked by its writer after the retries (naming the process that holds it)."""
        if not TABLE_NAME.match(self.table):
            raise StoreError(f"source: {self.table!r} is not a table name of the form schema.table")
        return open_duckdb(self.database, read_only=True, retries=self.retries, backoff=self.backoff,
                           what="source database")

    def _checked(self, con: duckdb.DuckDBPyConnection, spec: Spec) -> str:
        """The quoted ``spec.columns`` for a SELECT; SnapshotError naming the ones the table lacks (schema drift)."""
        present = set(con.execute(f"SELECT * FROM {self.table} LIMIT 0").df().columns)
        missing = [c for c in spec.columns if c not in present]
        if missing:
            raise SnapshotError(
                f"source {self.table}: column(s) {missing} named in spec {spec.name!r} are missing (schema drift); "
                f"the source has {sorted(present)}"
            )
        return ", ".join(quote(c) for c in spec.columns)


class DuckDBTableSource(_DuckDBSource):
    """A plain DuckDB table, one row per individual: captured when an unpublished release's snapshot is
    materialised."""

    table: str = Field(description="The source table, e.g. 'source.people': one row per individual.")

    @property
    def replays(self) -> bool:
        """False: the table holds only today's rows, so a snapshot is captured and kept once published."""
        return False

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """Rows and an order-independent hash of every row's id and values (one DuckDB scan)."""
        columns = ", ".join(quote(c) for c in spec.columns)
        with self._connect() as con:
            ((rows, digest),) = con.execute(
                f"SELECT count(*), coalesce(sum(hash({columns}))::VARCHAR, '0') FROM {self.table}"
            ).fetchall()
        return Fingerprint(int(rows), digest)

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The table's current rows with ``spec.columns``, by id (``position`` is not used)."""
        with self._connect() as con:
            columns = self._checked(con, spec)
            return con.execute(f"SELECT {columns} FROM {self.table} ORDER BY {quote(spec.id)}").df()

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """One past the highest existing key."""
        return _after(keys)


class DuckDBChangeLogSource(_DuckDBSource):
    """A DuckDB change log ``(position, op, <id>, <columns>)``: a release's key is the log position its snapshot
    reflects, and its snapshot is the log replayed up to that position."""

    table: str = Field(
        description="The change-log table, e.g. 'source.people_log': one row per change (position, op, <id>, "
        "<columns>), op in insert | update | delete, an update carrying the row's new values."
    )

    @property
    def replays(self) -> bool:
        """True: any snapshot is rebuilt exactly from the log."""
        return True

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """The log's row count and highest position (the log only grows)."""
        with self._connect() as con:
            ((rows, top),) = con.execute(f"SELECT count(*), coalesce(max(position), 0) FROM {self.table}").fetchall()
        return Fingerprint(int(rows), str(top), int(top))

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The rows alive at log ``position`` with their latest values, by id; StoreError without a position."""
        if position is None:
            raise StoreError(f"source {self.table}: a change-log snapshot needs its log position")
        with self._connect() as con:
            columns = self._checked(con, spec)
            return con.execute(
                f"""
                SELECT {columns} FROM (
                    SELECT *, row_number() OVER (PARTITION BY {quote(spec.id)} ORDER BY position DESC) AS latest
                    FROM {self.table} WHERE position <= ?
                ) WHERE latest = 1 AND op <> 'delete' ORDER BY {quote(spec.id)}
                """,
                [position],
            ).df()

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """The log's highest position."""
        return partition_key(fingerprint.position or 0)


class FrameSource:
    """A snapshot given as a data frame (``run_release``, the CLI), captured like a plain table."""

    replays = False

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """Rows and a content hash of the frame's ``spec.columns``."""
        return Fingerprint(len(self.frame), frame_digest(self.read(spec)))

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The frame's ``spec.columns``; SnapshotError naming the missing ones."""
        missing = [c for c in spec.columns if c not in self.frame.columns]
        if missing:
            raise SnapshotError(f"snapshot is missing column(s) {missing} named in spec {spec.name!r}")
        return self.frame[spec.columns]

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """One past the highest existing key."""
        return _after(keys)
