"""Opening a DuckDB file another process holds: retried, then refused with a message naming the holder."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import pytest

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore, open_duckdb

from .conftest import SPEC


def hold(path, until: str = "sys.stdin.read()") -> subprocess.Popen:
    """A process holding ``path`` open read-write (so locked) until ``until`` returns; waits until it holds it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(path)!r})
            print("ready", flush=True)
            {until}
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "ready"
    return holder


def test_locked_file_names_the_holder(tmp_path):
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    store.ensure_schema()
    holder = hold(store.path)
    try:
        locked = ReleaseStore(store.path, store.spec, retries=2, backoff=0.01)
        with pytest.raises(StoreError, match=rf"{store.path.name}: the release store is locked by .*PID {holder.pid}"):
            locked.release_ids()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert ReleaseStore(store.path, store.spec).release_ids() == []


def test_a_locked_source_is_retried_then_refused_naming_the_file_and_holder(tmp_path):
    """What a Dagster source does with the file of its source table: a read-only open that waits for a writer."""
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE people AS SELECT 1 AS pid")
    holder = hold(path)
    try:
        with pytest.raises(StoreError, match=rf"{path}: the source database is locked by .*PID {holder.pid}.*"
                                             r"Gave up after 3 attempts"):
            open_duckdb(path, read_only=True, retries=2, backoff=0.01, what="source database")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    holder = hold(path, until="time.sleep(0.5)")  # the writer finishes while the reader retries
    try:
        with open_duckdb(path, read_only=True, retries=8, backoff=0.05, what="source database") as con:
            assert con.execute("SELECT pid FROM people").fetchall() == [(1,)]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_missing_file_is_refused_read_only(tmp_path):
    with pytest.raises(StoreError, match="no source database there"):
        open_duckdb(tmp_path / "nothing.duckdb", read_only=True, what="source database")
    assert not (tmp_path / "nothing.duckdb").exists()
