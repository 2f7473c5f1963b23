"""The DuckDB release store: round trip, one-transaction publication, idempotence, order, drift, locks, ranks."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import storage
from dagster_privrelease.core.release import Release, build_release, release_rng
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import SnapshotError, StoreError
from dagster_privrelease.storage import ReleaseStore, frame_digest, release_digest

SPEC = {
    "name": "clinic",
    "id": "pid",
    "sensitive": "disease",
    "quasi_identifiers": {
        "age": {"type": "numeric", "min_width": 1},
        "sex": {"type": "categorical"},
        "region": {"type": "categorical", "hierarchy": {"Any": {"North": ["n1", "n2"], "South": ["s1", "s2"]}}},
    },
    "non_identifiers": ["visits"],
    "model": {"name": "k_anonymity", "k": 2},
}


def snapshot(ids, sexes=("F", "M"), diseases=("flu", "hiv", "gastritis"), seed=0) -> pd.DataFrame:
    """A small synthetic table with one row per id."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pd.DataFrame({
        "pid": np.asarray(ids, dtype=np.int64),
        "age": rng.integers(20, 70, n),
        "sex": rng.choice(list(sexes), n),
        "region": rng.choice(["n1", "n2", "s1", "s2"], n),
        "visits": rng.integers(0, 9, n),
        "disease": rng.choice(list(diseases), n),
    })


def candidate(store: ReleaseStore, release_id: int, fakes: int = 0) -> Release:
    """A homogeneous release of the staged snapshot: pairs by age (a 2-anonymous partition), ``fakes`` counterfeits
    in group 0, and a small model state."""
    snap = store.snapshot(release_id)
    spec = store.bound_spec(snap)
    order = np.argsort(snap["age"].to_numpy(), kind="stable")
    groups = np.empty(len(snap), dtype=np.int64)
    groups[order] = np.minimum(np.arange(len(snap)) // 2, len(snap) // 2 - 1)
    counterfeits = pd.DataFrame({"group_id": [0] * fakes, "disease": ["flu"] * fakes}) if fakes else None
    state = {"signature": pd.DataFrame({"pid": snap["pid"], "bucket": groups})}
    return build_release(snap, groups, spec, release_rng(spec, release_id), counterfeits, state=state)


@pytest.fixture
def store(tmp_path) -> ReleaseStore:
    """A store whose calls share one connection (opening a DuckDB file costs ~50 ms); the locked-file test opens
    the file afresh on every call."""
    with ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC)).session() as store:
        yield store


def publish(store: ReleaseStore, release_id: int, rows: pd.DataFrame, fakes: int = 0) -> Release:
    store.stage_snapshot(release_id, rows)
    release = candidate(store, release_id, fakes)
    store.publish(release_id, release, {"k_anonymity": True}, {"lm": 0.25})
    return release


def published_rows(store: ReleaseStore) -> int:
    with store.connect() as con:
        return con.execute("SELECT count(*) FROM published.release").fetchall()[0][0]


def test_round_trip(store):
    first = publish(store, 1, snapshot(range(10)), fakes=2)
    second = publish(store, 2, snapshot(range(3, 14), seed=1))
    history = store.history()
    assert history.release_ids == [1, 2]
    for release_id, release in ((1, first), (2, second)):
        stored = history.releases[history.releases["release_id"] == release_id].drop(columns="release_id")
        assert frame_digest(stored) == frame_digest(release.table)
        hosting = history.hosting[history.hosting["release_id"] == release_id].drop(columns="release_id")
        assert frame_digest(hosting) == frame_digest(release.hosting)
    assert history.counterfeits[["release_id", "group_id", "count"]].values.tolist() == [[1, 0, 2]]
    assert sorted(history.snapshots["release_id"].value_counts().items()) == [(1, 10), (2, 11)]
    manifest = store.manifest()
    assert manifest["release_id"].tolist() == [1, 2]
    assert manifest.loc[0, "rows"] == 12 and manifest.loc[0, "counterfeits"] == 2 and manifest.loc[0, "groups"] == 5
    assert manifest.loc[0, "params"] == {"k": 2}
    assert manifest.loc[0, "attributes"] == ["age", "sex", "region"]
    assert manifest.loc[1, "checks"] == {"k_anonymity": True} and manifest.loc[1, "utility"] == {"lm": 0.25}
    assert storage.read_manifest(store.path)["release_id"].tolist() == [1, 2]
    previous = store.previous(2)
    assert previous.release_id == 1
    assert frame_digest(previous.table) == frame_digest(first.table)
    assert frame_digest(previous.snapshot) == frame_digest(store.snapshot(1))
    assert frame_digest(previous.state["signature"]) == frame_digest(first.state["signature"])
    assert store.previous(1) is None


