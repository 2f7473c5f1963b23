"""The schema: drift of the snapshot's columns or of the spec is refused, leaf ranks never move."""

from __future__ import annotations

import pandas as pd
import pytest

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore, sql_type

from .conftest import SPEC, publish, snapshot


def test_schema_drift_is_refused(store, tmp_path):
    publish(store, 1, snapshot(range(10)))
    rows = snapshot(range(10)).astype({"pid": str})
    rows["pid"] = "p" + rows["pid"]
    with pytest.raises(StoreError, match=r"schema drift.*'pid' was BIGINT, now VARCHAR"):
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
    with pytest.raises(StoreError, match=r"taxonomy of 'region'.*leaf ranks"):
        ReleaseStore(store.path, parse_spec(moved)).bound_spec(snapshot(range(10)))


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
    assert store.bound_spec(grown).quasi_identifiers["sex"].taxonomy.leaves == ("M", "F", "X")


def test_sql_type():
    frame = pd.DataFrame({"b": [True], "i": [1], "f": [1.5], "s": ["x"],
                          "t": pd.to_datetime(["2024-01-01"]), "z": pd.to_datetime(["2024-01-01"], utc=True)})
    assert [sql_type(frame[c]) for c in frame] == ["BOOLEAN", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP",
                                                   "TIMESTAMPTZ"]
