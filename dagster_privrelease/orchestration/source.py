"""The protected table as the organisation keeps it: a DuckDB table, optionally with a change log.

Two kinds of source (DESIGN.md, "Dagster"):

- a plain table (``source.people``): its current rows are captured when a release's snapshot is first
  materialised; the store keeps that capture, so re-materialising an old partition never replaces it;
- a change log (``source.people_log``): one row per change ``(position, op, <id>, <columns>)`` with ``op`` in
  ``insert | update | delete`` (an update carries the row's new values). The partition key of a release is
  the log position its snapshot reflects, so any snapshot can be rebuilt exactly from the log.

The source file is opened read-only and briefly, so the process that writes the table keeps writing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
from pydantic import Field

from ..core.spec import Spec
from ..errors import SnapshotError, StoreError
from ..storage import quote

#: Width of a partition key: keys are zero-padded so that they sort in release order.
KEY_WIDTH = 6
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def partition_key(position: int) -> str:
    """The partition key of a release id or log position: zero-padded, so keys sort as numbers do."""
    if position < 1:
        raise StoreError(f"partition key: a release id or log position is at least 1, got {position}")
    return f"{position:0{KEY_WIDTH}d}"


def predecessor(keys: list[str], key: str) -> str | None:
    """The partition key released just before ``key`` (keys sort in release order), or None for the first."""
    earlier = sorted(k for k in keys if k < key)
    return earlier[-1] if earlier else None


def release_number(keys: list[str], key: str) -> int:
    """The release id of partition ``key``: its rank among the partition keys (releases are numbered 1, 2, ...
    by the store, while a change-log source's keys are log positions with gaps)."""
    if key not in keys:
        raise StoreError(f"partition {key!r} is not a partition of this table; add it first (the sensors do)")
    return sorted(keys).index(key) + 1


@dataclass(frozen=True)
class Fingerprint:
    """What the source sensor compares between ticks: row count, a hash of ids and values, the log position."""

    rows: int
    digest: str
    position: int | None = None

    def as_cursor(self) -> dict:
        return {"rows": self.rows, "digest": self.digest, "position": self.position}


class DuckDBSource(dg.ConfigurableResource):
    """The source table of one protected table, in a DuckDB file the user chooses."""

    database: str = Field(description="Path of the DuckDB file holding the source table.")
    table: str = Field(description="The source table, e.g. 'source.people': one row per individual.")
    change_log: str | None = Field(
        default=None,
        description="Optional change-log table (position, op, <id>, <columns>); when set, a release's partition "
        "key is the log position its snapshot reflects and snapshots are rebuilt from the log.",
    )

    @property
    def replays(self) -> bool:
        """True when snapshots are rebuilt from a change log (so a stored one can be compared with its replay)."""
        return self.change_log is not None

    def _names(self) -> None:
        for name in (self.table, self.change_log):
            if name is not None and not _NAME.match(name):
                raise StoreError(f"source: {name!r} is not a table name of the form schema.table")

    def _connect(self) -> duckdb.DuckDBPyConnection:
        self._names()
        if not Path(self.database).exists():
            raise StoreError(f"source database {self.database}: no such file (create the source table first)")
        try:
            return duckdb.connect(self.database, read_only=True)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreError(
                    f"source database {self.database}: locked by another process for writing; "
                    f"retry when it has finished ({exc})"
                ) from exc
            raise StoreError(f"source database {self.database}: cannot open ({exc})") from exc

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """Rows and an order-independent hash of every row's id and values (one DuckDB scan).

        For a change log: its row count and highest position (the log only grows).
        """
        with self._connect() as con:
            if self.change_log:
                query = f"SELECT count(*), coalesce(max(position), 0) FROM {self.change_log}"
                rows, top = con.execute(query).fetchone()
                return Fingerprint(int(rows), str(top), int(top))
            columns = ", ".join(quote(c) for c in spec.columns)
            rows, digest = con.execute(
                f"SELECT count(*), coalesce(sum(hash({columns}))::VARCHAR, '0') FROM {self.table}"
            ).fetchone()
        return Fingerprint(int(rows), digest)

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The source rows with ``spec.columns``: the current table, or the log replayed up to ``position``."""
        columns = ", ".join(quote(c) for c in spec.columns)
        with self._connect() as con:
            present = _columns(con, self.change_log or self.table)
            missing = [c for c in spec.columns if c not in present]
            if missing:
                raise SnapshotError(
                    f"source {self.change_log or self.table}: column(s) {missing} named in spec {spec.name!r} are "
                    f"missing (schema drift); the source has {sorted(present)}"
                )
            if not self.change_log:
                return con.execute(f"SELECT {columns} FROM {self.table} ORDER BY {quote(spec.id)}").df()
            if position is None:
                raise StoreError(f"source {self.change_log}: a change-log snapshot needs its log position")
            return con.execute(
                f"""
                SELECT {columns} FROM (
                    SELECT *, row_number() OVER (PARTITION BY {quote(spec.id)} ORDER BY position DESC) AS latest
                    FROM {self.change_log} WHERE position <= ?
                ) WHERE latest = 1 AND op <> 'delete' ORDER BY {quote(spec.id)}
                """,
                [position],
            ).df()

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """The partition key of the next release: the log position, or one past the last key."""
        if self.change_log:
            return partition_key(fingerprint.position)
        return partition_key(max((int(k) for k in keys), default=0) + 1)


class FrameSource:
    """A snapshot given as a data frame (``run_release``, the CLI): what the snapshot asset reads of a source."""

    replays = False

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        missing = [c for c in spec.columns if c not in self.frame.columns]
        if missing:
            raise SnapshotError(f"snapshot is missing column(s) {missing} named in spec {spec.name!r}")
        return self.frame[spec.columns]



def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    return set(con.execute(f"SELECT * FROM {table} LIMIT 0").df().columns)

