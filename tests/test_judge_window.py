"""The judge's window in the store (issue #12): before publishing release n, ``pipeline.judge`` reads releases
n-1 and n and the memo kept when release n-1 was judged (``ReleaseStore.history(since=...)``). For every builtin
model, on a stream published through the pipeline, the verifiers and attacks over that window give the same
reports as over the complete history judged from scratch (the generic core test is
``tests/core/judge/test_window.py``; this one adds the store's round trip and the vertical models)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease import pipeline
from dagster_privrelease.core import models
from dagster_privrelease.core.judge.history import rows_of
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from tests.core.judge.test_fast_judge import assert_same_report
from tests.storage.conftest import SPEC

DISEASES = ["flu", "hiv", "gastritis", "bronchitis"]


def people(ids: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    """Random rows of the storage tests' clinic table for ``ids``."""
    n = len(ids)
    return pd.DataFrame({"pid": ids, "age": rng.integers(20, 70, n), "sex": rng.choice(["F", "M"], n),
                         "region": rng.choice(["n1", "n2", "s1", "s2"], n), "visits": rng.integers(0, 9, n),
                         "disease": np.resize(DISEASES, n)})


def stream(kind: str, releases: int, seed: int = 3) -> list[pd.DataFrame]:
    """``releases`` snapshots of 40-60 people: ``horizontal`` deletes 5 and inserts 8 a release, ``updates``
    also changes 6 people's disease and age, ``inserts`` only inserts 8 (a 2-diverse batch) a release."""
    rng = np.random.default_rng(seed)
    table = people(np.arange(40), rng)
    out = [table]
    for j in range(1, releases):
        table = table.copy()
        if kind in ("horizontal", "updates"):
            table = table.drop(index=rng.choice(table.index, 5, replace=False))
        if kind == "updates":
            moved = rng.choice(table.index, 6, replace=False)
            table.loc[moved, "disease"] = rng.choice(DISEASES, 6)
            table.loc[moved, "age"] += 1
        table = pd.concat([table, people(np.arange(8) + 100 * j, rng)], ignore_index=True)
        out.append(table.reset_index(drop=True))
    return out


CASES = {
    "l_diversity": ({"name": "l_diversity", "l": 2}, "horizontal", None),
    "m_invariance": ({"name": "m_invariance", "m": 2}, "horizontal", None),
    "m_distinct": ({"name": "m_distinct", "m": 2, "update_sets": {d: DISEASES for d in DISEASES}}, "updates", None),
    "sequential_l_diversity": ({"name": "sequential_l_diversity", "l": 2}, "inserts",
                               [["age", "sex"], ["sex", "region"], ["age", "region"], ["age", "sex", "region"]]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_window_judges_like_the_complete_history(tmp_path, case):
    model, kind, attributes = CASES[case]
    store = ReleaseStore(tmp_path / "w.duckdb", parse_spec({**SPEC, "model": model, "seed": 11}))
    snapshots = stream(kind, 4)
    with store.session():
        for j, snapshot in enumerate(snapshots[:-1]):
            pipeline.release_next(store, snapshot, attributes[j] if attributes else None)
        n = len(snapshots)
        pipeline.stage(store, n, snapshots[-1])
        for step in models.descriptor(model["name"]).stages:
            pipeline.prepare(store, n, step.name)
        pipeline.make_candidate(store, n, attributes[-1] if attributes else None)
        window = store.history(candidate=n, since=n - 1)
        complete = store.history(candidate=n)
    assert window.first == n - 1 and window.release_ids == [n - 1, n]
    assert {key[1] for key in window.memo} == {n - 1}, "release n-1 was judged through the pipeline: its memo is kept"
    scratch = dataclasses.replace(complete, memo={}, candidate_sets={})
    assert [r.name for r in models.verify_history(window)] == [r.name for r in models.verify_history(scratch)]
    for a, b in zip(models.verify_history(window), models.verify_history(scratch), strict=True):
        assert_same_report(a, b)
    for a, b in zip(models.attack_history(window), models.attack_history(scratch), strict=True):
        assert_same_report(a, b)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 4), max_size=30), st.integers(0, 5), st.booleans())
def test_rows_of_one_release_is_the_masked_copy(ids, release_id, shuffled_index):
    """``History.release`` / ``History.snapshot`` (``rows_of``, one copy of the rows, issue #12) give the frame
    the definition gives, ``frame[frame.release_id == j].reset_index(drop=True)``: same rows, order, dtypes
    (integer, float with NaN, text with None) and a 0..n-1 index, whatever the frame's index; the result is a
    copy (writing to it leaves the history as it was)."""
    n = len(ids)
    frame = pd.DataFrame({"release_id": np.asarray(ids, dtype=np.int64), "x": np.arange(n, dtype=np.float64),
                          "label": [None if i % 3 == 0 else f"v{i % 5}" for i in range(n)],
                          "y": np.where(np.arange(n) % 4 == 0, np.nan, np.arange(n))})
    if shuffled_index:
        frame.index = pd.Index(np.arange(n)[::-1] * 7)
    expected = frame[frame["release_id"] == release_id].reset_index(drop=True)
    got = rows_of(frame, release_id)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert isinstance(got.index, pd.RangeIndex)
    if len(got):
        before = frame.copy()
        got.loc[0, "x"] = -1.0
        got["z"] = 1
        pd.testing.assert_frame_equal(frame, before)