def test_candidate_round_trip_and_history_with_candidate(store):
    publish(store, 1, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(4, 12), seed=2))
    release = candidate(store, 2, fakes=1)
    store.stage_candidate(2, release)
    assert release_digest(store.candidate(2)) == release_digest(release)
    history = store.history(candidate=2)
    assert history.release_ids == [1, 2]
    assert (history.releases["release_id"] == 2).sum() == len(release.table)
    assert history.counterfeits["release_id"].tolist() == [2]
    assert store.release_ids() == [1]  # the candidate is not published


def test_history_leaves_out_the_tuples_a_release_held_back(store):
    """A tuple in state ``held_back`` is not in T(j) for the judge, published or candidate; the stored snapshot
    keeps it (the model reads it again as a new tuple of the next release)."""
    store.stage_snapshot(1, snapshot(range(10)))
    release = candidate(store, 1)
    release.state["held_back"] = pd.DataFrame({"pid": np.array([3, 7], dtype=np.int64)})
    store.publish(1, release, {"m_invariance": True}, {})
    store.stage_snapshot(2, snapshot(range(12), seed=2))
    second = candidate(store, 2)
    second.state["held_back"] = pd.DataFrame({"pid": np.array([11], dtype=np.int64)})
    store.stage_candidate(2, second)
    snapshots = store.history(candidate=2).snapshots
    assert sorted(snapshots.loc[snapshots["release_id"] == 1, "pid"]) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert sorted(snapshots.loc[snapshots["release_id"] == 2, "pid"]) == list(range(11))
    assert len(store.snapshot(1)) == 10


def test_publish_is_one_transaction(store, monkeypatch):
    rows = snapshot(range(10))
    store.stage_snapshot(1, rows)
    release = candidate(store, 1)
    real = storage._insert

    def failing(con, table, frame):
        if table == "private.hosting":  # after published.release, .counterfeit and .domain were written
            raise RuntimeError("disk full")
        real(con, table, frame)

    monkeypatch.setattr(storage, "_insert", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        store.publish(1, release, {}, {})
    assert store.release_ids() == [] and published_rows(store) == 0
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM published.domain").fetchall()[0][0] == 0
    monkeypatch.setattr(storage, "_insert", real)
    store.publish(1, release, {}, {})
    assert store.release_ids() == [1] and published_rows(store) == 10


def test_publish_is_idempotent(store):
    release = publish(store, 1, snapshot(range(10)))
    store.publish(1, release, {"other": False}, {})  # same content: no-op
    assert store.release_ids() == [1] and published_rows(store) == 10
    assert store.manifest().loc[0, "checks"] == {"k_anonymity": True}
    other = candidate(store, 1, fakes=1)
    with pytest.raises(StoreError, match="already published with different content"):
        store.publish(1, other, {}, {})


def test_out_of_order_is_refused(store):
    store.stage_snapshot(1, snapshot(range(10)))
    with pytest.raises(StoreError, match="next release to stage is 2"):
        store.stage_snapshot(3, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(10), seed=3))
    with pytest.raises(StoreError, match="next release to publish is 1"):
        store.publish(2, candidate(store, 2), {}, {})
    with pytest.raises(StoreError, match="predecessor, release 1, published first"):
        store.previous(2)
    with pytest.raises(StoreError, match="no candidate staged"):
        store.candidate(1)


def test_snapshot_is_never_overwritten(store):
    first = store.stage_snapshot(1, snapshot(range(10)))
    again = store.stage_snapshot(1, snapshot(range(100, 120), seed=9))
    assert frame_digest(again) == frame_digest(first) == frame_digest(store.snapshot(1))
    assert sorted(store.snapshot(1)["pid"]) == list(range(10))


