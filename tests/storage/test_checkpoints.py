"""How the store's commits reach the file: checkpoints without DuckDB's vacuum, so that a release's rows stay in
row groups of their own (a checkpoint writes what was appended, never merges it into earlier row groups), with
DuckDB's settings put back when the store's connection ends; the staged candidates of published releases are
dropped, so the candidate tables do not grow with the history."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pandas.testing as pdt

from dagster_privrelease.core.encoding import plain_text
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage.connection import STORE_SETTINGS

from .conftest import SPEC, candidate, publish, snapshot


def _settings(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))",
                            [list(STORE_SETTINGS)]).fetchall())


def _wal_bytes(path) -> int:
    wal = f"{path}.wal"
    return os.path.getsize(wal) if os.path.exists(wal) else 0


def _row_groups(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[int, int, int]]:
    """(row group, min release_id, max release_id) of ``table`` from DuckDB's own zone maps."""
    stats = con.execute(f"SELECT row_group_id, stats FROM pragma_storage_info('{table}') "
                        "WHERE column_name = 'release_id' ORDER BY row_group_id").fetchall()
    zones: dict[int, tuple[int, int]] = {}
    for group, zone in stats:
        if "min" in zone:  # a data segment (not the validity mask)
            lo, hi = zones.get(group, (int(zone["min"]), int(zone["max"])))
            zones[group] = (min(lo, int(zone["min"])), max(hi, int(zone["max"])))
    return [(group, lo, hi) for group, (lo, hi) in sorted(zones.items())]


def test_releases_keep_row_groups_of_their_own_and_settings_come_back(tmp_path):
    """A checkpoint never re-writes the row groups of earlier checkpoints: three small releases published in one
    session (their commits in the log, checkpointed when it ends) share a row group, and the two published after,
    each by calls that open the file, keep row groups of their own (DuckDB's vacuum merges all three into one,
    re-writing the earlier rows). A plain ``duckdb.connect`` of the file in the same process works inside the
    session; when the store's connection ends the log is checkpointed and DuckDB's settings are what they
    were."""
    path = tmp_path / "clinic.duckdb"
    with duckdb.connect(":memory:") as fresh:
        defaults = _settings(fresh)
    with ReleaseStore(path, parse_spec(SPEC)).session() as store:
        for j in (1, 2, 3):
            publish(store, j, snapshot(range(4 * j, 4 * j + 12), seed=j))
        with duckdb.connect(str(path)) as plain:  # shares the session's database instance
            assert plain.execute("SELECT count(*) FROM published.manifest").fetchall() == [(3,)]
            assert _settings(plain) != defaults
    assert _wal_bytes(path) == 0
    store = ReleaseStore(path, parse_spec(SPEC))  # no session: each call opens the file
    for j in (4, 5):
        publish(store, j, snapshot(range(4 * j, 4 * j + 12), seed=j))
    assert _wal_bytes(path) == 0
    with duckdb.connect(str(path)) as con:
        assert _settings(con) == defaults
        for table in ("published.release", "private.snapshot", "private.hosting", "published.manifest"):
            # the session's small commits went to the log and were checkpointed together; later ones stay apart
            assert [(lo, hi) for _, lo, hi in _row_groups(con, table)] == [(1, 3), (4, 4), (5, 5)], table


def test_a_commit_in_the_log_survives_a_killed_process(tmp_path):
    """A process killed (SIGKILL, no checkpoint, no close) after publishing inside a session: the publication was
    committed to the log, and the next open replays it, all of it."""
    path = tmp_path / "clinic.duckdb"
    script = textwrap.dedent(f"""
        import os, signal
        from dagster_privrelease.core.spec import parse_spec
        from dagster_privrelease.storage import ReleaseStore
        from tests.storage.conftest import SPEC, publish, snapshot
        with ReleaseStore({str(path)!r}, parse_spec(SPEC)).session() as store:
            publish(store, 1, snapshot(range(12)))
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], check=False, cwd=root, capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr.decode()
    assert _wal_bytes(path) > 0
    store = ReleaseStore(path, parse_spec(SPEC))
    assert store.release_ids() == [1]
    with duckdb.connect(str(path), read_only=True) as con:
        for table in ("published.release", "private.hosting", "private.digest", "published.manifest"):
            assert con.execute(f"SELECT DISTINCT release_id FROM {table}").fetchall() == [(1,)], table


def test_published_candidates_are_dropped_and_the_last_is_kept(store):
    """Publishing release j drops the candidates of releases before j (their rows, kept frames and meta), keeps
    its own (a publication run again reads it), and publishing j again is still a no-op."""
    for j in (1, 2, 3):
        store.stage_snapshot(j, snapshot(range(3 * j, 3 * j + 12), seed=j))
        store.stage_candidate(j, candidate(store, j, fakes=1))
        store.publish(j, store.candidate(j), {"k_anonymity": True}, {"lm": 0.25})
    with store.connect() as con:
        for table in ("candidate_release", "candidate_counterfeit", "candidate_hosting", "candidate_meta",
                      "candidate_state_signature"):
            ids = con.execute(f"SELECT DISTINCT release_id FROM private.{table}").fetchall()
            assert ids == [(3,)], (table, ids)
        published = con.execute("SELECT count(*) FROM published.release WHERE release_id = 3").fetchall()
        assert con.execute("SELECT count(*) FROM private.candidate_release").fetchall() == published
    again = store.candidate(3)
    store.publish(3, again, {"k_anonymity": True}, {"lm": 0.25})
    assert store.release_ids() == [1, 2, 3]
    history = store.history()
    kept = history.release(3).drop(columns="release_id")  # the history's text comes as categoricals
    bounds = {c: again.table[c].dtype for c in kept.columns if c.endswith(("__lo", "__hi"))}  # and its leaf ranks
    pdt.assert_frame_equal(kept.apply(plain_text).astype(bounds), again.table.reset_index(drop=True),  # narrowed
                           check_like=True)
