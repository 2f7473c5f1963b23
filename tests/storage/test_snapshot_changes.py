"""``StoreReader.snapshot_changes`` (ids and a hash of each row, joined in DuckDB) against ``core.stream.changes``
of the two snapshots read whole, each less its held-back ids: a text-id stream whose ids leave and come back,
whose non-identifier goes to and from null, and whose releases hold tuples back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.core.stream import changes
from dagster_privrelease.storage import ReleaseStore

from .conftest import SPEC

#: Text ids that a number-minded reader would equate: ``7``, ``007`` and ``p007`` are three people.
IDS = np.array([f"p{i:03d}" for i in range(40)] + ["7", "007", "07", "p7"], dtype=object)


def stream(releases: int) -> list[pd.DataFrame]:
    """``releases`` snapshots over ``IDS``: each keeps most people (some leave and later come back), changes a
    few ages and visits, and sets visits to null and back (two nulls are equal, a null against a value is not)."""
    rng = np.random.default_rng(3)
    people = pd.DataFrame({
        "pid": IDS, "age": rng.integers(20, 70, len(IDS)), "sex": rng.choice(["F", "M"], len(IDS)),
        "region": rng.choice(["n1", "n2", "s1", "s2"], len(IDS)),
        "visits": pd.array(rng.integers(0, 9, len(IDS)), dtype="Float64"),
        "disease": rng.choice(["flu", "hiv", "gastritis"], len(IDS)),
    })
    people.loc[people.index % 5 == 0, "visits"] = pd.NA  # null from the first release on
    out = []
    for _ in range(releases):
        here = people[rng.random(len(people)) > 0.2].reset_index(drop=True)  # about a fifth away this time
        out.append(here.copy())
        moved = rng.choice(len(people), 4, replace=False)
        people.loc[moved[:2], "age"] += 1
        people.loc[moved[2], "visits"] = pd.NA if pd.notna(people.loc[moved[2], "visits"]) else 3.0
        people.loc[moved[3], "disease"] = "hiv" if people.loc[moved[3], "disease"] != "hiv" else "flu"
    return out


def test_the_counts_are_those_of_the_snapshots_compared_whole(tmp_path):
    store = ReleaseStore(tmp_path / "changes.duckdb", parse_spec(SPEC))
    frames = stream(8)
    held = {j: pd.Series(frame["pid"].iloc[:3].to_numpy() if j % 3 == 0 else [], dtype=object)
            for j, frame in enumerate(frames, start=1)}
    totals = {"inserts": 0, "deletes": 0, "updates": 0}
    with store.session():
        for j, frame in enumerate(frames, start=1):
            store.stage_snapshot(j, frame)
            given = {i: held[i] for i in (j, j - 1) if i >= 1}
            got = store.snapshot_changes(j, given)

            def published(i: int) -> pd.DataFrame:
                if i < 1:
                    return frames[0].iloc[:0]
                stored = store.snapshot(i)
                assert stored is not None
                return stored[~stored["pid"].isin(held[i])]

            assert got == changes(published(j - 1), published(j), "pid"), j
            totals = {k: totals[k] + got[k] for k in totals}
    # the stream exercises every count: people leave, come back (inserts after release 1) and change
    assert totals["deletes"] > 0 and totals["updates"] > 0 and totals["inserts"] > len(frames[0])


def test_a_value_and_a_null_differ_and_two_nulls_do_not(tmp_path):
    store = ReleaseStore(tmp_path / "nulls.duckdb", parse_spec(SPEC))
    base = pd.DataFrame({"pid": ["007", "7", "p7"], "age": [30, 40, 50], "sex": ["F", "M", "F"],
                         "region": ["n1", "s1", "n2"], "visits": [np.nan, 2.0, np.nan],
                         "disease": ["flu", "hiv", "flu"]})
    after = base.assign(visits=[np.nan, np.nan, 1.0])  # 007 stays null, 7 becomes null, p7 gets a value
    with store.session():
        store.stage_snapshot(1, base)
        store.stage_snapshot(2, after)
        assert store.snapshot_changes(2, {}) == {"inserts": 0, "deletes": 0, "updates": 2}
        # holding 7 back from both releases leaves p7's update alone
        held = {j: pd.Series(["7"], dtype=object) for j in (1, 2)}
        assert store.snapshot_changes(2, held) == {"inserts": 0, "deletes": 0, "updates": 1}


def test_a_snapshot_never_staged_is_refused(tmp_path):
    store = ReleaseStore(tmp_path / "none.duckdb", parse_spec(SPEC))
    store.stage_snapshot(1, stream(1)[0])
    with pytest.raises(Exception, match="release 2: no snapshot staged"):
        store.snapshot_changes(2, {})
