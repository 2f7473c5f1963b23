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
from dagster_privrelease.core.judge.run import attack_history, verify_history
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from tests.budget import examples
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


def make_candidate(store: ReleaseStore, n: int, snapshot: pd.DataFrame, attributes: list[str] | None = None) -> None:
    """Stage ``snapshot`` as release n, run the model's stages and make its candidate: what the judge reads."""
    pipeline.stage(store, n, snapshot)
    for step in models.descriptor(store.spec.model.name).stages:
        pipeline.prepare(store, n, step.name)
    pipeline.make_candidate(store, n, attributes)


def staged(path, case: str, releases: int = 4) -> tuple[ReleaseStore, int]:
    """A store at ``path`` of ``CASES[case]``'s stream: releases 1..n-1 published, the candidate of release n
    staged; returns the store and n."""
    model, kind, attributes = CASES[case]
    store = ReleaseStore(path, parse_spec({**SPEC, "model": model, "seed": 11}))
    snapshots = stream(kind, releases)
    with store.session():
        for j, snapshot in enumerate(snapshots[:-1]):
            pipeline.release_next(store, snapshot, attributes[j] if attributes else None)
        make_candidate(store, releases, snapshots[-1], attributes[-1] if attributes else None)
    return store, releases


@pytest.mark.parametrize("case", list(CASES))
def test_the_window_judges_like_the_complete_history(tmp_path, case):
    store, n = staged(tmp_path / "w.duckdb", case)
    window = store.history(candidate=n, since=n - 1)
    complete = store.history(candidate=n)
    assert window.first == n - 1 and window.release_ids == [n - 1, n]
    assert {key[1] for key in window.memo} == {n - 1}, "release n-1 was judged through the pipeline: its memo is kept"
    scratch = dataclasses.replace(complete, memo={}, candidate_sets={})
    assert [r.name for r in verify_history(window)] == [r.name for r in verify_history(scratch)]
    for a, b in zip(verify_history(window), verify_history(scratch), strict=True):
        assert_same_report(a, b)
    for a, b in zip(attack_history(window), attack_history(scratch), strict=True):
        assert_same_report(a, b)


def comebacks(releases: int, seed: int = 5) -> list[pd.DataFrame]:
    """``releases`` snapshots of 40 people: each release 6 leave, up to 5 of those who left earlier come back
    (their old rows) and 3 newcomers arrive."""
    rng = np.random.default_rng(seed)
    table, away = people(np.arange(40), rng), people(np.zeros(0, dtype=np.int64), rng)
    out = [table]
    for j in range(1, releases):
        leaving = rng.choice(table.index, 6, replace=False)
        back = away.sample(min(5, len(away)), random_state=j)
        away = pd.concat([away.drop(index=back.index), table.loc[leaving]], ignore_index=True)
        table = pd.concat([table.drop(index=leaving), back, people(np.arange(3) + 100 * j, rng)], ignore_index=True)
        out.append(table)
    return out


@pytest.mark.parametrize("model", [{"name": "l_diversity", "l": 2},
                                   {"name": "m_distinct", "m": 2, "update_sets": {d: DISEASES for d in DISEASES}}])
def test_people_who_come_back_are_judged_like_the_complete_history(tmp_path, model):
    """What the judge keeps by append (``history.ARCHIVED``: the equivalence attack's cold classes, the SUG
    attack's forward weights of the people who left) comes back to the window of release n only for the people
    of release n who were not in release n-1. On a stream where people leave and come back (m-invariance refuses
    an id that comes back, Xiao-Tao Def. 5), every release's reports through the window equal the complete
    history's from scratch, and the window reads fewer archived rows than the store keeps."""
    from dagster_privrelease.core.judge.attacks.equivalence import RETIRED
    from dagster_privrelease.core.judge.attacks.sug import RETIRED as SUG_RETIRED
    from dagster_privrelease.storage.write import archive_table

    archived = SUG_RETIRED if model["name"] == "m_distinct" else RETIRED

    store = ReleaseStore(tmp_path / "c.duckdb", parse_spec({**SPEC, "model": model, "seed": 11}))
    cut = []
    with store.session():
        for n, snapshot in enumerate(comebacks(7), start=1):
            make_candidate(store, n, snapshot)
            if n > 2:
                window = store.history(candidate=n, since=n - 1)
                scratch = dataclasses.replace(store.history(candidate=n), memo={}, candidate_sets={})
                for a, b in zip(attack_history(window), attack_history(scratch), strict=True):
                    assert_same_report(a, b)
                with store._open() as con:
                    kept = con.execute(f"SELECT count(*) FROM private.{archive_table(archived)}").fetchone()
                cut.append((len(window.memo[(archived, n - 1)]), kept[0] if kept else 0))
            assert pipeline.publish(store, n, pipeline.judge(store, n))["release_id"] == n
    assert all(given <= kept for given, kept in cut) and any(given < kept for given, kept in cut), cut
    assert any(given > 0 for given, _ in cut), "somebody came back"


@settings(max_examples=examples(80), deadline=None)
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