def test_discard_drops_an_unpublished_snapshot(store):
    publish(store, 1, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(10), seed=1))
    with pytest.raises(StoreError, match="never discarded"):
        store.discard(1)
    store.discard(2)
    assert store.snapshot(2) is None
    assert sorted(store.stage_snapshot(2, snapshot(range(50, 60)))["pid"]) == list(range(50, 60))


def test_bad_snapshot_writes_nothing(store):
    rows = snapshot(range(10))
    rows.loc[3, "region"] = "e1"
    with pytest.raises(SnapshotError, match="'region'.*'e1'"):
        store.stage_snapshot(1, rows)
    assert store.snapshot(1) is None


def test_schema_drift_is_refused(store, tmp_path):
    publish(store, 1, snapshot(range(10)))
    rows = snapshot(range(10)).astype({"pid": str})
    rows["pid"] = "p" + rows["pid"]
    with pytest.raises(StoreError, match="schema drift.*'pid' was BIGINT, now VARCHAR"):
        store.stage_snapshot(2, rows)
    holes = snapshot(range(10))  # an integer column with a null reads as float64: still the same column
    holes["visits"] = holes["visits"].where(holes["pid"] != 4)
    assert store.stage_snapshot(2, holes)["visits"].isna().sum() == 1
    changed = dict(SPEC, quasi_identifiers={**SPEC["quasi_identifiers"], "visits": {"type": "numeric"}},
                   non_identifiers=[])
    with pytest.raises(StoreError, match=r"schema drift.*visits \(non_identifier\).*visits \(quasi_identifier"):
        ReleaseStore(store.path, parse_spec(changed)).ensure_schema()
    moved = dict(SPEC, quasi_identifiers={**SPEC["quasi_identifiers"],
                                          "region": {"type": "categorical", "hierarchy": {"Any": ["s2", "n1", "n2",
                                                                                                  "s1"]}}})
    with pytest.raises(StoreError, match="taxonomy of 'region'.*leaf ranks"):
        ReleaseStore(store.path, parse_spec(moved)).bound_spec()


def test_bound_spec_keeps_ranks_across_releases(store):
    publish(store, 1, snapshot(range(10), sexes=("M",), diseases=("hiv", "flu")))
    grown = snapshot(range(10, 20), sexes=("F", "M", "X"), diseases=("flu", "acne", "hiv"), seed=4)
    spec = store.bound_spec(grown)
    assert spec.quasi_identifiers["sex"].taxonomy.leaves == ("M", "F", "X")
    assert spec.sensitive_values == ("flu", "hiv", "acne")  # stored order first, then the new value
    with store.connect() as con:
        domain = con.execute("SELECT attribute, value, rank FROM published.domain ORDER BY attribute, rank").fetchall()
    assert domain == [("region", "n1", 0), ("region", "n2", 1), ("region", "s1", 2), ("region", "s2", 3),
                      ("sex", "M", 0)]
    publish(store, 2, grown)
    release_2 = store.history().releases.query("release_id == 2")
    ranks = spec.quasi_identifiers["sex"].taxonomy.rank
    point = release_2[release_2["sex__lo"] == release_2["sex__hi"]]
    assert (point["sex__lo"] == point["sex"].map(ranks)).all()
    assert store.bound_spec().quasi_identifiers["sex"].taxonomy.leaves == ("M", "F", "X")


def test_locked_file_names_the_holder(tmp_path):
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    store.ensure_schema()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(store.path)!r})
            print("ready", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        locked = ReleaseStore(store.path, store.spec, retries=2, backoff=0.01)
        with pytest.raises(StoreError, match=rf"{store.path.name}: the release store is locked by .*PID {holder.pid}"):
            locked.release_ids()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert ReleaseStore(store.path, store.spec).release_ids() == []


def test_state_names_are_checked(store):
    store.stage_snapshot(1, snapshot(range(10)))
    release = candidate(store, 1)
    release.state = {"Bad Name": release.state["signature"]}
    with pytest.raises(StoreError, match="state 'Bad Name'"):
        store.stage_candidate(1, release)
    with duckdb.connect(str(store.path)) as con:
        assert con.execute("SELECT count(*) FROM private.candidate_meta").fetchall()[0][0] == 0
