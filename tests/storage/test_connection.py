"""Opening a DuckDB file another process holds: retried, then refused with a message naming the holder; a store
session: one connection for every store object of the file in its thread, the file locked until it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import duckdb
import pytest

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore, open_duckdb

from .conftest import SPEC, probe


def hold(path, until: str = "sys.stdin.read()") -> subprocess.Popen[str]:
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
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


def let_go(holder: subprocess.Popen[str]) -> None:
    """End a ``hold``: close its stdin, wait for it to exit."""
    if holder.stdin is not None:
        holder.stdin.close()
    holder.wait(timeout=30)


def test_locked_file_names_the_holder(tmp_path):
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    store.ensure_schema()
    holder = hold(store.path)
    try:
        locked = ReleaseStore(store.path, store.spec, retries=2, backoff=0.01)
        with pytest.raises(StoreError, match=rf"{store.path.name}: the release store is locked by .*PID {holder.pid}"):
            locked.release_ids()
    finally:
        let_go(holder)
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
        let_go(holder)
    holder = hold(path, until="time.sleep(0.5)")  # the writer finishes while the reader retries
    try:
        with open_duckdb(path, read_only=True, retries=8, backoff=0.05, what="source database") as con:
            assert con.execute("SELECT pid FROM people").fetchall() == [(1,)]
    finally:
        let_go(holder)


def test_a_missing_file_is_refused_read_only(tmp_path):
    with pytest.raises(StoreError, match="no source database there"):
        open_duckdb(tmp_path / "nothing.duckdb", read_only=True, what="source database")
    assert not (tmp_path / "nothing.duckdb").exists()


def _count_opens(monkeypatch, path) -> list[str]:
    """Every ``duckdb.connect`` of ``path`` from now on (the calls, recorded by path)."""
    opened: list[str] = []
    connect = duckdb.connect

    def counting(database=":memory:", *args, **kwargs):
        if str(database) == str(path):
            opened.append(str(database))
        return connect(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting)
    return opened


def test_a_session_serves_every_store_of_the_file_in_its_thread_and_checks_the_schema_once(tmp_path, monkeypatch):
    """Inside one store's session, other store objects of the same file (a release run makes one per step) read
    and write through the session's connection, and the schema is checked against the spec once; another thread
    opens its own connection; once the session ends, each call opens the file again."""
    spec = parse_spec(SPEC)
    path = tmp_path / "clinic.duckdb"
    ReleaseStore(path, spec).ensure_schema()
    opened = _count_opens(monkeypatch, path)
    created = []
    create = ReleaseStore._create
    monkeypatch.setattr(ReleaseStore, "_create", lambda self, con: (created.append(1), create(self, con)))
    with ReleaseStore(path, spec).session() as outer:
        assert len(opened) == 1
        others = [ReleaseStore(path, spec) for _ in range(3)]
        for store in others:
            assert store.release_ids() == [] and store.manifest().empty
            with store.session():  # nested: the outer session's connection
                store.release_ids()
        assert len(opened) == 1 and len(created) == 1
        session = outer.current_session()
        assert session is not None and all(s.current_session() is session for s in others)
        in_thread = {}
        thread = threading.Thread(target=lambda: in_thread.update(ids=ReleaseStore(path, spec).release_ids()))
        thread.start()
        thread.join(30)
        assert in_thread["ids"] == [] and len(opened) == 2  # a DuckDB connection is not shared across threads
    assert outer.current_session() is None
    ReleaseStore(path, spec).release_ids()
    ReleaseStore(path, spec).release_ids()
    assert len(opened) == 4


def test_a_session_keeps_the_file_locked_against_another_process_until_it_ends(tmp_path):
    """Between the calls of a session the file stays locked: another process's open is retried, then refused
    naming this process; after the session it opens."""
    spec = parse_spec(SPEC)
    path = tmp_path / "clinic.duckdb"

    def other_process() -> str:
        return probe(path)

    with ReleaseStore(path, spec).session() as store:
        store.ensure_schema()
        assert store.release_ids() == []  # no call is running now: the session alone holds the file
        refused = other_process()
        assert "the release store is locked by" in refused and f"PID {os.getpid()}" in refused, refused
    assert other_process() == "opened"
