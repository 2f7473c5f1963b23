"""The judge's window holds one Python string per person: the hosting groups' ids share the snapshots'
categories, and a memo entry's ids are the snapshots' own strings where the window holds the person (people who
left keep strings of their own). The values are those read without sharing."""

from __future__ import annotations

import duckdb
import pandas as pd
import pandas.testing as pdt

from dagster_privrelease import pipeline
from dagster_privrelease.core.judge.history import ARCHIVED
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage.read import _vocabulary, memo_frame
from dagster_privrelease.storage.write import memo_blob
from tests.storage.conftest import SPEC
from tests.test_judge_window import DISEASES, comebacks, make_candidate

RELEASES = 4


def text_ids(snapshots: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """Ids as zero-padded text, one of them ``007`` beside ``p0007``."""
    return [s.assign(pid=["007" if i == 7 else f"p{i:04d}" for i in s["pid"]]) for s in snapshots]


def test_the_window_shares_the_snapshots_ids_with_the_hosting_groups_and_the_memo(tmp_path):
    model = {"name": "m_distinct", "m": 2, "update_sets": {d: DISEASES for d in DISEASES}}
    store = ReleaseStore(tmp_path / "ids.duckdb", parse_spec({**SPEC, "model": model, "seed": 11}))
    snapshots = text_ids(comebacks(RELEASES))
    with store.session():
        for n, snapshot in enumerate(snapshots, start=1):
            make_candidate(store, n, snapshot)
            pipeline.publish(store, n, pipeline.judge(store, n))
        window = store.history(upto=RELEASES, since=RELEASES - 1)
    with duckdb.connect(str(store.path), read_only=True) as con:
        hosted = [p for (p,) in con.execute("SELECT pid FROM private.hosting WHERE release_id >= ?",
                                            [RELEASES - 1]).fetchall()]
        blobs = con.execute("SELECT name, frame FROM private.judge_memo WHERE release_id = ?",
                            [RELEASES - 1]).fetchall()
    categories = window.snapshots["pid"].cat.categories
    assert window.hosting["pid"].cat.categories is categories
    assert window.hosting["pid"].astype(object).tolist() == hosted
    words = {word: word for word in categories}
    shared = 0
    for key, frame in window.memo.items():
        if key[0] not in ARCHIVED and "pid" in frame and frame["pid"].dtype == object:  # not read from a table
            found = [value for value in frame["pid"] if value in words]
            assert all(value is words[value] for value in found), key
            shared += len(found)
    assert shared > 0  # some entry holds the window's people
    for name, blob in blobs:
        if name not in ARCHIVED:  # read from its own table
            pdt.assert_frame_equal(window.memo[(name, RELEASES - 1)], memo_frame(blob), obj=name)


def test_an_entry_keeps_the_ids_the_window_does_not_hold_and_its_nulls():
    snapshots = pd.DataFrame({"pid": pd.Categorical(["007", "p0007", "p0001"])})
    vocabulary = _vocabulary(snapshots, "pid")
    assert vocabulary is not None
    entry = pd.DataFrame({"release_id": [1, 1, 2, 2], "pid": ["p0007", "gone", None, "007"]})
    back = memo_frame(memo_blob(entry), {"pid": vocabulary})
    pdt.assert_frame_equal(back, memo_frame(memo_blob(entry)))
    objects = {word: word for word in vocabulary[1]}
    assert back["pid"][0] is objects["p0007"] and back["pid"][3] is objects["007"]
    assert back["pid"][1] == "gone" and back["pid"][2] is None
    assert list(back.columns) == ["release_id", "pid"]
