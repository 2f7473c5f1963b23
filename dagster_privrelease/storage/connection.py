"""Opening a DuckDB file, and the few SQL primitives every other part of the store is written with.

DuckDB lets one process write a file at a time: ``open_duckdb`` retries a locked file with exponential backoff,
then fails with a message naming the file and the process holding it. The release store opens its file through
it; so should any other reader of a DuckDB file that a writer may hold (the Dagster sources: a read-only open).

A ``StoreConnection.session()`` keeps one read-write connection for a block, and every ``StoreConnection`` of the
same file in the same thread uses it inside that block (``current_session``): a release run builds several store
objects (the CLI's, ``run_release``'s, one per Dagster step) and opens the file once, not once per call.

Every connection of the store is refused, and the file left untouched, when the file is not a release store
(``check_store``: another database's file, or one DuckDB cannot read); DuckDB's own messages are never passed on
(``unreadable``), as they may quote stored values.

A read-write connection of the store checkpoints without DuckDB's vacuum (``tune``, ``STORE_SETTINGS``): appended
rows stay in the row groups they were written in, instead of being merged with the table's last ones and
re-written with them, so that a checkpoint costs what was appended, not up to a row group more. It also bounds
DuckDB's memory and gives it a folder to spill to (``resource_settings``: 40% of the machine's memory, a folder
beside the store; ``PRIVRELEASE_MEMORY_LIMIT`` and ``PRIVRELEASE_TEMP_DIRECTORY`` override them), so that the
large joins and sorts of a 10M-row release spill to disk instead of growing the process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import duckdb
import pandas as pd
import pyarrow as pa

from ..errors import StoreError

_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?)(?:\. See also|$)")


def quote(name: str) -> str:
    """A SQL identifier, double-quoted (Adult's columns have dashes: ``"marital-status"``)."""
    return '"' + str(name).replace('"', '""') + '"'


def open_duckdb(
    path: str | Path,
    read_only: bool = False,
    retries: int = 5,
    backoff: float = 0.2,
    what: str = "release store",
) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file ``path``, retrying a file locked by another process ``retries`` times with
    exponential backoff (``backoff``, then twice that, ...: 6.2 s in all with the defaults).

    A read-write open creates the file and its directory; a file of zero bytes holds nothing and is opened as a
    new database. A read-only request for a file this process already holds read-write gets a read-write
    connection to that same instance (DuckDB refuses to mix the two).

    Raises:
        StoreError: its message starting with the path and naming ``what`` the file is (e.g. "source database"),
            built from names, never from DuckDB's text: for a read-only open of a file that does not exist, a
            directory, a file DuckDB cannot read as a database (truncated, corrupt, another format), a file still
            locked after the last retry (naming the process that holds it: DuckDB reports its executable and
            PID).
    """
    path = Path(path)
    if path.is_dir():
        raise StoreError(f"{path}: a directory, not a {what}; name a DuckDB file")
    if read_only and not path.exists():
        raise StoreError(f"{path}: no {what} there (no such file)")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size == 0:  # DuckDB refuses an empty file; it holds nothing
            path.unlink()
    for attempt in range(retries + 1):
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.ConnectionException as exc:
            if not read_only:
                raise StoreError(f"{path}: cannot open the {what}: this process holds it open in another mode "
                                 f"({type(exc).__name__}); close that connection first") from exc
            # this process already has the file open read-write: share that instance (we only read)
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            message = str(exc)
            if "lock" not in message.lower():
                raise StoreError(unreadable(path, what, exc)) from exc
            if attempt == retries:
                match = _LOCK_HOLDER.search(message)
                holder = match.group(1) if match else "another process"
                raise StoreError(
                    f"{path}: the {what} is locked by {holder}; DuckDB lets one process write a file at a "
                    f"time. Gave up after {retries + 1} attempts: wait for that process to finish, or stop it"
                ) from exc
            time.sleep(backoff * 2**attempt)
        except duckdb.Error as exc:
            raise StoreError(unreadable(path, what, exc)) from exc
    raise AssertionError("unreachable")


def unreadable(path: str | Path, what: str, exc: duckdb.Error) -> str:
    """The message for a DuckDB file on which DuckDB failed (``exc``), built from names only: DuckDB's own text
    may quote stored values."""
    return (f"{path}: DuckDB failed to read or write the {what} ({type(exc).__name__}); the failed operation wrote "
            "nothing. A truncated or corrupt file, or one that is not a DuckDB database, cannot be used: restore "
            "it from a backup, or name another file")


#: The tables by which a DuckDB file is known as a release store: every store has both from its creation on.
STORE_TABLES = frozenset({("private", "columns"), ("published", "manifest")})


def check_store(con: duckdb.DuckDBPyConnection, path: str | Path) -> None:
    """Refuse a DuckDB file that is not a release store, before anything is written to it.

    The rule: a file is a release store when it holds the store's own tables (``STORE_TABLES``), or when every
    table and view it holds is in the store's schemas ``private`` and ``published`` (none at all: a new file,
    which becomes a store; some: a store whose creation was cut short). Any other file, e.g. a database
    holding ``main.patients``, belongs to someone else: the store never adds its schemas to it.

    Args:
        con: a connection to the file, opened by ``open_duckdb``.
        path: the file, for the message.

    Raises:
        StoreError: naming the file, how many tables it holds and a few of their names, and the rule.
    """
    sql = ("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() "
           "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = current_database() "
           "AND NOT internal")
    try:
        tables = {(str(s), str(t)) for s, t in con.execute(sql).fetchall()}
    except duckdb.Error as exc:
        raise StoreError(unreadable(path, "release store", exc)) from exc
    if STORE_TABLES <= tables or all(schema in ("private", "published") for schema, _ in tables):
        return
    foreign = sorted(f"{s}.{t}" for s, t in tables if s not in ("private", "published"))
    raise StoreError(
        f"{path}: not a release store: it holds {len(tables)} table(s) and view(s) (e.g. {', '.join(foreign[:3])}) "
        f"but not the store's {' and '.join(sorted(f'{s}.{t}' for s, t in STORE_TABLES))}; a release store is a "
        "DuckDB file of its own, and this one was left untouched: name a new file"
    )


def open_store(path: Path, read_only: bool, retries: int, backoff: float) -> duckdb.DuckDBPyConnection:
    """``open_duckdb`` of a release store, refused (StoreError, ``check_store``) and closed untouched when the file
    is not one."""
    con = open_duckdb(path, read_only, retries, backoff)
    try:
        check_store(con, path)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction on ``con``: committed when the block ends, rolled back when it raises (anything, even
    SystemExit), so a write is all in the file or not at all."""
    con.begin()
    try:
        yield con
    except BaseException:
        con.rollback()
        raise
    con.commit()


