"""A landing zone as a source: a folder into which another process drops Parquet or CSV files, each a snapshot of
the whole table or a batch of changes.

A file's kind is stated by the source (``kind``) or, when that is left out, by the file's name:
``snapshot-*.parquet`` / ``snapshot-*.csv`` hold every row of the table, ``changes-*.parquet`` / ``changes-*.csv``
hold changes, one row each, with an ``op`` column (``insert``, ``update`` or ``delete``; an insert or update
carries the row's new values, a delete needs only the id). Files are taken in the order of their names after
the kind prefix (``snapshot-0002`` after ``changes-0001``; a snapshot before changes of the same name), so those
names must sort in the order the files were written (a UTC timestamp does: ``changes-20260131T0900.parquet``).
Other files are ignored.

A half-written file is never read. The writer's protocol: write the file under a name the zone ignores (one that
starts with ``.`` or ``_``, or ends in another suffix such as ``.tmp``) and rename it into place when it is
complete (a rename within one file system is atomic). Parquet files are checked as well: one whose footer
cannot be read (still being copied in place) is left out until it can. A CSV file has no footer, so for CSV the
rename is the only guard.

The current rows are the last snapshot file with every changes file after it applied in order; a release
captures them when its snapshot is materialised (as ``DuckDBTableSource``), and the sensor's fingerprint is the
list of complete files (names, sizes, modification times), so each new file is picked up once.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from ..core.spec import Spec
from ..errors import SnapshotError, StoreError
from ..pipeline import read_snapshot
from .sources import Fingerprint, _after

#: What a row of a changes file does to its id, the values of its ``op`` column.
OPS = ("insert", "update", "delete")
#: What a file of the zone holds: every row, or changes with an op column.
KINDS = ("snapshot", "changes")
#: The suffixes of the files a zone reads.
SUFFIXES = (".parquet", ".pq", ".csv")


class LandingZoneSource(dg.ConfigurableResource):
    """A folder of complete Parquet/CSV files, each a snapshot or a batch of changes, applied in name order and
    captured when an unpublished release's snapshot is materialised.

    Example:
        ```python
        source = LandingZoneSource(folder="landing/patients")  # snapshot-*.parquet, changes-*.csv, ...
        defs = release_definitions("patients.yaml", "patients.duckdb", source)
        ```
    """

    folder: str = Field(description="The folder the files land in.")
    kind: str | None = Field(
        default=None,
        description="What every file holds: 'snapshot' (all rows) or 'changes' (rows with an op column); left "
        "out, a file's name says it: snapshot-* or changes-*.",
    )
    op: str = Field(default="op", description="The column of a changes file holding insert, update or delete.")

    @property
    def replays(self) -> bool:
        """False: a snapshot is captured from the files present and kept once published."""
        return False

    def files(self) -> list[tuple[Path, str]]:
        """The complete files in the order they apply (``_order``), each with its kind (``snapshot`` or
        ``changes``).

        Left out: names starting with ``.`` or ``_``, other suffixes, files of no kind, and Parquet files whose
        footer cannot be read yet. Cost: one directory listing and one footer read per Parquet file.

        Raises:
            StoreError: the folder does not exist, or ``kind`` is neither snapshot nor changes.
        """
        folder = Path(self.folder)
        if self.kind not in (None, *KINDS):
            raise StoreError(f"source {folder}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not folder.is_dir():
            raise StoreError(f"source {folder}: no such folder")
        found = []
        for path in folder.iterdir():
            kind = self.kind or next((k for k in KINDS if path.name.startswith(k)), None)
            if (kind and path.name[0] not in "._" and path.suffix.lower() in SUFFIXES and path.is_file()
                    and (path.suffix.lower() == ".csv" or _complete_parquet(path))):
                found.append((path, kind))
        return sorted(found, key=self._order)

    def _order(self, file: tuple[Path, str]) -> tuple[str, int]:
        """Where ``file`` goes: by its name after the kind prefix (the whole name when ``kind`` is set), a
        snapshot before changes of the same name."""
        path, kind = file
        return (path.name if self.kind else path.name[len(kind):]), KINDS.index(kind)

    def fingerprint(self, spec: Spec) -> Fingerprint:
        """The number of complete files and a hash of their names, sizes and modification times."""
        stamp = hashlib.sha256()
        files = self.files()
        for path, _ in files:
            status = path.stat()
            stamp.update(f"{path.name}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
        return Fingerprint(len(files), stamp.hexdigest())

    def read(self, spec: Spec, position: int | None = None) -> pd.DataFrame:
        """The current rows with ``spec.columns``, by id: the last snapshot file (none: no rows) with the changes
        files after it applied in name order, each row of a batch putting its values (insert, update) or
        removing its id (delete), the last row of an id in a batch winning. ``position`` is not used.

        Cost: one read of each file from the last snapshot on (``pipeline.read_snapshot``).

        Raises:
            StoreError: the folder does not exist.
            SnapshotError: one line naming the file and the rule (a missing column, an unreadable file, an op
                that is not insert, update or delete).
        """
        files = self.files()
        start = max((i for i, (_, kind) in enumerate(files) if kind == "snapshot"), default=None)
        if start is None:
            rows, changes = pd.DataFrame({c: pd.Series(dtype=object) for c in spec.columns}), files
        else:
            rows, changes = read_snapshot(files[start][0], spec)[spec.columns], files[start + 1:]
        with_op = dataclasses.replace(spec, non_identifiers=(*spec.non_identifiers, self.op))
        for path, _ in changes:
            rows = _apply(rows, read_snapshot(path, with_op), spec, self.op, path)
        return rows.sort_values(spec.id, ignore_index=True)

    def next_key(self, keys: list[str], fingerprint: Fingerprint) -> str:
        """One past the highest existing key."""
        return _after(keys)


def _complete_parquet(path: Path) -> bool:
    """Whether ``path`` ends with a readable Parquet footer (a file still being written does not)."""
    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return False
    return True


def _apply(rows: pd.DataFrame, batch: pd.DataFrame, spec: Spec, op: str, path: Path) -> pd.DataFrame:
    """``rows`` with the changes of ``batch`` (file ``path``) applied, vectorised: the ids it names removed, then
    the last row of each id that is not a delete appended. SnapshotError naming the first row whose op is not one
    of ``OPS``."""
    ops = batch[op]
    wrong = ~ops.isin(OPS)
    if wrong.any():
        row = int(wrong.to_numpy().nonzero()[0][0])
        raise SnapshotError(f"{path}: column {op!r}, row {row + 1}: a change is one of {', '.join(OPS)}")
    last = batch.drop_duplicates(spec.id, keep="last")
    kept = rows[~rows[spec.id].isin(last[spec.id])]
    put = last.loc[last[op] != "delete", spec.columns]
    return pd.concat([kept, put], ignore_index=True) if len(kept) else put.reset_index(drop=True)
