"""The read side: a release and its candidate read back as written, the history the judge reads (the models'
state included), what a model reads of the past."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.judge.run import verify_history
from dagster_privrelease.core.models import m_invariance
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore, frame_digest, read_manifest, release_digest

from .conftest import SPEC, candidate, publish, snapshot


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
    assert read_manifest(store.path)["release_id"].tolist() == [1, 2]
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


def test_history_carries_the_model_state(store):
    """``History.states``: the published state of releases 1..upto and, with a candidate, its staged state, by name
    with release_id; the snapshots are as staged, and a model's ``judged`` view reads the state (m-invariance:
    a held-back tuple is not in T(j) for the judge, published or candidate)."""
    store.stage_snapshot(1, snapshot(range(10)))
    release = candidate(store, 1)
    release.state["held_back"] = pd.DataFrame({"pid": np.array([3, 7], dtype=np.int64)})
    store.publish(1, release, {"m_invariance": True}, {})
    store.stage_snapshot(2, snapshot(range(12), seed=2))
    second = candidate(store, 2)
    second.state["held_back"] = pd.DataFrame({"pid": np.array([11], dtype=np.int64)})
    store.stage_candidate(2, second)

    history = store.history(candidate=2)
    assert sorted(history.states) == ["held_back", "signature"]
    held = history.states["held_back"]
    assert held[["release_id", "pid"]].values.tolist() == [[1, 3], [1, 7], [2, 11]]
    assert history.states["signature"]["release_id"].value_counts().to_dict() == {1: 10, 2: 12}
    assert (history.snapshots["release_id"] == 1).sum() == 10  # the store leaves snapshots as staged
    snapshots = m_invariance.judged(history).snapshots
    assert sorted(snapshots.loc[snapshots["release_id"] == 1, "pid"]) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert sorted(snapshots.loc[snapshots["release_id"] == 2, "pid"]) == list(range(11))
    assert len(store.snapshot(1)) == 10

    published = store.history()  # without the candidate: release 1's state only
    assert published.states["held_back"]["pid"].tolist() == [3, 7]
    assert set(published.states["signature"]["release_id"]) == {1}


def test_the_judge_reads_held_back_tuples_from_the_stored_state(tmp_path):
    """End to end through the store: m-invariance holds back some of 12 new tuples of one value; the history
    carries them in ``states`` and the judge, through the model's ``judged`` view, lets the release out (read as
    stored, T(2) would hold tuples that no group hosts)."""
    spec = parse_spec(dict(SPEC, model={"name": "m_invariance", "m": 2, "hold_back": True}))
    with ReleaseStore(tmp_path / "clinic.duckdb", spec).session() as store:
        first = snapshot(range(40))
        pipeline.release_next(store, first)
        new = snapshot(range(40, 52), diseases=("flu",), seed=1)
        pipeline.release_next(store, pd.concat([first, new], ignore_index=True))
        history = store.history()
        held = history.states["held_back"]
        held = held.loc[held["release_id"] == 2, "pid"]
        assert len(held) and set(held) <= set(range(40, 52)) | set(first["pid"])
        assert (history.hosting["release_id"] == 2).sum() == 52 - len(held)
        assert all(r.ok for r in verify_history(history))
        failed = [r.name for r in verify_history(dataclasses.replace(history, states={})) if not r.ok]
        assert failed == ["generalisation"]


def test_history_without_state_has_none(store):
    publish(store, 1, snapshot(range(10)))
    publish(store, 2, snapshot(range(10), seed=1))
    with store.connect() as con:
        con.execute("DELETE FROM private.state_signature")
    assert store.history().states == {}


def test_previous_reads_what_the_model_reads(store):
    """``reads``: nothing, release n-1 (Xiao-Tao Lemma 4), or every earlier published release as well."""
    first = publish(store, 1, snapshot(range(10)))
    second = publish(store, 2, snapshot(range(4, 14), seed=1))
    assert store.previous(3, "nothing") is None
    previous = store.previous(3)
    assert previous.release_id == 2 and previous.earlier is None
    assert frame_digest(previous.table) == frame_digest(second.table)
    everything = store.previous(3, "all")
    assert everything.release_id == 2 and frame_digest(everything.table) == frame_digest(second.table)
    earlier = everything.earlier
    assert earlier["release_id"].tolist() == [1] * len(first.table) + [2] * len(second.table)
    for release_id, release in ((1, first), (2, second)):
        rows = earlier[earlier["release_id"] == release_id].drop(columns="release_id")
        assert frame_digest(rows[release.table.columns]) == frame_digest(release.table)
    assert store.previous(1, "all") is None
    with pytest.raises(StoreError, match="predecessor, release 3"):
        store.previous(4, "all")
    with pytest.raises(StoreError, match="'nothing', 'previous' or 'all'"):
        store.previous(3, "everything")