@dataclass
class Session:
    """The one read-write connection of a ``StoreConnection.session()`` block, shared by every store object of its
    file in its thread. ``ready``: what has been checked on this connection and need not be again while it is open
    (e.g. the store's schema against a spec, ``schema.StoreSchema._open``)."""

    path: Path
    con: duckdb.DuckDBPyConnection
    ready: set[Hashable] = field(default_factory=set)


#: The open sessions of this thread, by resolved file path (a DuckDB connection is not shared between threads).
_SESSIONS = threading.local()


def _sessions() -> dict[Path, Session]:
    """This thread's open sessions by resolved path."""
    found = getattr(_SESSIONS, "by_path", None)
    if found is None:
        found = _SESSIONS.by_path = {}
    return found


class StoreConnection:
    """The connections of one DuckDB file (``path``): one per call, or one shared by a ``session()``.

    ``retries`` and ``backoff`` are ``open_duckdb``'s: how long a call waits for another process's lock.
    """

    def __init__(self, path: str | Path, retries: int = 5, backoff: float = 0.2):
        self.path = Path(path)
        self.retries = retries
        self.backoff = backoff
        self._key = self.path.resolve()

    def current_session(self) -> Session | None:
        """The session open on this file in this thread (by this or any other ``StoreConnection`` of the same
        file), or None."""
        return _sessions().get(self._key)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the file, closed on exit; a locked file is retried, then StoreError (``open_duckdb``).

        Inside a ``session()`` of this file (in this thread) the session's connection is given, and left open.
        A read-write connection of its own checkpoints without vacuum, and once more when it ends (``tune``,
        ``checkpoint``).
        """
        session = self.current_session()
        if session is not None:
            yield session.con
            return
        con = open_store(self.path, read_only, self.retries, self.backoff)
        restore = None
        try:
            restore = None if read_only else configure(con, self.path)
            yield con
        finally:
            try:
                if restore is not None:
                    checkpoint(con, restore)
            finally:
                con.close()

    def copy_to(self, target: str | Path) -> Path:
        """Copy the store's file, as committed, to ``target`` (replaced if it exists); return ``target``. The copy
        is made holding the store's connection (so no other process writes meanwhile), after a checkpoint;
        DuckDB's log (``<file>.wal``), when a checkpoint left one, is copied along and replayed when the copy is
        opened. Cost: the checkpoint, and the size of the file copied."""
        target = Path(target)
        with self.connect() as con:
            with contextlib.suppress(duckdb.Error):  # refused while another connection is in a transaction
                con.execute("CHECKPOINT")
            shutil.copyfile(self.path, target)
            log = self.path.with_name(self.path.name + ".wal")
            if log.exists():
                shutil.copyfile(log, target.with_name(target.name + ".wal"))
        return target

    @contextmanager
    def session(self) -> Iterator[Self]:
        """Keep one read-write connection open for every call made inside the block, by this object and by any
        other ``StoreConnection`` of the same file in this thread (opening the file costs milliseconds and a
        release makes a few dozen calls through several store objects); yields ``self``. The file stays locked
        for the block's duration, so another process waits for it (``open_duckdb``), then refuses naming this
        one. Nested sessions share the outermost one; the connection is closed when it ends, after a checkpoint
        without vacuum (``tune``, ``checkpoint``). Cost: one open and one checkpoint."""
        if self.current_session() is not None:
            yield self
            return
        con = open_store(self.path, False, self.retries, self.backoff)
        try:
            restore = configure(con, self.path)
        except BaseException:
            con.close()
            raise
        sessions = _sessions()
        sessions[self._key] = Session(self._key, con)
        try:
            yield self
        finally:
            del sessions[self._key]
            try:
                checkpoint(con, restore)
            finally:
                con.close()


#: DuckDB settings of every read-write connection of the store: no vacuum tasks at checkpoints. DuckDB 2.0 writes
#: the rows a checkpoint finds appended as new row groups, then its vacuum merges adjacent row groups that fit in
#: fewer, re-writing them: at 20k rows a release, the checkpoints re-compressed up to 122,880 rows of each
#: appended table, most at every sixth release (the store's ``publish`` 0.17-0.7 s CPU, 1.0-1.8 s every sixth
#: release, growing with the history; without vacuum 0.18-0.31 s through release 50). Without vacuum a release's
#: rows keep the row groups they were written in, so a checkpoint writes what was committed and no more, and a
#: big release's rows are row groups of their own (``release_id`` zone maps skip the others exactly). Row groups
#: whose rows are all deleted (a candidate's, an old memo's) are still dropped; one only partly deleted keeps its
#: space until the rest goes. The price is space: each checkpoint leaves its last block partly filled, and small
#: tables (manifest, digest) a row group per checkpoint (50 releases of 20k rows: a 131 MB file, not 106 MB).
#: The row group size itself cannot be set for a file opened by ``duckdb.connect`` (only by ``ATTACH ...
#: (ROW_GROUP_SIZE n)``, which conflicts with a plain connect of the same file in the same process).
STORE_SETTINGS = {"max_vacuum_tasks": "0"}


#: The environment variables that override ``resource_settings``: DuckDB's ``memory_limit`` (e.g. ``4GB``,
#: ``500MiB``) and ``temp_directory`` (a folder; created when DuckDB first spills).
MEMORY_LIMIT_VARIABLE = "PRIVRELEASE_MEMORY_LIMIT"
TEMP_DIRECTORY_VARIABLE = "PRIVRELEASE_TEMP_DIRECTORY"
#: The share of the machine's physical memory DuckDB may hold by default (DuckDB's own default is 80%: on a
#: machine shared with other work, and beside the release's own numpy arrays, that is too much).
MEMORY_SHARE = 0.4


def resource_settings(path: str | Path) -> dict[str, str]:
    """DuckDB's ``memory_limit`` and ``temp_directory`` for the store at ``path``: ``MEMORY_SHARE`` of the
    machine's physical memory (in MiB) and the folder ``<store>.tmp`` beside the file (DuckDB writes its spilled
    blocks there and removes them when done), unless ``PRIVRELEASE_MEMORY_LIMIT`` / ``PRIVRELEASE_TEMP_DIRECTORY``
    name others. DuckDB keeps its buffers under the limit by spilling joins, sorts and aggregates to the folder;
    Arrow results and registered frames handed to Python are outside it. O(1)."""
    memory = os.environ.get(MEMORY_LIMIT_VARIABLE, "").strip()
    if not memory:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        memory = f"{max(int(physical * MEMORY_SHARE) >> 20, 256)}MiB"
    folder = os.environ.get(TEMP_DIRECTORY_VARIABLE, "").strip() or f"{Path(path)}.tmp"
    return {"memory_limit": memory, "temp_directory": folder}


def configure(con: duckdb.DuckDBPyConnection, path: str | Path) -> dict[str, str]:
    """Set the DuckDB settings of a read-write connection of the store at ``path``: ``STORE_SETTINGS``, whose
    values before are returned for ``checkpoint`` to put back, and ``resource_settings``, which stay for the
    database instance's life (DuckDB reports a limit rounded, e.g. 18.8 GiB, so putting it back would drift).
    StoreError for a value DuckDB refuses (``tune``). Cost: a few SETs."""
    restore = tune(con, STORE_SETTINGS)
    tune(con, resource_settings(path))
    return restore


def tune(con: duckdb.DuckDBPyConnection, settings: dict[str, str]) -> dict[str, str]:
    """Set DuckDB ``settings`` (``STORE_SETTINGS``) and return their values before, for ``checkpoint`` to put
    back. The settings are the database instance's (DuckDB has no per-connection ones), so a plain
    ``duckdb.connect(path)`` of the same file in the same process shares them while the store's connection is
    open, and works as before. Cost: a few SETs."""
    before = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))",
                              [list(settings)]).fetchall())
    for name, value in settings.items():
        try:
            con.execute(f"SET {name} = $value", {"value": value})
        except duckdb.Error as exc:
            variable = {"memory_limit": MEMORY_LIMIT_VARIABLE, "temp_directory": TEMP_DIRECTORY_VARIABLE}.get(name)
            source = f"{variable} (the environment)" if variable else name
            raise StoreError(f"{source}: DuckDB refuses {value!r} as its {name} ({type(exc).__name__}); "
                             f"{'a size such as 4GB or 500MiB' if name == 'memory_limit' else 'a folder'}") from exc
    return before


def checkpoint(con: duckdb.DuckDBPyConnection, restore: dict[str, str]) -> None:
    """End ``tune``: checkpoint what was committed under the tuned settings (without vacuum; DuckDB writes a
    commit of less than ~100 kB, e.g. a manifest row, to its log first), then put the settings back to
    ``restore``, so that the checkpoint DuckDB makes when the last connection closes has nothing left to merge. A
    checkpoint DuckDB refuses (another connection of the process is inside a transaction) is left to DuckDB's
    own; the log keeps the commits meanwhile. Cost: the checkpoint, O(rows committed since the last one)."""
    with contextlib.suppress(duckdb.Error):
        con.execute("CHECKPOINT")
    with contextlib.suppress(duckdb.Error):  # an aborted transaction left by an error refuses SET: closing ends it
        for name, value in restore.items():
            con.execute(f"SET {name} = $value", {"value": value})


#: The name a pandas frame is read under by the statements of a ``registered`` block.
FRAME = "_privrelease_frame"


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> Iterator[str]:
    """``frame`` readable on ``con`` as the view ``FRAME`` for the block (DuckDB scans it in place, no copy);
    yields the name. The view is dropped when the block ends; after a failed statement the transaction refuses
    that, and its rollback drops the view instead. O(1)."""
    con.register(FRAME, frame)
    try:
        yield FRAME
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister(FRAME)


def first_row(con: duckdb.DuckDBPyConnection, sql: str, args: list | dict[str, Any] | None = None) -> tuple | None:
    """The first row of a query (``args``: its parameters, by position or by name), or None; the result is read to the end (DuckDB refuses new work on a
    connection with an unfinished result)."""
    rows = con.execute(sql, args or []).fetchall()
    return rows[0] if rows else None


def scalar(con: duckdb.DuckDBPyConnection, sql: str, args: list | None = None) -> Any:
    """The first value of a query's first row: a ``count(*)``, or a column of a row the store's own invariants
    say exists (StoreError naming the query when it does not: the file was changed behind the store's back)."""
    row = first_row(con, sql, args)
    if row is None:
        raise StoreError(f"the release store is inconsistent: no row for {sql!r} {args or ''}")
    return row[0]


def is_text(kind: pa.DataType) -> bool:
    """Whether an Arrow type is text (plain, large or view)."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)


def query_frame(con: duckdb.DuckDBPyConnection, sql: str, args: list | None = None) -> pd.DataFrame:
    """A query's result as a frame, through Arrow (about twice as fast as ``.df()`` on text columns). Integer
    columns with nulls come back as float64 with NaN, as pandas does for numpy integers."""
    return con.sql(sql, params=args or []).to_arrow_table().to_pandas()


def release_arrow_memory() -> None:
    """Give the memory that Arrow's default pool holds but no longer uses back to the system
    (``MemoryPool.release_unused``). Its allocator (mimalloc or jemalloc) keeps freed pages for later Arrow
    allocations, which numpy and Python cannot use: after reading the judge's window of a 300k-row release
    (Census-KDD, two releases) the pool held 0.2 GB so, about a third of what the reading added to the process.
    Call it after a read or a write that converted much Arrow data, before the work that uses numpy. O(pages
    the pool holds)."""
    pa.default_memory_pool().release_unused()


def release_rows(
    con: duckdb.DuckDBPyConnection, table: str, release_id: int, columns: list[str] | None = None
) -> pd.DataFrame:
    """The rows of ``release_id`` in ``table`` without the release_id column (all other columns, or
    ``columns``), in stored order. A scan of ``table``."""
    what = ", ".join(quote(c) for c in columns) if columns else "* EXCLUDE (release_id)"
    return query_frame(con, f"SELECT {what} FROM {table} WHERE release_id = ?", [release_id])


def table_exists(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
    """Whether ``schema.table`` exists in the file."""
    sql = "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?"
    return scalar(con, sql, [schema, table]) > 0
